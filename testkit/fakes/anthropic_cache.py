"""The fake Messages API's prompt cache: writes, reads and TTLs like the real one.

What the API documents (platform.claude.com, "Prompt caching"), and so what
this does:

- a request is rendered as tools, then system, then messages, and cut into
  blocks: each tool definition, each system block, each content block of each
  message (a string content is one text block). The cache key of a position
  is a hash of the model and every block up to it; `cache_control` markers
  themselves are not part of it;
- every block with `cache_control` is a breakpoint (at most 4). A breakpoint
  looks for a cached prefix at its own position and at up to 20 blocks before
  it; the longest prefix found is read (`cache_read_input_tokens`) and its
  entry's TTL starts again (a read refreshes it);
- each breakpoint past what was read writes its prefix, with its TTL (`ttl`
  "5m", the default, or "1h"), unless the prefix is shorter than the model's
  minimum cacheable length: then nothing is cached there, without an error.
  The tokens written are `cache_creation_input_tokens`, broken down by TTL in
  `cache_creation`; `input_tokens` is what is left of the prompt.

Tokens are estimated as characters of JSON / 4, counted the same way for a
prefix and for the whole prompt (`prompt_tokens`): each block as compact
JSON without its marker (a string content as the one text block it stands
for), each message's role framing with its first block. So a prefix is
counted alike in every request, and the prompt is exactly
`input_tokens + cache_creation_input_tokens + cache_read_input_tokens`.
Not modelled: an entry becoming readable only once its writer's response has
begun (concurrent requests), and cache isolation between workspaces.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_MIN_CACHEABLE",
    "LOOKBACK_BLOCKS",
    "TTL_SECONDS",
    "CacheUsage",
    "PromptCache",
    "cache_markers",
    "prompt_tokens",
]

LOOKBACK_BLOCKS = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
DEFAULT_MIN_CACHEABLE = 1024
"""Sonnet-class models' minimum; models not in `MIN_CACHEABLE` get it too."""
MIN_CACHEABLE: Mapping[str, int] = {
    "claude-opus-5": 512,
    "claude-haiku-4-5": 4096,
    "claude-haiku-4-5-20251001": 4096,
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
}


@dataclass(frozen=True)
class CacheUsage:
    """What the cache did for one request of `prompt` tokens."""

    prompt: int = 1
    used: bool = False  # the request had at least one breakpoint
    read: int = 0
    written_5m: int = 0
    written_1h: int = 0

    @property
    def written(self) -> int:
        return self.written_5m + self.written_1h


@dataclass
class _Entry:
    ttl: str
    expires: float


@dataclass
class _Block:
    text: str  # what the key hashes: where the block is, and its JSON without marker
    size: int  # characters counted for its tokens
    marker: dict[str, Any] | None


def _without_marker(block: Any) -> tuple[Any, dict[str, Any] | None]:
    if isinstance(block, dict) and "cache_control" in block:
        rest = {k: v for k, v in block.items() if k != "cache_control"}
        marker = block["cache_control"]
        return rest, marker if isinstance(marker, dict) else {}
    return block, None


def _blocks(body: Mapping[str, Any]) -> list[_Block]:
    """The request's blocks in render order: tools, system, messages."""
    out: list[_Block] = []

    def add(where: str, block: Any, framing: int = 0) -> None:
        bare, marker = _without_marker(block)
        text = json.dumps([where, bare], sort_keys=True, ensure_ascii=False)
        size = framing + len(json.dumps(bare, separators=(",", ":")))
        out.append(_Block(text, size, marker))

    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        add("tool", tool)
    system = body.get("system")
    if isinstance(system, str) and system:
        add("system", {"type": "text", "text": system})
    elif isinstance(system, list):
        for block in system:
            add("system", block)
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        where = f"{i}:{message.get('role')}"
        framing = len(json.dumps({"role": message.get("role"), "content": []}))
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for k, block in enumerate(blocks if isinstance(blocks, list) else []):
            add(where, block, framing if k == 0 else 0)
    return out


def prompt_tokens(body: Mapping[str, Any]) -> int:
    """The prompt's tokens as the fake counts them (at least 1)."""
    return max(1, sum(b.size for b in _blocks(body)) // 4)


def cache_markers(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The `cache_control` values of the request, in render order."""
    return [b.marker for b in _blocks(body) if b.marker is not None]


@dataclass
class PromptCache:
    """The cache entries of one fake server, keyed by prefix hash. Thread-safe."""

    clock: Callable[[], float] = time.monotonic
    min_cacheable: Mapping[str, int] = field(default_factory=lambda: dict(MIN_CACHEABLE))
    _entries: dict[str, _Entry] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def account(self, body: Mapping[str, Any]) -> CacheUsage:
        """Read and write the cache for a (valid) request."""
        blocks = _blocks(body)
        total_tokens = max(1, sum(b.size for b in blocks) // 4)
        marks = [k for k, b in enumerate(blocks) if b.marker is not None]
        if not marks:
            return CacheUsage(prompt=total_tokens)
        model = str(body.get("model", ""))
        minimum = self.min_cacheable.get(model, DEFAULT_MIN_CACHEABLE)
        keys: list[str] = []
        tokens: list[int] = []
        digest = hashlib.sha256(model.encode())
        chars = 0
        for block in blocks:
            digest.update(block.text.encode())
            keys.append(digest.copy().hexdigest())
            chars += block.size
            tokens.append(min(chars // 4, total_tokens))
        with self._lock:
            now = self.clock()
            for key in [k for k, e in self._entries.items() if e.expires <= now]:
                del self._entries[key]
            hit = -1
            for mark in marks:
                for k in range(mark, max(-1, mark - LOOKBACK_BLOCKS - 1), -1):
                    if keys[k] in self._entries:
                        hit = max(hit, k)
                        break
            read = tokens[hit] if hit >= 0 else 0
            if hit >= 0:
                entry = self._entries[keys[hit]]
                entry.expires = now + TTL_SECONDS[entry.ttl]
            written = {"5m": 0, "1h": 0}
            cached_to = read
            for mark in marks:
                if mark <= hit or tokens[mark] < minimum:
                    continue
                ttl = str((blocks[mark].marker or {}).get("ttl", "5m"))
                written[ttl] += tokens[mark] - cached_to
                cached_to = tokens[mark]
                self._entries[keys[mark]] = _Entry(ttl, now + TTL_SECONDS[ttl])
        return CacheUsage(
            prompt=total_tokens,
            used=True,
            read=read,
            written_5m=written["5m"],
            written_1h=written["1h"],
        )
