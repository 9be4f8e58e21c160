"""Text that a host or the service wrote, made safe to carry before it is typed.

A prover's status and a vast.ai row are untrusted (docs/DESIGN.md: parsed at
the edge, bad data dropped). Their text flows into snapshots, tracks, the
store, workflow payloads and the prompt, where a model may cap its length
(`StateChanged.detail`: 2,000 characters) and where JSON must encode it. So
text is made one line and short where it is parsed:

* control, format and separator characters (ANSI escapes, NUL, bidi
  overrides, zero-width characters, line and paragraph separators) become
  spaces, and runs of spaces one (a NUL also fails a PostgreSQL text
  column: a prover's detail with one made every poll of a PostgreSQL store
  fail, found by bench/chaos.py's hostile-host scenario);
* a lone surrogate (JSON's ``"\\ud800"`` parses to one) becomes U+FFFD: no
  UTF-8 encoder takes it, and a payload holding one cannot be sent;
* the result is cut to a limit, marked with "...".
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["SURROGATES", "one_line", "without_surrogates"]

#: Lone UTF-16 surrogates, which Python strings can hold and UTF-8 cannot.
SURROGATES = re.compile("[\ud800-\udfff]")
_UNSAFE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SPACES = re.compile(r"\s+")
_MARK = "..."


def without_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (cheap for ASCII)."""
    return text if text.isascii() else SURROGATES.sub("\ufffd", text)


def one_line(text: str, limit: int) -> str:
    """`text` as one safe line of at most `limit` characters (module doc).
    Only the first few times `limit` characters are looked at: the rest
    would be cut anyway."""
    head = text[: limit * 4 + 64]
    if not head.isprintable() or not head.isascii():
        head = "".join(
            " " if unicodedata.category(ch) in _UNSAFE else ch
            for ch in SURROGATES.sub("\ufffd", head)
        )
    head = _SPACES.sub(" ", head).strip()
    if len(head) <= limit:
        return head
    return head[: max(0, limit - len(_MARK))].rstrip() + _MARK
