"""The fake Messages API's per-model behaviour: which models think, which
thinking settings, efforts and sampling parameters each accepts, and the 400s
the real API gives for the rest (anthropic_settings.py).

House rule: a fake follows the real service's documents, never our code. Each
field of the table below cites the page it comes from (the URLs are the ones
collected in the research notes for Claude Sonnet 5.5); an error wording that
no page documents is marked as the fake's own.

A model name the table does not know (tests use "m", "test", "claude-test-1")
gets `LEGACY`: the fake's lenient default, the behaviour of the fake before it
modelled thinking — no thinking, and none of the per-model checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "DISPLAYS",
    "EFFORTS",
    "LEGACY",
    "MODELS",
    "THINKING_TYPES",
    "ModelBehaviour",
    "ThinkingSettings",
    "behaviour",
    "thinking_settings",
]

EFFORTS = ("low", "medium", "high", "xhigh", "max")
"""The API's effort values, lowest first. SDK anthropic/types/output_config_param.py:
'effort: Optional[Literal["low", "medium", "high", "xhigh", "max"]]'."""
_ALL_EFFORTS = frozenset(EFFORTS)
THINKING_TYPES = ("enabled", "disabled", "adaptive", "between_tools")
"""SDK 2.17 anthropic/types/thinking_config_param.py: the union of the enabled,
disabled, between_tools and adaptive configs."""
DISPLAYS = ("summarized", "omitted")
"""SDK anthropic/types/thinking_config_adaptive_param.py:
'display: Optional[Literal["summarized", "omitted"]]'."""


@dataclass(frozen=True)
class ThinkingSettings:
    """How a request thinks, resolved against its model.

    `mode` "adaptive", "between_tools" (no up-front thinking: only progress
    notes between tool calls, in thinking blocks with summary text,
    https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/whats-new-sonnet-5-5)
    or "enabled" (a manual `budget`).
    """

    mode: str
    effort: str
    display: str
    budget: int | None = None
    narrates_in_thinking: bool = False
    """The model's text between tool calls comes back in thinking blocks
    (`ModelBehaviour.narrates_in_thinking`)."""


@dataclass(frozen=True)
class ModelBehaviour:
    """What one model does with thinking and the settings around it."""

    family: str
    """The model a dated id belongs to; a model reads only its own family's
    thinking blocks (which models read which others' is not public: the
    fake's assumption; "a model reads only some other models' thinking
    blocks", https://platform.claude.com/docs/en/build-with-claude/preserved-thinking?ref=sharkly.ai)."""
    known: bool = True
    """False only for `LEGACY`: no thinking, no per-model checks."""
    thinks_by_default: bool = False
    """Thinks when the request has no `thinking` field."""
    thinking_types: frozenset[str] = frozenset()
    """The `thinking.type` values accepted; others → 400."""
    default_display: str = "summarized"
    efforts: frozenset[str] = frozenset()
    """Accepted `output_config.effort` values; empty → sending one is a 400."""
    default_effort: str | None = None
    type_efforts: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    """Efforts a thinking type is limited to (a type not here: any accepted effort)."""
    min_budget_tokens: int = 1024
    sampling: bool = True
    """temperature / top_p / top_k accepted; False → any of them present is a 400."""
    forced_tool_choice: bool = True
    """tool_choice "any" / "tool" accepted."""
    prefill: bool = True
    """A conversation may end with an assistant message."""
    binds_account: bool = False
    """Its thinking blocks verify only for the account (API key) that got them."""
    binds_prefix: bool = False
    """Its thinking blocks verify only after the same system, tools and earlier messages."""
    context_window: int = 200_000
    max_output: int = 64_000
    narrates_in_thinking: bool = False
    """What the model writes alongside its tool calls comes back in a
    thinking block where the text was, not a text block: its text with
    display "summarized", empty with "omitted"."""


SONNET_5_5 = ModelBehaviour(
    family="claude-sonnet-5-5",
    # "Adaptive thinking is on by default, and the effort parameter controls
    # thinking depth. Its default on the Claude API is high."
    # https://platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5
    thinks_by_default=True,
    # Table row: thinking when the field is absent "on"; accepted types
    # "adaptive", "between_tools"; default display "omitted".
    # https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/migration-guide
    thinking_types=frozenset({"adaptive", "between_tools"}),
    default_display="omitted",
    # Effort low…max (SDK output_config_param.py), default high (whats-new, above).
    efforts=_ALL_EFFORTS,
    default_effort="high",
    # "between_tools works at low/medium/high; at xhigh or max it returns 400"
    # https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/whats-new-sonnet-5-5
    type_efforts=MappingProxyType({"between_tools": frozenset({"low", "medium", "high"})}),
    # "five settings that return a 400 error: thinking budgets, sampling
    # parameters, assistant prefill, forced tool choice, and thinking:
    # {"type": "disabled"}"
    # https://platform.claude.com/docs/en/models/sonnet-5-5/migration-guide?ref=apidog.com
    # Forced tool use: "except Opus 5.5, Sonnet 5.5, ... which return 400"
    # https://platform.claude.com/docs/zh-CN/build-with-claude/thinking-tool-workflows.md
    sampling=False,
    forced_tool_choice=False,
    prefill=False,
    # "Sonnet 5.5 and Haiku 5.5 thinking blocks are also tied to the account
    # that produced them"
    # https://platform.claude.com/docs/ja/build-with-claude/preserved-thinking.md
    # "What came before it: system, tools, and every earlier message. If any of
    # them changes, the block fails the prefix check"
    # https://platform.claude.com/docs/en/build-with-claude/preserved-thinking?ref=sharkly.ai
    # claude-sonnet-5-5 is among the models of
    # https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/fix-bound-to-a-different-conversation.md
    binds_account=True,
    binds_prefix=True,
    # Context window 1M, max output 128K
    # https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/overview
    context_window=1_000_000,
    max_output=128_000,
    # "One more change alters the response shape without failing any request:
    # text between tool calls comes back in thinking blocks. An application
    # that streams that text to its users goes quiet between tool calls until
    # it sets a display value that returns the text, or turns off up-front
    # thinking with between_tools."
    # https://platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5
    # In an agent's loop a reply's text before its tool calls follows the
    # previous round's calls: it is such text.
    narrates_in_thinking=True,
)


def _five(family: str, *, disabled_efforts: frozenset[str] | None = None) -> ModelBehaviour:
    """Sonnet 5 and Opus 5.

    - thinks by default, manual extended thinking → 400:
      https://platform.claude.com/docs/zh-CN/models/sonnet-5/migration-guide
    - accepted types adaptive, disabled; default display omitted (third-party):
      https://apidog.com/blog/claude-sonnet-5-5-vs-sonnet-5/
    - effort low…max, SKILLS; default high:
      https://platform.claude.com/docs/zh-CN/models/opus-5/overview
    - sampling parameters → 400:
      https://platform.claude.com/docs/zh-CN/models/sonnet-5/overview
    - prefill → 400 on 4.6+ models: https://github.com/cloudflare/agents/pull/1618
    - forced tool choice refused only on the 5.5 generation:
      https://platform.claude.com/docs/zh-CN/build-with-claude/thinking-tool-workflows.md
    - blocks tied to an account only on the models listed (Sonnet 5.5, Haiku 5.5):
      https://platform.claude.com/docs/ja/build-with-claude/preserved-thinking.md
    - 1M context, 128K output:
      https://platform.claude.com/docs/zh-CN/models/sonnet-5/overview

    SKILLS: https://github.com/anthropics/skills/blob/9d2f1ae187231d8199c64b5b762e1bdf2244733d/skills/claude-api/SKILL.md
    """
    return ModelBehaviour(
        family=family,
        thinks_by_default=True,
        thinking_types=frozenset({"adaptive", "disabled"}),
        default_display="omitted",
        efforts=_ALL_EFFORTS,
        default_effort="high",
        type_efforts=MappingProxyType(
            {"disabled": disabled_efforts} if disabled_efforts is not None else {}
        ),
        sampling=False,
        prefill=False,
        context_window=1_000_000,
        max_output=128_000,
    )


SONNET_5 = _five("claude-sonnet-5")
# "thinking is on by default, and can be disabled only when effort is high or lower"
# https://platform.claude.com/docs/zh-CN/models/opus-5/overview
OPUS_5 = _five("claude-opus-5", disabled_efforts=frozenset({"low", "medium", "high"}))

OPUS_5_5 = ModelBehaviour(
    family="claude-opus-5-5",
    # "On Claude Opus 5.5, thinking is always on"; disabled/enabled → 400 with
    # the documented "\"thinking.type.disabled\" is not supported for this model".
    # https://platform.claude.com/docs/zh-CN/models/opus-5-5/whats-new-opus-5-5
    thinks_by_default=True,
    thinking_types=frozenset({"adaptive"}),
    # "under the default display: \"omitted\"" (same page)
    default_display="omitted",
    # "Claude Opus 5.5 and Claude Haiku 5.5 default to medium."
    # https://platform.claude.com/docs/en/build-with-claude/effort
    efforts=_ALL_EFFORTS,
    default_effort="medium",
    # Forced tool use refused on Opus 5.5, as on Sonnet 5.5:
    # https://platform.claude.com/docs/zh-CN/build-with-claude/thinking-tool-workflows.md
    # Sampling parameters and prefill: refused on the 5.x models (see `_five`).
    sampling=False,
    forced_tool_choice=False,
    prefill=False,
    # A preserved-thinking model: blocks bound to what came before them.
    # https://platform.claude.com/docs/en/build-with-claude/preserved-thinking?ref=sharkly.ai
    binds_prefix=True,
    # 1M context, 128K output: https://platform.claude.com/docs/zh-CN/models/opus-5-5/overview
    context_window=1_000_000,
    max_output=128_000,
)

SONNET_4_6 = ModelBehaviour(
    family="claude-sonnet-4-6",
    # "On Sonnet 4.6 and earlier and Haiku 4.5 such requests don't think"
    # https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/migration-guide
    # Manual thinking "deprecated on the Claude 4.6 models (requests using it still succeed)"
    # https://platform.claude.com/docs/build-with-claude/thinking-troubleshooting
    thinks_by_default=False,
    thinking_types=frozenset({"adaptive", "enabled", "disabled"}),
    # "Opus 4.6 and earlier defaulted to summarized" (third-party)
    # https://github.com/anthropics/claude-code/issues/49268
    default_display="summarized",
    # "These models predate xhigh" (third-party)
    # https://reference.langchain.com/python/deepagents-code/reasoning_effort/ANTHROPIC_EFFORTS_NO_XHIGH
    # max on Sonnet 4.6: https://github.com/anthropics/skills/blob/9d2f1ae187231d8199c64b5b762e1bdf2244733d/skills/claude-api/SKILL.md
    efforts=frozenset({"low", "medium", "high", "max"}),
    default_effort="high",
    # Prefill refused, observed on 4.6+ models: https://github.com/cloudflare/agents/pull/1618
    prefill=False,
    # "Context window: 1M tokens · Max output: 128K tokens"
    # https://platform.claude.com/docs/zh-CN/models/sonnet-4-6/overview.md
    context_window=1_000_000,
    max_output=128_000,
)


def _four_five(family: str) -> ModelBehaviour:
    """Sonnet 4.5 and Haiku 4.5.

    - "extended thinking is the only available thinking mode":
      https://platform.claude.com/docs/build-with-claude/thinking-troubleshooting
    - no thinking unless asked:
      https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/migration-guide
    - `budget_tokens` "Must be ≥1024 and less than `max_tokens`": SDK
      anthropic/types/thinking_config_enabled_param.py
    - effort "Will error on Sonnet 4.5 / Haiku 4.5": https://github.com/anthropics/skills/blob/9d2f1ae187231d8199c64b5b762e1bdf2244733d/skills/claude-api/SKILL.md
    - 200K context, 64K output:
      https://platform.claude.com/docs/zh-CN/models/sonnet-4-5/overview.md,
      https://platform.claude.com/docs/zh-CN/models/haiku-4-5/overview.md
    - prefill and sampling parameters: no page says they are refused.
    """
    return ModelBehaviour(
        family=family,
        thinking_types=frozenset({"enabled", "disabled"}),
        default_display="summarized",
    )


SONNET_4_5 = _four_five("claude-sonnet-4-5")
HAIKU_4_5 = _four_five("claude-haiku-4-5")

LEGACY = ModelBehaviour(family="", known=False, context_window=10**12, max_output=10**12)
"""A model name the fake does not know: its lenient default (not a real model)."""

MODELS: Mapping[str, ModelBehaviour] = MappingProxyType(
    {
        "claude-sonnet-5-5": SONNET_5_5,
        "claude-sonnet-5": SONNET_5,
        "claude-opus-5": OPUS_5,
        "claude-opus-5-5": OPUS_5_5,
        "claude-sonnet-4-6": SONNET_4_6,
        "claude-sonnet-4-5": SONNET_4_5,
        "claude-sonnet-4-5-20250929": SONNET_4_5,
        "claude-haiku-4-5": HAIKU_4_5,
        "claude-haiku-4-5-20251001": HAIKU_4_5,
    }
)


def behaviour(model: str) -> ModelBehaviour:
    """The model's behaviour; `LEGACY` for a name the table does not know."""
    return MODELS.get(model, LEGACY)


def thinking_settings(body: Mapping[str, Any]) -> ThinkingSettings | None:
    """How a (valid) request thinks; None when it does not."""
    model = behaviour(str(body.get("model", "")))
    if not model.known:
        return None
    config = body.get("thinking")
    config = config if isinstance(config, dict) else None
    kind = "adaptive" if config is None and model.thinks_by_default else None
    if config is not None:
        kind = str(config.get("type"))
    if kind not in ("adaptive", "between_tools", "enabled"):
        return None
    output_config = body.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, dict) else None
    if not isinstance(effort, str):
        effort = model.default_effort or "high"
    display = (config or {}).get("display")
    if not isinstance(display, str):
        display = model.default_display
    if kind == "between_tools":
        # "Short progress updates between tool calls still come back as
        # thinking blocks with summary text"
        # https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/whats-new-sonnet-5-5
        display = "summarized"
    budget = (config or {}).get("budget_tokens") if kind == "enabled" else None
    return ThinkingSettings(
        kind,
        effort,
        display,
        budget if isinstance(budget, int) else None,
        narrates_in_thinking=model.narrates_in_thinking,
    )
