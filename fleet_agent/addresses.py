"""IPv6 forms that hide where an address leads: one rule for every check of
an address we are told to connect to.

The prover status reader (fleet_agent/fleet/prover_status.py, a host's
address) and the demand source's URL check (fleet_agent/demand/sources.py,
the operator's URL) each have their own idea of which addresses are fine,
but both must see through the same IPv6 forms, which Python's `ipaddress`
judges by the IPv6 prefix alone (and differently from one Python release to
the next):

- ``fec0::/10``, site-local: deprecated (RFC 3879), yet ``is_global`` on
  Python 3.11; whatever answers there is inside someone's site;
- ``64:ff9b:1::/48``, the NAT64 prefix for local use (RFC 8215): where the
  IPv4 address sits inside it is the network's choice (RFC 6052 allows
  prefixes from /32 to /96), so what it leads to cannot be read;
- ``64:ff9b::/96``, the well-known NAT64 prefix (RFC 6052), a 6to4 address
  (``2002::/16``, RFC 3056) and a Teredo one (``2001::/32``, RFC 4380) each
  carry an IPv4 address that a translator or relay reaches: the form is
  refused when that address is not global (RFC 6052, section 3.1: the
  well-known prefix "MUST NOT be used to represent non-global IPv4
  addresses"), so ``64:ff9b::a9fe:a9fe`` is not a way to 169.254.169.254.

An IPv4-mapped address (``::ffff:a.b.c.d``) is not judged here: each check
reads it as the IPv4 address it is.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, IPv6Network

__all__ = [
    "NAT64_LOCAL_USE",
    "NAT64_WELL_KNOWN",
    "SITE_LOCAL",
    "embedded_v4",
    "not_global",
    "v6_form_refusal",
]

SITE_LOCAL = IPv6Network("fec0::/10")
NAT64_WELL_KNOWN = IPv6Network("64:ff9b::/96")
NAT64_LOCAL_USE = IPv6Network("64:ff9b:1::/48")


def not_global(ip: IPv4Address | IPv6Address) -> str | None:
    """Why `ip` is not a global address, or None. `is_global` alone lets
    multicast through, so each kind is checked, the most telling first. The
    IPv6 forms of `v6_form_refusal` are not looked into here."""
    for kind, hit in (
        ("loopback", ip.is_loopback),
        ("unspecified", ip.is_unspecified),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
        ("not global", not ip.is_global),
    ):
        if hit:
            return kind
    return None


def embedded_v4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address a well-known NAT64, 6to4 or Teredo address leads to."""
    if ip in NAT64_WELL_KNOWN:
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour or (ip.teredo[1] if ip.teredo else None)


def v6_form_refusal(ip: IPv6Address) -> str | None:
    """Why the form of `ip` is refused (see the module), or None: the address
    is then judged by each check's own rule."""
    if ip in SITE_LOCAL:
        return "site-local (fec0::/10, deprecated by RFC 3879)"
    if ip in NAT64_LOCAL_USE:
        return "NAT64 for local use (64:ff9b:1::/48): its IPv4 address cannot be read"
    inner = embedded_v4(ip)
    if inner is not None:
        why = not_global(inner)
        if why is not None:
            return f"a NAT64 or tunnel address of {inner}, which is {why}"
    return None
