"""`FLEET_NOTIFY_URLS`, `FLEET_CONSOLE_URL` and `FLEET_NOTIFY_KEY`, and how a
destination is shown.

The URLs are secrets (a Slack webhook's path, an SMTP password): read in the
worker's and the CLI's process only, never passed to a workflow, the store, a
log line or `status`. Anything shown names a destination by `redact`: its
scheme and host.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote, unquote_plus, urlsplit

from pydantic import Field, SecretStr, field_validator

from fleet_agent.env.env_settings import EnvModel

from .destinations import KEY_ENV, MIN_KEY_CHARS

__all__ = ["ANYWHERE_CHARS", "NotifyEnv", "redact", "scrub", "split_urls", "url_secrets"]


class NotifyEnv(EnvModel):
    """Where notifications go, and the console's address for their links."""

    urls: str | None = Field(None, alias="FLEET_NOTIFY_URLS")
    # The console as the operator's phone reaches it, e.g. https://ops.example.com:8080
    console_url: str | None = Field(None, alias="FLEET_CONSOLE_URL")
    # The key the store's names of destinations are keyed with
    # (fleet_agent/notify/destinations.py); unset: the key file var/notify.key.
    key: SecretStr | None = Field(None, alias=KEY_ENV)

    @field_validator("key")
    @classmethod
    def _long_enough(cls, key: SecretStr | None) -> SecretStr | None:
        if key is not None and len(key.get_secret_value()) < MIN_KEY_CHARS:
            # Not the value: it is a secret.
            raise ValueError(
                f"{KEY_ENV} must be at least {MIN_KEY_CHARS} characters "
                "(e.g. the output of `openssl rand -hex 32`)"
            )
        return key

    def url_list(self) -> list[str]:
        return split_urls(self.urls)

    @classmethod
    def load(
        cls, env: Mapping[str, str] | None = None, *, env_file: Path | None = None
    ) -> NotifyEnv:
        return cls.read(env, env_file=env_file)


def split_urls(raw: str | None) -> list[str]:
    """One or more apprise URLs, as apprise itself splits them
    (`apprise.utils.parse.parse_urls`, what `Apprise.add` calls on a
    string): a URL ends only where white space, a comma or a semicolon leads
    into the next ``scheme://`` (or at the end of its line), so
    ``mailto://…?to=a@x.com,b@y.com`` stays one URL. Separators at the very
    end are not part of the last URL. A word apprise would skip (no
    ``scheme://`` in it, before the first URL) is kept, so it is refused
    visibly as a URL apprise cannot use rather than dropped in silence."""
    # Here, not at the top: apprise takes half a second to import.
    from apprise.utils.parse import parse_urls

    text = raw or ""
    found = parse_urls(text)  # type: ignore[no-untyped-call]  # apprise leaves it untyped
    urls = [str(u).rstrip(_SEPARATORS) for u in found]
    rest = text
    for url in urls:
        rest = rest.replace(url, " ", 1)
    return [u for u in urls if u] + [w for w in re.split(r"[\s,;]+", rest) if w]


def redact(url: str) -> str:
    """`scheme://host` only: no user, password, token, path or query. A
    "host" that is no host name (no dot: Slack's and Discord's first token
    stands there) is hidden too."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return "(unreadable URL)"
    if "." not in host and host != "localhost":
        host = "(hidden)"
    return f"{parts.scheme or '?'}://{host}"


#: What parts one URL from the next in `FLEET_NOTIFY_URLS` (apprise's own
#: ``STRING_DELIMITERS``, less the characters a URL itself holds).
_SEPARATORS = " \t\r\n,;"

#: A secret this long is removed wherever it stands; a shorter one wherever
#: it stands as a whole word (no letter or digit touching it), so a short
#: password goes and "to" inside "token" stays.
ANYWHERE_CHARS = 6
_DECODINGS = (unquote, unquote_plus)


def _url_pieces(url: str) -> list[str]:
    """The parts of `url` that may be secret, as written: user, password,
    each path token, each query value (and each comma-separated item of
    one), the fragment, and the host when `redact` hides it."""
    try:
        parts = urlsplit(url)
        hidden_host = redact(url).endswith("://(hidden)")
        pieces = [parts.username or "", parts.password or "", *parts.path.split("/")]
        if hidden_host:
            # A token stands where the host would (Slack, Telegram's "id:key").
            host = parts.netloc.rpartition("@")[2]
            pieces += [host, *host.split(":")]
    except ValueError:
        # No URL Python reads: every run between separators may be secret.
        return re.split(r"[/:@?&=#,;]+", url.split("://", 1)[-1])
    for pair in re.split(r"[&;]", parts.query):
        value = pair.partition("=")[2]
        pieces += [value, *value.split(",")]
    return [*pieces, parts.fragment]


def url_secrets(url: str) -> set[str]:
    """Every piece of `url` that may be secret (`_url_pieces`), as written
    and percent-decoded; never the scheme and host that `redact` shows."""
    shown = redact(url).split("://", 1)[-1].lower()
    found: set[str] = set()
    for piece in _url_pieces(url):
        for form in (piece, *(decode(piece) for decode in _DECODINGS)):
            if form.strip() and form.lower() != shown:
                found.add(form)
    return found


def _remove(text: str, whole: dict[str, str], secrets: set[str]) -> str:
    for url in sorted(whole, key=len, reverse=True):
        text = text.replace(url, whole[url])
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= ANYWHERE_CHARS:
            text = text.replace(secret, "***")
        else:
            text = re.sub(rf"(?<![0-9A-Za-z]){re.escape(secret)}(?![0-9A-Za-z])", "***", text)
    return text


def scrub(text: str, urls: Iterable[str]) -> str:
    """`text` with every URL shown as `redact` shows it and every piece of
    one that may be secret (`url_secrets`: a password, a token, a webhook
    path, a recipient) replaced by ``***``: for error text that may quote
    them. The URLs and pieces are looked for as written and percent-decoded,
    and so is the text: when decoding the text reveals a secret (a library
    that logs ``p%40ss`` for ``p@ss``, or the other way round), the decoded,
    scrubbed text is returned. A short secret goes where it stands as a
    whole word (`ANYWHERE_CHARS`)."""
    urls = list(urls)
    whole = {form: redact(u) for u in urls for form in (u, *(d(u) for d in _DECODINGS))}
    secrets: set[str] = set().union(*(url_secrets(u) for u in urls))
    text = _remove(text, whole, secrets)
    for decode in _DECODINGS:
        decoded = decode(text)
        clean = _remove(decoded, whole, secrets)
        if clean != decoded:
            text = clean
    return text
