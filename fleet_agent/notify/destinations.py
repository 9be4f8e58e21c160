"""How the store names a notification destination: a keyed hash of its URL.

The store (`fa_notifications`) names each destination so a retry knows
where a notification went, never by its URL (a secret). An unkeyed hash
would not do: the URL is mostly public (scheme, host, user, recipient), so
whoever reads the store could try a dictionary of passwords against
`sha256(url)` offline, and a weak SMTP password falls. So a name is
HMAC-SHA256 of the URL under the worker's **notify key**, which the store
never sees:

- `FLEET_NOTIFY_KEY` when set (at least 16 characters; e.g. `openssl rand
  -hex 32`): every worker of a deployment must have the same, or a retry
  that lands on another worker does not find the first attempt's rows and
  sends again;
- else the key file `notify.key` beside a SQLite store (`var/notify.key`
  for the default store `var/fleet-agent.db`), or `var/notify.key` under the
  worker's working directory with any other store (`key_file_for`), created
  by the first delivery that needs it: 32 random bytes as hex, mode 0600
  (tightened to 0600 if found looser).

Names written before keys (`sha256(url)[:16]`, 16 hex characters) are
renamed once, by the first delivery of each worker process
(`Notifications.rename_destinations`): a configured URL's rows take its new
name, so a retry still finds what went out; the rows of URLs no longer
configured get a name keyed from the old one (`retired_name`), which matches
nothing and can no longer be tried against a dictionary.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path

from pydantic import SecretStr

__all__ = [
    "KEY_ENV",
    "KEY_FILE",
    "MIN_KEY_CHARS",
    "destination_name",
    "is_legacy_name",
    "key_file_for",
    "legacy_name",
    "load_key",
    "retired_name",
]

KEY_ENV = "FLEET_NOTIFY_KEY"
KEY_FILE_NAME = "notify.key"
KEY_FILE = Path("var") / KEY_FILE_NAME
MIN_KEY_CHARS = 16
_PREFIX = "k1-"
_LEGACY = re.compile(r"[0-9a-f]{16}")


def _keyed(key: bytes, label: bytes, text: str) -> str:
    return _PREFIX + hmac.new(key, label + b"\0" + text.encode(), hashlib.sha256).hexdigest()[:32]


def destination_name(key: bytes, url: str) -> str:
    """The store's name of the destination `url` under the notify `key`."""
    return _keyed(key, b"url", url)


def retired_name(key: bytes, legacy: str) -> str:
    """The new name of a row named `legacy` whose URL is no longer configured."""
    return _keyed(key, b"retired", legacy)


def legacy_name(url: str) -> str:
    """The name the store gave `url` before names were keyed."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def is_legacy_name(name: str) -> bool:
    return _LEGACY.fullmatch(name) is not None


def key_file_for(dialect: str, database: str | None) -> Path:
    """Where the key file is for a store of `dialect` on `database` (the
    SQLAlchemy URL's): beside a SQLite file, else `KEY_FILE`."""
    if dialect == "sqlite" and database and database != ":memory:":
        return Path(database).parent / KEY_FILE_NAME
    return KEY_FILE


def load_key(configured: SecretStr | None, path: Path = KEY_FILE) -> tuple[bytes, str]:
    """(the notify key, where it came from): `configured` (FLEET_NOTIFY_KEY)
    when set, else the key file at `path`, created when missing. Raises
    `OSError` when the file cannot be read or made, `ValueError` when it
    holds no key."""
    if configured is not None:
        return configured.get_secret_value().encode(), KEY_ENV
    with contextlib.suppress(FileExistsError):  # another worker made it: read theirs
        _create(path)
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)  # ours: only the worker's user reads it
    key = path.read_text().strip()
    if len(key) < MIN_KEY_CHARS:
        raise ValueError(f"{path} holds no notify key: delete it, and a new one is made")
    return key.encode(), str(path)


def _create(path: Path) -> None:
    """Write a new key to `path`, which must not exist: the key goes to a
    temporary file first and is linked into place, so a worker starting at
    the same moment reads a whole key or finds none (`FileExistsError`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise FileExistsError(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
