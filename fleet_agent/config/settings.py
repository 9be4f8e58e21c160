"""Settings read from the worker's environment (and a `.env` file). Secrets never leave it.

Keys are `SecretStr`, so a settings object printed in a log shows `**********`;
nothing here is ever put in workflow history or the store. `SettingsEnv` reads
the variables (pydantic-settings, fleet_agent/env/env_settings.py); `Settings` is
what the worker uses, derived from them.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from fleet_agent.config.metrics_address import METRICS_ENV, METRICS_ENV_ALIAS, metrics_address
from fleet_agent.demand.settings import DemandEnv
from fleet_agent.env.env_settings import EnvModel, SettingsError, one_line
from fleet_agent.fleet.prover import (
    LOOPBACK_ENV,
    MIN_RAM_ENV,
    MODE_ENV,
    ProverMode,
    ProverSpec,
)
from fleet_agent.llm.model_table import (
    DEFAULT_MODEL,
    KNOWN_MODELS,
    PRICES_ENV,
    ModelInfo,
    model_info,
    model_table,
)
from fleet_agent.market.settings import MarketEnv
from fleet_agent.store.guard import NEW_STORE_ENV
from fleet_agent.vast.origin import normalize_base_url
from fleet_agent.visibility.search_attributes import (
    SEARCH_ATTRIBUTES_ENV,
    SearchAttributeMode,
    search_attribute_mode,
)

__all__ = [
    "DEFAULT_ROUTER_CA_DIR",
    "DEFAULT_VAST_URL",
    "MODEL_ENV",
    "ProverSpec",
    "Settings",
    "SettingsEnv",
]

MODEL_ENV = "FLEET_LLM_MODEL"

#: Where the worker keeps the CA that signs each machine's credential in
#: router mode (fleet_agent/cuzk/credentials.py, `Authority.load_or_create`).
DEFAULT_ROUTER_CA_DIR = Path("var/router-ca")

DEFAULT_VAST_URL = "https://console.vast.ai"


_TRUE = frozenset({"1", "true", "yes"})
_FALSE = frozenset({"0", "false", "no"})

# ProverSpec's fields set by a variable, for naming the variable in its errors;
# an error of the whole spec (a runtype without the onstart it needs) is the
# runtype's.
_PROVER_VARS = {
    "mode": MODE_ENV,
    "front_port": "FLEET_FRONT_PORT",
    "min_host_ram_gib": MIN_RAM_ENV,
    "image": "FLEET_PROVER_IMAGE",
    "disk_gb": "FLEET_PROVER_DISK_GB",
    "image_gb": "FLEET_PROVER_IMAGE_GB",
    "runtype": "FLEET_PROVER_RUNTYPE",
    "args": "FLEET_PROVER_ARGS",
    "onstart": "FLEET_PROVER_ONSTART",
    "status_port": "FLEET_PROVER_STATUS_PORT",
    "rental_hours": "FLEET_PROVER_RENTAL_HOURS",
    "proof_input_mb": "FLEET_PROVER_PROOF_INPUT_MB",
    "allow_loopback": LOOPBACK_ENV,
    "": "FLEET_PROVER_RUNTYPE",
}


class SettingsEnv(EnvModel):
    """The worker's variables as read, one field each: unset is None (or the
    default), and a value of the wrong kind is an error naming the variable."""

    # A start command is a script: its spaces are kept.
    KEEP_SPACES = frozenset({"FLEET_PROVER_ONSTART"})

    anthropic_api_key: SecretStr | None = Field(None, alias="ANTHROPIC_API_KEY")
    # None: anthropic when a key is set, else autopilot.
    llm_provider: Literal["anthropic", "autopilot"] | None = Field(None, alias="FLEET_LLM_PROVIDER")
    llm_model: str = Field(DEFAULT_MODEL, alias=MODEL_ENV)
    # JSON, parsed by model_table (its errors name the variable already).
    llm_prices: str | None = Field(None, alias=PRICES_ENV)
    database_url: str | None = Field(None, alias="FLEET_DATABASE_URL")
    new_store: bool = Field(False, alias=NEW_STORE_ENV)
    vast_api_url: str = Field(DEFAULT_VAST_URL, alias="VAST_API_URL")
    vast_api_key: SecretStr | None = Field(None, alias="VAST_API_KEY")
    # FLEET_PROVER_*: None keeps ProverSpec's default.
    prover_mode: ProverMode | None = Field(None, alias=MODE_ENV)
    front_port: int | None = Field(None, alias="FLEET_FRONT_PORT", ge=1, le=65535)
    router_ca_dir: Path = Field(DEFAULT_ROUTER_CA_DIR, alias="FLEET_ROUTER_CA_DIR")
    # The rental's RAM a machine needs, GiB (default cuzk's 128).
    prover_min_ram_gib: float | None = Field(None, alias=MIN_RAM_ENV, ge=0, allow_inf_nan=False)
    prover_image: str | None = Field(None, alias="FLEET_PROVER_IMAGE")
    prover_disk_gb: float | None = Field(None, alias="FLEET_PROVER_DISK_GB", allow_inf_nan=False)
    prover_image_gb: float | None = Field(None, alias="FLEET_PROVER_IMAGE_GB", allow_inf_nan=False)
    prover_runtype: str | None = Field(None, alias="FLEET_PROVER_RUNTYPE")
    # Split like a shell line.
    prover_args: str | None = Field(None, alias="FLEET_PROVER_ARGS")
    prover_onstart: str | None = Field(None, alias="FLEET_PROVER_ONSTART")
    # `none`: no status port; unset: the mode's default (9100, or none in router mode).
    prover_status_port: int | None = Field(None, alias="FLEET_PROVER_STATUS_PORT")
    prover_rental_hours: float | None = Field(
        None, alias="FLEET_PROVER_RENTAL_HOURS", allow_inf_nan=False
    )
    prover_proof_input_mb: float | None = Field(
        None, alias="FLEET_PROVER_PROOF_INPUT_MB", allow_inf_nan=False
    )
    # 1: prover statuses may be read on loopback (the simulator's provers).
    prover_allow_loopback: bool = Field(False, alias=LOOPBACK_ENV)
    # Checked together by metrics_address (METRICS_PORT first).
    metrics_port: str | None = Field(None, alias=METRICS_ENV)
    fleet_metrics_port: str | None = Field(None, alias=METRICS_ENV_ALIAS)
    search_attributes: SearchAttributeMode = Field("auto", alias=SEARCH_ATTRIBUTES_ENV)

    @field_validator("new_store", "prover_allow_loopback", mode="before")
    @classmethod
    def _flag(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        name = cls.model_fields[str(info.field_name)].alias
        raise ValueError(f"{name} must be 1 or 0 (or true/false, yes/no), not {value!r}")

    @field_validator("vast_api_url")
    @classmethod
    def _vast_origin(cls, value: str) -> str:
        # Checked at start: https, unless on this machine (the key travels in
        # every request; fleet_agent/vast/origin.py).
        return normalize_base_url(value, "VAST_API_URL")

    @field_validator("prover_status_port", mode="before")
    @classmethod
    def _port_or_none(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value.lower() == "none":
            return None
        if not value.isdigit() or not 1 <= int(value) <= 65535:
            raise ValueError(
                f"FLEET_PROVER_STATUS_PORT must be a port (1-65535) or none, not {value!r}"
            )
        return int(value)

    @field_validator("search_attributes", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        if isinstance(value, str):
            return search_attribute_mode({SEARCH_ATTRIBUTES_ENV: value})
        return value

    def prover(self) -> ProverSpec:
        """ProverSpec's defaults with the FLEET_PROVER_* variables that are set."""
        changes: dict[str, object] = {"allow_loopback": self.prover_allow_loopback}
        if "prover_status_port" in self.model_fields_set:
            changes["status_port"] = self.prover_status_port
        if self.prover_mode is not None:
            changes["mode"] = self.prover_mode
        if self.front_port is not None:
            changes["front_port"] = self.front_port
        if self.prover_min_ram_gib is not None:
            changes["min_host_ram_gib"] = self.prover_min_ram_gib
        if self.prover_image is not None:
            changes["image"] = self.prover_image
        if self.prover_disk_gb is not None:
            changes["disk_gb"] = self.prover_disk_gb
        if self.prover_image_gb is not None:
            changes["image_gb"] = self.prover_image_gb
        if self.prover_runtype is not None:
            changes["runtype"] = self.prover_runtype
        if self.prover_args is not None:
            changes["args"] = shlex.split(self.prover_args)
        if self.prover_onstart is not None:
            changes["onstart"] = self.prover_onstart
        if self.prover_rental_hours is not None:
            changes["rental_hours"] = self.prover_rental_hours
        if self.prover_proof_input_mb is not None:
            changes["proof_input_mb"] = self.prover_proof_input_mb
        try:
            return ProverSpec.model_validate(changes)
        except ValidationError as exc:
            raise SettingsError(one_line(exc, _PROVER_VARS)) from None


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
    # FLEET_ROUTER_CA_DIR: the CA that signs each machine's credential (router mode).
    router_ca_dir: Path = DEFAULT_ROUTER_CA_DIR
    # HOST:PORT of the worker's Prometheus endpoint (METRICS_PORT); None: off.
    metrics_address: str | None = None
    # FLEET_SEARCH_ATTRIBUTES: whether the workflows upsert search attributes.
    search_attributes: SearchAttributeMode = "auto"
    # FLEET_DEMAND_*: where demand is read (fleet_agent/demand/settings.py).
    demand: DemandEnv = Field(default_factory=lambda: DemandEnv.load({}))
    # FLEET_MARKET_*, FLEET_FIL_USD_URL: the Snark Market (fleet_agent/market/settings.py).
    market: MarketEnv = Field(default_factory=lambda: MarketEnv.load({}))

    @property
    def llm_model_info(self) -> ModelInfo:
        """Prices and cache minimum of `llm_model`; `UnknownModel` if it has none."""
        return model_info(self.llm_model, self.llm_models)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, *, env_file: Path | None = None
    ) -> Settings:
        """The settings from `env`, or else from the environment over the
        `.env` file (`env_file`, default: fleet_agent/env/env_file.py's).

        FLEET_LLM_PROVIDER defaults to anthropic when a key is set, else autopilot.
        Raises `ValueError` (one line naming the variable) for a bad setting,
        among them a FLEET_LLM_MODEL the anthropic provider would run on that
        is not a known model (fleet_agent/llm/model_table.py, FLEET_LLM_PRICES):
        workers read the settings when they start, so that is an error at
        start, not at the first run. The autopilot never uses the model and
        does not check it.
        """
        e = SettingsEnv.read(env, env_file=env_file)
        key = e.anthropic_api_key
        provider = e.llm_provider or ("anthropic" if key else "autopilot")
        models = model_table(e.llm_prices)
        if provider == "anthropic":
            model_info(e.llm_model, models)
        demand = DemandEnv.load(env, env_file=env_file)
        market = MarketEnv.load(env, demand=demand, env_file=env_file)
        ports = {METRICS_ENV: e.metrics_port or "", METRICS_ENV_ALIAS: e.fleet_metrics_port or ""}
        return cls(
            database_url=e.database_url,
            new_store=e.new_store,
            llm_provider=provider,
            llm_model=e.llm_model,
            llm_models=models,
            anthropic_api_key=key,
            vast_api_url=e.vast_api_url,
            vast_api_key=e.vast_api_key,
            prover=e.prover(),
            router_ca_dir=e.router_ca_dir,
            metrics_address=metrics_address(ports),
            search_attributes=e.search_attributes,
            demand=demand,
            market=market,
        )
