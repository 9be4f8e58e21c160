"""Settings read from the worker's environment. Secrets never leave it.

Keys are `SecretStr`, so a settings object printed in a log shows `**********`;
nothing here is ever put in workflow history or the store.
"""

from __future__ import annotations

import os
import shlex
from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from fleet_agent.llm_models import (
    DEFAULT_MODEL,
    KNOWN_MODELS,
    PRICES_ENV,
    ModelInfo,
    model_info,
    model_table,
)
from fleet_agent.metrics_address import metrics_address
from fleet_agent.prover import ProverSpec
from fleet_agent.search_attributes import SearchAttributeMode, search_attribute_mode
from fleet_agent.store.guard import NEW_STORE_ENV

__all__ = ["DEFAULT_VAST_URL", "MODEL_ENV", "ProverSpec", "Settings"]

MODEL_ENV = "FLEET_LLM_MODEL"

DEFAULT_VAST_URL = "https://console.vast.ai"


_TRUE = frozenset({"1", "true", "yes"})
_FALSE = frozenset({"", "0", "false", "no"})


def _prover(env: dict[str, str]) -> ProverSpec:
    """FLEET_PROVER_IMAGE, _DISK_GB, _RUNTYPE, _ARGS (split like a shell line),
    _ONSTART and _STATUS_PORT (``none`` for no port); unset means the default."""
    changes: dict[str, object] = {}
    if env.get("FLEET_PROVER_IMAGE"):
        changes["image"] = env["FLEET_PROVER_IMAGE"]
    if env.get("FLEET_PROVER_DISK_GB"):
        changes["disk_gb"] = float(env["FLEET_PROVER_DISK_GB"])
    if env.get("FLEET_PROVER_RUNTYPE"):
        changes["runtype"] = env["FLEET_PROVER_RUNTYPE"].strip()
    if env.get("FLEET_PROVER_ARGS"):
        changes["args"] = shlex.split(env["FLEET_PROVER_ARGS"])
    if env.get("FLEET_PROVER_ONSTART"):
        changes["onstart"] = env["FLEET_PROVER_ONSTART"]
    port = env.get("FLEET_PROVER_STATUS_PORT", "").strip().lower()
    if port:
        changes["status_port"] = None if port == "none" else int(port)
    return ProverSpec.model_validate(changes)


def _flag(env: dict[str, str], name: str) -> bool:
    value = env.get(name, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name} must be 1 or 0 (or true/false, yes/no), not {env[name]!r}")


class Settings(BaseModel):
    database_url: str | None = None
    # FLEET_NEW_STORE=1: a worker may create a new, empty store even though
    # agents are running (see fleet_agent.store.guard).
    new_store: bool = False
    llm_provider: Literal["anthropic", "autopilot"] = "autopilot"
    llm_model: str = DEFAULT_MODEL
    # Known models' prices and cache minimums, FLEET_LLM_PRICES applied.
    llm_models: dict[str, ModelInfo] = Field(default_factory=lambda: dict(KNOWN_MODELS))
    anthropic_api_key: SecretStr | None = None
    vast_api_url: str = DEFAULT_VAST_URL
    vast_api_key: SecretStr | None = None
    prover: ProverSpec = ProverSpec()
    # HOST:PORT of the worker's Prometheus endpoint (METRICS_PORT); None: off.
    metrics_address: str | None = None
    # FLEET_SEARCH_ATTRIBUTES: whether the workflows upsert search attributes.
    search_attributes: SearchAttributeMode = "auto"

    @property
    def llm_model_info(self) -> ModelInfo:
        """Prices and cache minimum of `llm_model`; `UnknownModel` if it has none."""
        return model_info(self.llm_model, self.llm_models)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        """FLEET_LLM_PROVIDER defaults to anthropic when a key is set, else autopilot.

        Raises `ValueError` (one line) for a bad setting, among them a
        FLEET_LLM_MODEL the anthropic provider would run on that is not a known
        model (fleet_agent/llm_models.py, FLEET_LLM_PRICES): workers read the
        settings when they start, so that is an error at start, not at the
        first run. The autopilot never uses the model and does not check it.
        """
        e = dict(os.environ) if env is None else env
        key = e.get("ANTHROPIC_API_KEY") or None
        provider = e.get("FLEET_LLM_PROVIDER") or ("anthropic" if key else "autopilot")
        if provider not in ("anthropic", "autopilot"):
            raise ValueError(
                f"FLEET_LLM_PROVIDER must be 'anthropic' or 'autopilot', not {provider!r}"
            )
        models = model_table(e.get(PRICES_ENV))
        model = e.get(MODEL_ENV, "").strip() or DEFAULT_MODEL
        if provider == "anthropic":
            model_info(model, models)
        vast_key = e.get("VAST_API_KEY") or None
        return cls(
            database_url=e.get("FLEET_DATABASE_URL") or None,
            new_store=_flag(e, NEW_STORE_ENV),
            llm_provider=provider,
            llm_model=model,
            llm_models=models,
            anthropic_api_key=SecretStr(key) if key else None,
            vast_api_url=(e.get("VAST_API_URL") or DEFAULT_VAST_URL).rstrip("/"),
            vast_api_key=SecretStr(vast_key) if vast_key else None,
            prover=_prover(e),
            metrics_address=metrics_address(e),
            search_attributes=search_attribute_mode(e),
        )
