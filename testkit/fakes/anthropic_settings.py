"""The 400s the fake Messages API gives for settings a request's model refuses:
sampling parameters, the thinking config, effort, forced tool choice,
prefill, and the model's output and context limits. Which model refuses what
is its entry in anthropic_models.py (each cited there); each wording below
cites where it was documented or observed, or says it is the fake's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .anthropic_cache import prompt_tokens
from .anthropic_models import DISPLAYS, EFFORTS, THINKING_TYPES, ModelBehaviour, behaviour

__all__ = ["settings_problem"]


def _thinking_problem(model: ModelBehaviour, body: Mapping[str, Any]) -> str | None:
    config = body.get("thinking")
    if config is None:
        return None
    if not isinstance(config, dict) or config.get("type") not in THINKING_TYPES:
        # Pydantic-style wording: the fake's own.
        return "thinking.type: Input should be 'enabled', 'disabled', 'adaptive' or 'between_tools'"
    kind = config["type"]
    if kind not in model.thinking_types:
        if kind == "enabled" and "adaptive" in model.thinking_types:
            # Documented for Opus 5.5:
            # https://platform.claude.com/docs/zh-CN/models/opus-5-5/whats-new-opus-5-5
            # observed on Sonnet 5 (third-party):
            # https://github.com/AAClause/nvda-OpenAI/issues/126
            return (
                '"thinking.type.enabled" is not supported for this model. Use '
                '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
            )
        if kind == "disabled" and "between_tools" in model.thinking_types:
            # The real message "points to between_tools":
            # https://platform.claude.com/docs/zh-TW/models/sonnet-5-5/whats-new-sonnet-5-5
            # Its exact text is not published: this is the fake's adaptation of
            # the documented Opus 5.5 wording ("thinking.type.disabled" ... Use
            # "thinking.type.adaptive" and "output_config.effort" ...):
            # https://platform.claude.com/docs/zh-CN/models/opus-5-5/whats-new-opus-5-5
            return (
                '"thinking.type.disabled" is not supported for this model. Use '
                '"thinking.type.between_tools" for the lowest thinking setting, or '
                '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
            )
        # The same pattern for the other refused types: the fake's wording.
        return f'"thinking.type.{kind}" is not supported for this model.'
    if kind == "enabled":
        budget = config.get("budget_tokens")
        # "Must be ≥1024 and less than `max_tokens`" (SDK thinking_config_enabled_param.py);
        # the wordings are the fake's.
        if isinstance(budget, bool) or not isinstance(budget, int):
            return "thinking.enabled.budget_tokens: Field required"
        if budget < model.min_budget_tokens:
            return (
                "thinking.enabled.budget_tokens: Input should be greater than or equal to "
                f"{model.min_budget_tokens}"
            )
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, int) and budget >= max_tokens:
            return "`max_tokens` must be greater than `thinking.budget_tokens`."
    display = config.get("display")
    if display is not None and kind in ("adaptive", "enabled") and display not in DISPLAYS:
        return f"thinking.{kind}.display: Input should be 'summarized' or 'omitted'"
    return None


def _effort_problem(model: ModelBehaviour, body: Mapping[str, Any]) -> str | None:
    output_config = body.get("output_config")
    if output_config is None:
        effort = None
    elif not isinstance(output_config, dict):
        return "output_config: Input should be a valid dictionary"
    else:
        effort = output_config.get("effort")
    if effort is not None:
        if effort not in EFFORTS:
            return "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"
        # The exact text for an effort a model lacks is not published: the fake's wording.
        if not model.efforts:
            return "output_config.effort: effort is not supported for this model."
        if effort not in model.efforts:
            return f'output_config.effort: "{effort}" is not supported for this model.'
    config = body.get("thinking")
    kind = config.get("type") if isinstance(config, dict) else None
    allowed = model.type_efforts.get(str(kind))
    level = effort if isinstance(effort, str) else model.default_effort
    if allowed is not None and level is not None and level not in allowed:
        # Documented rules (the wording is the fake's):
        # https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/whats-new-sonnet-5-5
        # https://platform.claude.com/docs/zh-CN/models/opus-5/overview
        return (
            f'"thinking.type.{kind}" is not supported with effort "{level}" on this model. '
            f"Use effort {', '.join(e for e in EFFORTS if e in allowed)}."
        )
    return None


def settings_problem(body: Mapping[str, Any]) -> str | None:
    """The 400 the request's model gives for the request's settings, or None.

    Covers sampling parameters, the thinking config, effort, forced tool
    choice, prefill and the model's output and context limits. Nothing for a
    model the table does not know (`LEGACY`).
    """
    model = behaviour(str(body.get("model", "")))
    if not model.known:
        return None
    if not model.sampling:
        for name in ("temperature", "top_p", "top_k"):
            if name in body:
                # Wording observed on Sonnet 5 / Opus 5 (third-party):
                # https://github.com/earendil-works/pi/pull/7961
                # The rule for Sonnet 5.5, "sampling parameters" return a 400:
                # https://platform.claude.com/docs/en/models/sonnet-5-5/migration-guide?ref=apidog.com
                return f"`{name}` is deprecated for this model."
    if (problem := _thinking_problem(model, body)) is not None:
        return problem
    if (problem := _effort_problem(model, body)) is not None:
        return problem
    tool_choice = body.get("tool_choice")
    forced = isinstance(tool_choice, dict) and tool_choice.get("type") in ("any", "tool")
    if forced and not model.forced_tool_choice:
        # Wording observed on Opus 5.5, same rule (third-party):
        # https://github.com/can1357/oh-my-pi/issues/12939
        # "auto" and "none" stay allowed (third-party):
        # https://apidog.com/kr/blog/how-to-use-claude-sonnet-5-5-api
        return 'tool_choice: type "tool" and "any" are not supported for this model.'
    messages = body.get("messages")
    if not model.prefill and isinstance(messages, list) and messages:
        last = messages[-1]
        if isinstance(last, dict) and last.get("role") == "assistant":
            # Wording observed on 4.6+ models (third-party):
            # https://github.com/cloudflare/agents/pull/1618
            return (
                "This model does not support assistant message prefill. "
                "The conversation must end with a user message."
            )
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and max_tokens > model.max_output:
        # The limit is the model page's "Max output"; the wording is the fake's.
        return (
            f"max_tokens: {max_tokens} > {model.max_output}, which is the maximum allowed "
            f"number of output tokens for {body.get('model')}"
        )
    prompt = prompt_tokens(body)
    if prompt > model.context_window:
        # The limit is the model page's "Context window" (tokens as the fake
        # estimates them, anthropic_cache.py); the wording is the fake's.
        return f"prompt is too long: {prompt} tokens > {model.context_window} maximum"
    return None
