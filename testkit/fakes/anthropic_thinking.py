"""The fake Messages API's thinking: the thinking and redacted_thinking blocks
of a reply, their signatures, and the thinking tokens they cost.

Pure: no sockets, no state (the registry of issued blocks is in
anthropic_signatures.py). What the documents say, and so what this does:

- a reply that thinks starts with ``{"type": "thinking", "thinking": ...,
  "signature": ...}``; "each thinking block has a signature field, an
  encrypted copy of the full reasoning"
  (https://platform.claude.com/docs/zh-CN/build-with-claude/thinking.md). The
  fake's signature is random base64 whose length grows with the thinking
  tokens it stands for (about 4 characters a token, at least
  `MIN_SIGNATURE_CHARS`): so passing a block back costs input tokens in the
  fake's estimate, as "usable blocks stay in context and are billed as input"
  (https://platform.claude.com/docs/en/build-with-claude/preserved-thinking?ref=sharkly.ai);
- "text between tool calls comes back in thinking blocks"
  (https://platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5):
  with two or more tool calls a thinking block sits between each two, and on
  a model that does so (`ThinkingSettings.narrates_in_thinking`: Sonnet 5.5)
  the text a reply writes alongside its tool calls is a thinking block where
  the text block would be (`ThinkingPlan.narration`), its text the reply's
  with display "summarized" ("An application that streams that text to its
  users goes quiet between tool calls until it sets a display value that
  returns the text", same page), empty with "omitted"; with
  ``thinking.type: "between_tools"`` those are the only thinking blocks, "if
  your request uses no tools, the response contains only text"
  (https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/whats-new-sonnet-5-5);
- ``display: "summarized"`` returns a summary, ``"omitted"`` an empty
  `thinking` field, "billed the same either way"
  (https://platform.claude.com/docs/ja/build-with-claude/thinking);
- a `redacted_thinking` block carries opaque `data` (SDK
  anthropic/types/redacted_thinking_block.py: "returned when portions of the
  model's thinking were safety-redacted. This field is opaque and encrypted");
  when the fake sends one is its own rule (`redacted_every` of the server);
- thinking tokens "are billed as output tokens ... and they count toward
  max_tokens" (https://platform.claude.com/docs/build-with-claude/thinking):
  a reply whose thinking reaches `max_tokens` is cut inside its first thinking
  block — that block alone, with the text so far and no signature — and
  stops with ``max_tokens``. How many tokens a reply thinks at each effort is
  not public: `THINKING_TOKENS` is the fake's assumption.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from .anthropic_models import ThinkingSettings

__all__ = [
    "BETWEEN_TOOLS_NOTE_TOKENS",
    "MIN_SIGNATURE_CHARS",
    "THINKING_TOKENS",
    "ThinkingPlan",
    "answer_tokens",
    "opaque",
    "plan_thinking",
    "summary_text",
]

THINKING_TOKENS: Mapping[str, int] = MappingProxyType(
    {"low": 150, "medium": 450, "high": 1000, "xhigh": 1800, "max": 3200}
)
"""Thinking tokens of one thinking reply by effort. No public figure: the fake's
assumption, growing with effort as "the effort parameter controls thinking
depth" (https://platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5)."""
BETWEEN_TOOLS_NOTE_TOKENS = 60
"""Thinking tokens of one progress note between tool calls under
``between_tools`` ("short progress updates",
https://platform.claude.com/docs/zh-CN/models/sonnet-5-5/whats-new-sonnet-5-5):
the fake's assumption."""
MIN_SIGNATURE_CHARS = 100
"""The shortest signature or redacted `data` the fake issues (its assumption)."""


def opaque(tokens: int) -> str:
    """Random base64 of about 4 characters per token, at least `MIN_SIGNATURE_CHARS`."""
    chars = max(MIN_SIGNATURE_CHARS, 4 * tokens)
    return base64.b64encode(secrets.token_bytes(3 * ((chars + 3) // 4))).decode()


def summary_text(user_text: str, tool_names: Sequence[str], has_text: bool) -> str:
    """A plausible thinking summary for a reply to `user_text`."""
    topic = " ".join(user_text.split())
    topic = topic[:160] + ("…" if len(topic) > 160 else "")
    lines = [f"The latest message: {topic!r}." if topic else "Looking at the conversation."]
    if tool_names:
        lines.append(f"I should call {', '.join(tool_names)} before deciding anything.")
    elif has_text:
        lines.append("I have what I need; I'll answer directly.")
    return " ".join(lines)


def _note_text(tool_name: str) -> str:
    return f"Next I'll call {tool_name}."


@dataclass(frozen=True)
class ThinkingPlan:
    """The thinking of one reply, to be laid into its content.

    `lead` goes before the answer; `narration` in place of the reply's text
    (which is then not sent as text); `between[k]` between tool calls k and
    k+1. `tokens` are the thinking tokens billed. `cut`: the thinking reached
    `max_tokens`, the reply is `lead` alone (one thinking block without a
    signature) and stops with ``max_tokens``.
    """

    settings: ThinkingSettings
    tokens: int
    lead: list[dict[str, Any]] = field(default_factory=list)
    between: list[list[dict[str, Any]]] = field(default_factory=list)
    cut: bool = False
    narration: list[dict[str, Any]] = field(default_factory=list)

    @property
    def blocks(self) -> list[dict[str, Any]]:
        """Every thinking and redacted_thinking block of the plan, in order."""
        return [*self.lead, *self.narration, *(b for group in self.between for b in group)]

    @property
    def thinks(self) -> bool:
        return bool(self.blocks)


def _shares(total: int, count: int) -> list[int]:
    """`total` split into `count` near-equal parts, the remainder to the first."""
    part = total // count
    return [total - part * (count - 1)] + [part] * (count - 1)


def plan_thinking(
    settings: ThinkingSettings,
    *,
    tool_names: Sequence[str],
    user_text: str,
    has_text: bool,
    max_tokens: int,
    text: str | None = None,
    tokens: int | None = None,
    redacted: bool = False,
    reply_text: str = "",
) -> ThinkingPlan:
    """The thinking blocks of a reply with `tool_names` calls (and an answer
    text when `has_text`), thinking as `settings` say.

    `text` replaces the generated summary of the first thinking block and
    `tokens` the thinking tokens of the effort; `redacted` puts a
    redacted_thinking block right after the first thinking block;
    `reply_text` is the text the reply writes, which becomes `narration`
    when it goes with tool calls on a model that narrates in thinking (its
    tokens are then thinking tokens).
    """
    plan = _plan(
        settings,
        tool_names=tool_names,
        user_text=user_text,
        has_text=has_text,
        max_tokens=max_tokens,
        text=text,
        tokens=tokens,
        redacted=redacted,
    )
    if plan.cut or not (settings.narrates_in_thinking and tool_names and reply_text):
        return plan
    spoken = max(1, len(reply_text) // 4)
    shown = reply_text if settings.display != "omitted" else ""
    block = {"type": "thinking", "thinking": shown, "signature": opaque(spoken)}
    return replace(plan, tokens=plan.tokens + spoken, narration=[block])


def _plan(
    settings: ThinkingSettings,
    *,
    tool_names: Sequence[str],
    user_text: str,
    has_text: bool,
    max_tokens: int,
    text: str | None,
    tokens: int | None,
    redacted: bool,
) -> ThinkingPlan:
    gaps = max(0, len(tool_names) - 1)
    if settings.mode == "between_tools":
        lead_texts: list[str] = []
        default_tokens = BETWEEN_TOOLS_NOTE_TOKENS * gaps
    else:
        lead_texts = [summary_text(user_text, tool_names, has_text)]
        default_tokens = THINKING_TOKENS.get(settings.effort, THINKING_TOKENS["high"])
        if settings.budget is not None:
            default_tokens = min(default_tokens, settings.budget)
    texts = lead_texts + [_note_text(name) for name in tool_names[1:]]
    if not texts:
        return ThinkingPlan(settings, 0)
    if text is not None:
        texts[0] = text
    total = max(1, default_tokens if tokens is None else tokens)
    if settings.display == "omitted":
        texts = ["" for _ in texts]
    if total >= max_tokens:
        so_far = texts[0][: len(texts[0]) * max_tokens // total]
        cut = {"type": "thinking", "thinking": so_far, "signature": ""}
        return ThinkingPlan(settings, max_tokens, lead=[cut], cut=True)
    shares = _shares(total, len(texts) + int(redacted))
    blocks = [
        {"type": "thinking", "thinking": t, "signature": opaque(s)}
        for t, s in zip(texts, shares, strict=False)
    ]
    groups = [[b] for b in blocks]
    if redacted:
        groups[0].append({"type": "redacted_thinking", "data": opaque(shares[-1])})
    if lead_texts:
        return ThinkingPlan(settings, total, lead=groups[0], between=groups[1:])
    return ThinkingPlan(settings, total, between=groups)


def answer_tokens(content: Sequence[Mapping[str, Any]]) -> int:
    """Output tokens of a reply's answer (its blocks other than thinking):
    JSON length / 4, at least 1, as the fake always estimated them."""
    answer = [b for b in content if b.get("type") not in ("thinking", "redacted_thinking")]
    return max(1, len(json.dumps(answer)) // 4)
