"""Settings models read from the environment and the optional `.env` file.

Each settings model is a pydantic-settings `EnvModel` whose fields are named
by their variables; the file is fleet_agent/env/env_file.py's, and the
environment wins over it. A bad value is a `SettingsError`: one line that
names the variable and says what is allowed, never pydantic's multi-line
report (the worker and `fleet-agent` print it as their one error line).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import ValidationError, model_validator
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, SettingsConfigDict

from fleet_agent.env.env_file import SettingsError, env_file_path

__all__ = ["EnvModel", "SettingsError", "one_line"]


def _num(value: object) -> str:
    """A bound as people write it: 8, not 8.0."""
    return f"{value:g}" if isinstance(value, float) else str(value)


# What each pydantic error type means for a variable, in the words of the
# one-line message (the input is appended: ", not 'abc'").
def _problem(err: ErrorDetails) -> str:
    ctx = {k: _num(v) for k, v in (err.get("ctx") or {}).items()}
    kind = err["type"]
    if kind in ("int_parsing", "int_from_float", "int_type"):
        return "must be a whole number"
    if kind in ("float_parsing", "float_type", "finite_number"):
        return "must be a number"
    if kind == "greater_than_equal":
        return f"must be >= {ctx['ge']}"
    if kind == "greater_than":
        return f"must be > {ctx['gt']}"
    if kind == "less_than_equal":
        return f"must be <= {ctx['le']}"
    if kind == "literal_error":
        return f"must be {ctx['expected']}"
    return f"is not valid ({err['msg']})"


def one_line(exc: ValidationError, names: Mapping[str, str] | None = None) -> str:
    """The first error of `exc` as `NAME must be …, not 'value'`.

    An error's location is the variable (the models' fields are aliased by
    it); `names` maps other locations (a nested model's fields) to their
    variables. A validator's own message that already names its variable is
    kept as it is.
    """
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(part) for part in err["loc"])
    name = (names or {}).get(loc, loc) or "settings"
    if err["type"] == "value_error":
        message = str((err.get("ctx") or {}).get("error", err["msg"]))
        return message if message.startswith(name) else f"{name}: {message}"
    # Inputs come from the environment as text; a secret never fails here
    # (any text is a valid key), so echoing the input shows no secret.
    return f"{name} {_problem(err)}, not {err['input']!r}"


class EnvModel(BaseSettings):
    """A settings model read from the environment and the `.env` file.

    Fields are aliased by their variable's exact name (case-sensitive, as the
    environment is). A blank value means unset, as it always has here, so
    `FLEET_X=` in the environment gives the default and hides the file's
    value. Values are stripped, except the variables in `KEEP_SPACES`.
    """

    model_config = SettingsConfigDict(
        case_sensitive=True,
        # The environment and a shared .env hold many other variables.
        extra="ignore",
        frozen=True,
        # Blanks are handled by _blank_is_unset, so an empty variable in the
        # environment still wins over the file.
        env_ignore_empty=False,
    )

    KEEP_SPACES: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _blank_is_unset(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        out: dict[str, Any] = {}
        for name, value in data.items():
            if isinstance(value, str):
                if not value.strip():
                    continue
                if name not in cls.KEEP_SPACES:
                    value = value.strip()
            out[name] = value
        return out

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None, *, env_file: Path | None = None) -> Self:
        """The model from `env` alone (tests), or else from the process
        environment over `env_file` (default: `env_file_path()`).

        Raises `SettingsError` (one line) for a bad value.
        """
        try:
            if env is not None:
                # model_validate, not the constructor: no source but `env`.
                return cls.model_validate(env)
            path = env_file if env_file is not None else env_file_path()
            return cls(_env_file=path)
        except ValidationError as exc:
            raise SettingsError(one_line(exc)) from None
