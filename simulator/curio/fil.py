"""FIL amounts as Curio reads and writes them: integers of attoFIL in, text out.

Touches nothing: pure functions. Curio keeps prices and payments as decimal
strings of attoFIL (proofshare_meta.pprice, proofshare_provider_payments
.payment_cumulative_amount; curio harmony/harmonydb/sql/*proofshare*.sql)
and shows them with lotus ``types.FIL`` (filecoin-project/lotus
chain/types/fil.go):

- `fil_unitless` is ``FIL.Unitless()``: FIL with 18 decimals, trailing zeros
  trimmed, ``"0"`` for zero (PSGetMeta's ``price``);
- `fil_short` is ``FIL.Short()``: the amount in the largest unit prefix of
  ``a f p n μ m ""`` it reaches (each a factor of 1000), 3 decimals rounded
  half away from zero (``big.Rat.FloatString``), zeros trimmed, then
  ``" <prefix>FIL"``; ``"0"`` for zero. The loop has no unit above FIL: from
  1000 FIL on it divides by 10^21 with no prefix, so 1500 FIL reads
  ``"1.5 FIL"`` (lotus's own quirk, kept);
- `parse_fil` is ``types.ParseFIL`` (PSSetMeta's price): a decimal with an
  optional suffix ``fil`` (the default) or ``afil``/``attofil``, errors
  worded as lotus words them.

The market service prices asks in nFIL (``WorkAsk.min_price_nfil``; curio
lib/proofsvc/clientctl.go ``attoPerNano`` = 10^9).
"""

from __future__ import annotations

import re

__all__ = [
    "ATTO_PER_FIL",
    "ATTO_PER_NFIL",
    "FilError",
    "fil_short",
    "fil_unitless",
    "go_quote",
    "parse_fil",
]

#: build.FilecoinPrecision.
ATTO_PER_FIL = 10**18
#: lib/proofsvc/clientctl.go attoPerNano.
ATTO_PER_NFIL = 10**9
_PREFIXES = ("a", "f", "p", "n", "μ", "m", "")
_DECIMAL = re.compile(r"(\d+\.?\d*|\.\d+)")


class FilError(ValueError):
    """An amount `parse_fil` refuses; the message is lotus's."""


def fil_unitless(atto: int) -> str:
    """``types.FIL(atto).Unitless()``: ``"0.005"``, ``"0"``."""
    if atto == 0:
        return "0"
    sign = "-" if atto < 0 else ""
    whole, frac = divmod(abs(atto), ATTO_PER_FIL)
    text = f"{whole}.{frac:018d}".rstrip("0").rstrip(".")
    return sign + text


def fil_short(atto: int) -> str:
    """``types.FIL(atto).Short()``: ``"5 mFIL"``, ``"1.5 μFIL"``, ``"0"``."""
    if atto == 0:
        return "0"
    # lotus chain/types/fil.go: the first of a, f, p, n, μ, m under which the
    # amount is below 1000; past them no prefix, divided by 1000^6 (1 FIL).
    unit, prefix = 1, _PREFIXES[-1]
    for candidate in _PREFIXES[:-1]:
        if abs(atto) < unit * 1000:
            prefix = candidate
            break
        unit *= 1000
    # FloatString(3): the last digit rounded to nearest, halves away from zero.
    scaled = (2 * abs(atto) * 1000 + unit) // (2 * unit)
    whole, frac = divmod(scaled, 1000)
    text = f"{whole}.{frac:03d}".rstrip("0").rstrip(".")
    return ("-" if atto < 0 else "") + text + " " + prefix + "FIL"


def go_quote(text: str) -> str:
    """Go's ``%q`` of a plain string (quotes and backslashes escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_fil(text: str) -> int:
    """``types.ParseFIL(text)`` in attoFIL; `FilError` as lotus words it."""
    suffix = text.lstrip(".1234567890")
    digits = text[: len(text) - len(suffix)]
    atto = False
    if suffix:
        norm = suffix.strip().lower()
        if norm in ("attofil", "afil"):
            atto = True
        elif norm not in ("", "fil"):
            raise FilError(f"unrecognized suffix: {go_quote(suffix)}")
    if len(digits) > 50:
        raise FilError(f"string length too large: {len(digits)}")
    if not _DECIMAL.fullmatch(digits):
        raise FilError(f"failed to parse {go_quote(digits)} as a decimal number")
    whole, _, frac = digits.partition(".")
    numerator, denominator = int((whole + frac) or "0"), int(10 ** len(frac))
    if not atto:
        numerator *= ATTO_PER_FIL
    if numerator % denominator:
        raise FilError(f"invalid {'atto' if atto else ''}FIL value: {go_quote(digits)}")
    return numerator // denominator
