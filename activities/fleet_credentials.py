"""The machine's own credential, made for a router-mode create (issue 52).

In router mode a create carries nothing of ours but the machine's own TLS
credential: a key and certificate for the server name of its label, signed
by the worker's CA, and the CA's certificate (public) to check the router's
client certificate with (fleet_agent/cuzk/credentials.py, `machine_env`).
One is made per create attempt, here, in the activity: the key goes from
this process into the create's body and nowhere else. Never into a
result, the tool journal, the store, a log line or an exception's text
(which Temporal would keep in history): tests/fleet/test_create_secrets.py
searches every create body for the worker's secrets and the result for
the key.

The CA lives on the worker's disk (`FLEET_ROUTER_CA_DIR`, default
``var/router-ca``; its key 0600); it is made on the first create if it is
not there yet, and loaded once per process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from fleet_agent.config.settings import Settings

if TYPE_CHECKING:
    from fleet_agent.cuzk.credentials import Authority

__all__ = ["MachineCredentials", "MachineEnv", "machine_env_of"]

#: What a router-mode create asks for: the environment entries of the
#: machine named by a label (its credential and the CA's certificate).
#: Called in a worker thread: it may read the disk and make a key.
MachineEnv = Callable[[str], Mapping[str, str]]


class MachineCredentials:
    """Makes each machine's credential from the worker's CA at `directory`
    (read, or made, on first use), for a front listening on `front_port`."""

    def __init__(self, directory: Path, front_port: int) -> None:
        self._directory = directory
        self._front_port = front_port
        self._lock = threading.Lock()
        self._authority: Authority | None = None

    def _loaded(self) -> Authority:
        # Imported here: cryptography is loaded by a worker that rents in
        # router mode, not by every importer of the fleet activities.
        from fleet_agent.cuzk.credentials import Authority

        with self._lock:
            if self._authority is None:
                self._authority = Authority.load_or_create(self._directory)
            return self._authority

    def __call__(self, label: str) -> dict[str, str]:
        """The create env entries of the machine labelled `label`: its own
        key and certificate, the CA's certificate and the front's port."""
        from fleet_agent.cuzk.credentials import machine_env

        authority = self._loaded()
        return machine_env(authority.machine_credential(label), authority.ca_pem, self._front_port)


def machine_env_of(settings: Settings) -> MachineEnv | None:
    """The worker's source of machine credentials: router mode's, from the
    CA at `Settings.router_ca_dir`; None on the old path (curio_on_host)."""
    if settings.prover.mode != "router":
        return None
    return MachineCredentials(settings.router_ca_dir, settings.prover.front_port)
