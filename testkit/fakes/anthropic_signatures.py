"""The fake Messages API's memory of the thinking it issued, and the 400s for
thinking passed back wrong.

The server keeps one `ThinkingRegistry`: every reply's content (by message
id), and every signature and redacted `data` it issued, with the model, the
account (the request's ``x-api-key`` or ``authorization`` value) and a hash
of the conversation before the block. What the documents say, and so what
`check` does for a request to a model the fake knows (anthropic_models.py):

- "Thinking blocks must be passed back unmodified and in their original
  order; a modified block results in a 400 `invalid_request_error`" (SDK
  anthropic/types/thinking_block_param.py): a thinking block whose signature
  the fake did not issue, or whose text is not the text sent with it, is
  refused with ``messages.{i}.content.{j}: Invalid `signature` in `thinking`
  block.`` (the first sentence of the documented message below);
- a block is "tied to the model and conversation": "The model: a model reads
  only some other models' thinking blocks ... The account: blocks from some
  models are tied to an account" and "What came before it: system, tools, and
  every earlier message. If any of them changes, the block fails the prefix
  check" (https://platform.claude.com/docs/en/build-with-claude/preserved-thinking?ref=sharkly.ai).
  Sonnet 5.5's blocks are account-bound
  (https://platform.claude.com/docs/ja/build-with-claude/preserved-thinking.md);
  a prefix failure gets the documented message of
  https://platform.claude.com/docs/zh-CN/build-with-claude/preserved-thinking/fix-bound-to-a-different-conversation
  (`BOUND_ELSEWHERE`). `cache_control` markers are not part of the prefix
  (they are not content; the prompt cache ignores them alike, anthropic_cache.py);
- "If the current model can't read a block, the API drops it from that
  request without an error" (https://platform.claude.com/docs/build-with-claude/preserved-thinking):
  a block of another model family is dropped (and not billed: "the drop
  happens before pricing", the skills repo's SKILL.md @ 9d2f1ae);
- "Echo the assistant message exactly as received: rebuilding the message or
  filtering out redacted_thinking blocks triggers a 400 error"
  (https://platform.claude.com/docs/build-with-claude/thinking-tool-workflows):
  when a thinking request continues a tool-use cycle (its last message holds
  tool_result blocks), the assistant message before it, if it holds anything
  the fake issued, must be whole issued replies' content, each unchanged and
  in order. That message's wording is the fake's own.

Unknown redacted `data` is refused too; that wording is the fake's. Signatures
are not checked by count_tokens, and not at all for a model name the fake does
not know.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .anthropic_models import ThinkingSettings, behaviour, thinking_settings
from .anthropic_payloads import Reply, Request
from .anthropic_thinking import ThinkingPlan, plan_thinking

__all__ = [
    "BOUND_ELSEWHERE",
    "INVALID_SIGNATURE",
    "IssuedBlock",
    "ThinkingRegistry",
    "account_of",
    "prefix_hashes",
    "without_blocks",
]

INVALID_SIGNATURE = "{where}: Invalid `signature` in `thinking` block."
BOUND_ELSEWHERE = (
    "{where}: Invalid `signature` in `thinking` block. The block is bound to a different "
    "conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` "
    'to "drop_block".'
)
"""Documented, word for word (fix-bound-to-a-different-conversation, above)."""
_INVALID_DATA = "{where}: Invalid `data` in `redacted_thinking` block."
"""The fake's wording, after the pattern of `INVALID_SIGNATURE`."""
_BOUND_DATA = (
    "{where}: Invalid `data` in `redacted_thinking` block. The block is bound to a different "
    "conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` "
    'to "drop_block".'
)
"""The fake's adaptation of `BOUND_ELSEWHERE` to a redacted_thinking block."""
_COMPARED = ("type", "text", "thinking", "signature", "data", "id", "name", "input")
"""The fields an echoed block must keep as they were sent."""

Key = tuple[str, str]


@dataclass(frozen=True)
class IssuedBlock:
    """What the fake knows of a thinking (or redacted_thinking) block it sent."""

    model: str
    family: str
    account: str
    prefix: str
    text: str | None  # the thinking text as sent (None: a redacted_thinking block)
    reply: str  # the message id of the reply it came in


def account_of(headers: Mapping[str, str]) -> str:
    """The account a request comes from, as far as the fake can tell: its key."""
    return headers.get("x-api-key") or headers.get("authorization") or ""


def _plain_block(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    plain = {k: v for k, v in block.items() if k != "cache_control" and v is not None}
    if plain.get("type") == "tool_result":
        plain["content"] = _plain_content(plain.get("content", ""))
    return plain


def _plain_content(content: Any) -> Any:
    """Content as a list of blocks without markers (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [_plain_block(b) for b in content]
    return content


def prefix_hashes(body: Mapping[str, Any]) -> list[str]:
    """Per message index i, a hash of what comes before message i: tools,
    system and messages[:i], without `cache_control` markers (len(messages) + 1
    hashes: the last one is the prefix of a reply)."""
    digest = hashlib.sha256()
    tools = body.get("tools")
    system = body.get("system")
    head = {
        "tools": [_plain_block(t) for t in tools] if isinstance(tools, list) else [],
        "system": _plain_content(system) if system else [],
    }
    digest.update(json.dumps(head, sort_keys=True).encode())
    hashes = [digest.hexdigest()]
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        plain = {"role": role, "content": _plain_content(content)}
        digest.update(json.dumps(plain, sort_keys=True).encode())
        hashes.append(digest.copy().hexdigest())
    return hashes


def _key(block: Mapping[str, Any]) -> Key | None:
    """What identifies an issued block: a tool_use id, a signature, redacted data."""
    kind = block.get("type")
    field = {"tool_use": "id", "thinking": "signature", "redacted_thinking": "data"}.get(str(kind))
    return None if field is None else (str(kind), str(block.get(field)))


def _token(block: Mapping[str, Any]) -> Key:
    key = _key(block)
    if key is not None:
        return key
    if block.get("type") == "text":
        return ("text", str(block.get("text")))
    return (str(block.get("type")), json.dumps(block, sort_keys=True, default=str))


def _view(block: Mapping[str, Any]) -> dict[str, Any]:
    return {f: block.get(f) for f in _COMPARED}


def _name(block: Mapping[str, Any]) -> str:
    kind = str(block.get("type"))
    return f"tool_use {block.get('name')}" if kind == "tool_use" else kind


class ThinkingRegistry:
    """The thinking a fake server issued, and the checks of what comes back. Thread-safe.

    `redacted_every` N: every Nth thinking reply gets a redacted_thinking
    block right after its first thinking block (0: never; `Reply.redacted`
    decides for its own reply).
    """

    def __init__(self, redacted_every: int = 3) -> None:
        self.redacted_every = redacted_every
        self.thinking_replies = 0
        self._lock = threading.Lock()
        self._blocks: dict[Key, IssuedBlock] = {}
        self._reply_of: dict[Key, str] = {}
        self._replies: dict[str, list[dict[str, Any]]] = {}

    # ------------------------------------------------------------ replies

    def plan(self, request: Request, reply: Reply) -> ThinkingPlan | None:
        """The thinking of `reply` to `request` (None: it does not think)."""
        settings = thinking_settings(request.body)
        if reply.think is False:
            return None
        if settings is None:
            if not reply.think:
                return None
            model = behaviour(request.model)
            display = model.default_display if model.known else "summarized"
            effort = request.effort or model.default_effort or "high"
            settings = ThinkingSettings("adaptive", effort, display)

        def make(redacted: bool) -> ThinkingPlan:
            return plan_thinking(
                settings,
                tool_names=[name for name, _ in reply.tool_calls],
                user_text=request.last_user_text(),
                has_text=bool(reply.text),
                max_tokens=request.max_tokens or 1,
                text=reply.thinking,
                tokens=reply.thinking_tokens,
                redacted=redacted,
                reply_text=reply.text,
            )

        plan = make(False)
        if not plan.thinks:
            return plan
        with self._lock:
            self.thinking_replies += 1
            count = self.thinking_replies
        redacted = reply.redacted
        if redacted is None:
            redacted = self.redacted_every > 0 and count % self.redacted_every == 0
        return make(True) if redacted and not plan.cut else plan

    def issue(self, request: Request, message: Mapping[str, Any]) -> None:
        """Remember a reply sent to `request` (a model name the fake does not
        know: nothing to remember, it checks nothing)."""
        if not behaviour(request.model).known:
            return
        model = str(message.get("model") or request.model)
        messages = request.messages
        at = len(messages) - int(bool(messages) and messages[-1].get("role") == "assistant")
        prefix = prefix_hashes(request.body)[at]
        content: list[dict[str, Any]] = copy.deepcopy(list(message["content"]))
        reply_id = str(message["id"])
        family = behaviour(model).family or model
        account = account_of(request.headers)
        with self._lock:
            self._replies[reply_id] = content
            for block in content:
                key = _key(block)
                if key is None or not key[1]:
                    continue  # a block cut by max_tokens has no signature
                self._reply_of[key] = reply_id
                if key[0] != "tool_use":
                    text = block.get("thinking") if key[0] == "thinking" else None
                    self._blocks[key] = IssuedBlock(model, family, account, prefix, text, reply_id)

    # ------------------------------------------------------------ checks

    def check(self, request: Request) -> tuple[str | None, list[tuple[int, int]]]:
        """The 400 the request's passed-back thinking gets, or None; and the
        (message, block) indexes of blocks the model cannot read, to drop."""
        model = behaviour(request.model)
        if not model.known:
            return None, []
        account = account_of(request.headers)
        messages = request.messages
        hashes: list[str] | None = None
        dropped: list[tuple[int, int]] = []
        for i, message in enumerate(messages):
            content = message.get("content")
            if message.get("role") != "assistant" or not isinstance(content, list):
                continue
            for j, block in enumerate(content):
                key = _key(block) if isinstance(block, dict) else None
                if key is None or key[0] == "tool_use":
                    continue
                where = f"messages.{i}.content.{j}"
                thinking = key[0] == "thinking"
                invalid = (INVALID_SIGNATURE if thinking else _INVALID_DATA).format(where=where)
                with self._lock:
                    issued = self._blocks.get(key)
                if issued is None:
                    return invalid, []
                if issued.family != model.family:
                    dropped.append((i, j))
                    continue
                if thinking and block.get("thinking") != issued.text:
                    return invalid, []
                issuer = behaviour(issued.model)
                if issuer.binds_account and issued.account != account:
                    return invalid, []
                if issuer.binds_prefix:
                    hashes = hashes or prefix_hashes(request.body)
                    if hashes[i] != issued.prefix:
                        bound = BOUND_ELSEWHERE if thinking else _BOUND_DATA
                        return bound.format(where=where), []
        if len(messages) >= 2 and thinking_settings(request.body) is not None:
            last, before = messages[-1], messages[-2]
            content = before.get("content")
            if request.tool_results() and last.get("role") == "user" and isinstance(content, list):
                problem = self._echo_problem(len(messages) - 2, content)
                if problem is not None:
                    return problem, []
        return None, dropped

    def _echo_problem(self, i: int, content: Sequence[Any]) -> str | None:
        """Why assistant message `i` is not whole issued replies, unchanged, or None."""
        blocks = [b for b in content if isinstance(b, dict)]
        with self._lock:
            replies: list[str] = []
            for block in blocks:
                key = _key(block)
                reply = self._reply_of.get(key) if key is not None else None
                if reply is not None and reply not in replies:
                    replies.append(reply)
            expected = [b for r in replies for b in self._replies[r]]
        if not replies:
            return None  # a conversation the test made by hand
        if len(blocks) == len(expected) and all(
            _view(a) == _view(e) for a, e in zip(blocks, expected, strict=True)
        ):
            return None
        where = f"messages.{i}"
        head = (
            f"{where}: the assistant message is not the exact echo of the reply the fake sent "
            "(echo it exactly as received, thinking and redacted_thinking blocks included)"
        )
        sent = {_key(e): e for e in expected if _key(e) is not None}
        for j, block in enumerate(blocks):
            original = sent.get(_key(block))
            if original is not None and _view(block) != _view(original):
                changed = [f for f in _COMPARED if block.get(f) != original.get(f)]
                return f"{head}: {where}.content.{j} ({_name(block)}) was altered: {changed}"
        got = [_token(b) for b in blocks]
        wanted = [_token(e) for e in expected]
        missing = [
            f"{_name(e)} (block {k})" for k, e in enumerate(expected) if wanted[k] not in got
        ]
        if missing:
            return f"{head}: dropped {', '.join(missing)}"
        extra = [
            f"{where}.content.{j} ({_name(b)})"
            for j, b in enumerate(blocks)
            if got[j] not in wanted
        ]
        if extra:
            return f"{head}: not in the reply: {', '.join(extra)}"
        order = ", ".join(_name(e) for e in expected)
        return f"{head}: blocks reordered or repeated; the reply was [{order}]"


def without_blocks(body: dict[str, Any], dropped: list[tuple[int, int]]) -> dict[str, Any]:
    """`body` without the blocks the model cannot read: "the API drops it from
    that request without an error" and "dropped blocks aren't billed"
    (https://platform.claude.com/docs/build-with-claude/preserved-thinking;
    the skills repo's skills/claude-api/SKILL.md @ 9d2f1ae)."""
    if not dropped:
        return body
    messages = list(body["messages"])
    for i in sorted({i for i, _ in dropped}):
        gone = {j for m, j in dropped if m == i}
        content = messages[i]["content"]
        messages[i] = {
            **messages[i],
            "content": [b for j, b in enumerate(content) if j not in gone],
        }
    return {**body, "messages": messages}
