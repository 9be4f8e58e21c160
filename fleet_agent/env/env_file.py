"""The optional `.env` file: which one, and copying it into the environment.

The file is `FLEET_ENV_FILE` when that is set (it must then exist), else
`.env` in the working directory when there is one. The process environment
wins over the file, variable by variable. The settings models read it
through pydantic-settings (fleet_agent/env/env_settings.py); the entry points
also export it (`export_env_file`) so that variables read outside the models
(the Temporal SDK's TEMPORAL_*, the CLI's defaults) agree with them. Apart
from the models, so the CLI's reading commands do not load pydantic-settings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from dotenv import dotenv_values

__all__ = [
    "DEFAULT_ENV_FILE",
    "ENV_FILE_ENV",
    "SettingsError",
    "env_file_path",
    "export_env_file",
]

ENV_FILE_ENV = "FLEET_ENV_FILE"
DEFAULT_ENV_FILE = ".env"


class SettingsError(ValueError):
    """A bad setting, in one line that names its variable."""


def env_file_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """The `.env` file to read, or None when there is none.

    FLEET_ENV_FILE names it (a missing file is an error: a typo must not
    silently drop every setting in it); unset or empty, `.env` in the working
    directory is read when it exists.
    """
    named = (os.environ if environ is None else environ).get(ENV_FILE_ENV, "").strip()
    if named:
        path = Path(named).expanduser()
        # exists(), not is_file(): /dev/null is a fine "no settings" file.
        if not path.exists():
            raise SettingsError(f"{ENV_FILE_ENV} must name an existing file, not {named!r}")
        return path
    default = Path(DEFAULT_ENV_FILE)
    return default if default.is_file() else None


def export_env_file(environ: MutableMapping[str, str] | None = None) -> Path | None:
    """Copy the `.env` file's variables into the environment, except those
    already set there (the environment wins); returns the file read."""
    target: MutableMapping[str, str] = os.environ if environ is None else environ
    path = env_file_path(target)
    if path is None:
        return None
    for name, value in dotenv_values(path).items():
        if value is not None and name not in target:
            target[name] = value
    return path
