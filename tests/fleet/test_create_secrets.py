"""What a create request carries to vast.ai, and what it must never carry
(issue 52: rented machines hold no secrets of ours).

The worker is built as `worker.py` builds it, from an environment holding
every secret a worker may hold; creates go through the real fleet
activities and vast.ai client to the simulator, which records every create
body it receives (``PUT /api/v0/asks/{id}/``, simulator/api.py). Each body
is searched for each secret as it is, in base64, and inside every value
that decodes from base64.

Router mode: nothing of the worker's, not the CA's key nor the router's
client key, not a drain token; the machine's own key, base64 once, its
certificate signed by the worker's CA for its label's name
(fleet_agent/cuzk/credentials.py). The key never reaches the tool's result
(what workflow history keeps), the store, or a log line.
curio_on_host: nothing of the worker's either; its own drain token and no
other machine's.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from activities.fleet_credentials import machine_env_of
from fleet_agent.config.settings import Settings
from fleet_agent.cuzk.credentials import Authority, server_name
from fleet_agent.fleet.drain import DRAIN_KEY_PURPOSE, drain_token
from fleet_agent.fleet.labels import create_label
from fleet_agent.models import AgentConfig
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from testkit.fakes.configs import StaticConfigs
from tests.helpers.fleet import AGENT, _req

VAST_KEY = "vastkey-0b1d6c3e9f2a4b7d8e1c5a6f3b9d2e4c7a1f8b3d"
#: Every secret the worker's environment may hold (docs/operations/configure.md,
#: "Settings"), and credentials of the cluster a Curio operator may keep in
#: it: harmonydb's (curio cmd/curio/main.go, CURIO_DB_*) and Lotus's API token.
WORKER_SECRETS = {
    "FLEET_DATABASE_URL": "postgresql+psycopg://fleet:st0re-Pa55w0rd-7f3a@db.internal:5432/fleet",
    "VAST_API_KEY": VAST_KEY,
    "ANTHROPIC_API_KEY": "sk-ant-api03-Zq8Xw2Lr5Tn1Vb6Hj3Kc9Pm4Fs7Gd0Ya",
    "FLEET_NOTIFY_URLS": "slack://T0SECRET/B0SECRET/xoxbNotifyS3cret mailtos://u:MailPa55@mx.example",
    "FLEET_NOTIFY_KEY": "notify-key-9c2e7a41d5f86b30",
    "CONSOLE_TOKEN": "alice:console-token-5e8d1f3a9b27c640",
    "FLEET_DEMAND_TOKEN": "demand-token-3a7c9e1f5b2d8604",
    "FLEET_DEMAND_URL": "https://demand:DemandPa55@curio.internal/metrics",
    "CURIO_DB_PASSWORD": "harmony-Pa55-2d9f6b1e",
    "FULLNODE_API_INFO": "eyJhbGciOiJIUzI1NiJ9.lotus-token-8b3e:/ip4/10.0.0.2/tcp/1234/http",
}
#: Parts of the secrets above that must not appear either (a password alone).
SECRET_PARTS = [
    "st0re-Pa55w0rd-7f3a",
    "xoxbNotifyS3cret",
    "MailPa55",
    "DemandPa55",
    "console-token-5e8d1f3a9b27c640",
    "lotus-token-8b3e",
]


class CreateBodies:
    """Every create body the simulator received, as raw bytes."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def parsed(self) -> list[dict[str, Any]]:
        return [json.loads(b) for b in self.bodies]


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SimServer, CreateBodies]]:
    """The simulator, recording each ``PUT /api/v0/asks/{id}/`` as it arrives."""
    seen = CreateBodies()
    with SimServer(
        seed=11, speed=0, scenario="ideal", offers=2000, rate_limits=False, api_key=VAST_KEY
    ) as sim:
        api = sim._api
        handle = api.handle

        def recording(method: str, target: str, headers: Any, raw: bytes, client: str) -> Any:
            if method == "PUT" and target.startswith("/api/v0/asks/"):
                seen.bodies.append(raw)
            return handle(method, target, headers, raw, client)

        monkeypatch.setattr(api, "handle", recording)
        yield sim, seen


def _worker_env(monkeypatch: pytest.MonkeyPatch, sim: SimServer, tmp_path: Path, mode: str) -> None:
    monkeypatch.setenv("FLEET_ENV_FILE", "/dev/null")
    for name, value in WORKER_SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("VAST_API_URL", sim.url)
    monkeypatch.setenv("FLEET_PROVER_MODE", mode)
    monkeypatch.setenv("FLEET_ROUTER_CA_DIR", str(tmp_path / "router-ca"))


def _forms(secret: str) -> list[str]:
    """`secret` as a body might carry it: as is, and in base64."""
    raw = secret.encode()
    return [secret, base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()]


def _decoded_values(body: dict[str, Any]) -> list[str]:
    """Every string value of the body's env, and what each decodes to from base64."""
    out: list[str] = []
    for value in (body.get("env") or {}).values():
        out.append(str(value))
        try:
            out.append(base64.b64decode(str(value), validate=True).decode("utf-8", "replace"))
        except (binascii.Error, ValueError):
            continue
    return out


def _leaks(raw: bytes, secrets: dict[str, str]) -> list[str]:
    """The names of `secrets` found in the body `raw` (in any of its forms,
    or inside a value that decodes from base64)."""
    text = raw.decode()
    haystack = [text, *_decoded_values(json.loads(raw))]
    return [
        name
        for name, secret in secrets.items()
        if any(form in hay for form in _forms(secret) for hay in haystack)
    ]


def _key_body(pem: str) -> str:
    """The base64 inside a PEM block, on one line: the key's DER."""
    return "".join(line for line in pem.splitlines() if not line.startswith("-----"))


async def _rent_three(sim: SimServer, store: Store) -> tuple[list[str], list[Any], bytes]:
    """Three creates through the fleet activities the worker's settings make
    (its vast.ai client, its prover, its machine credentials); (the labels,
    the tool results, the drain tokens' key)."""
    settings = Settings.from_env()
    configs = StaticConfigs(AgentConfig(max_instance_dph=6.0, max_fleet_dph=60.0))
    async with VastClient(
        settings.vast_api_key.get_secret_value() if settings.vast_api_key else "",
        settings.vast_api_url,
        pacing=NO_PACING,
    ) as vast:
        fleet = FleetActivities(
            vast,
            settings.prover,
            store=store,
            configs=configs,
            clock=sim.market.now,
            machine_env=machine_env_of(settings),
        )
        env = ActivityEnvironment()
        found = await env.run(fleet.search_offers, _req("search_offers", {"limit": 10}))
        offers = [int(r["offer_id"]) for r in json.loads(found.content.split("\n", 1)[1])]
        assert len(offers) >= 3, found.content
        labels, results = [], []
        for n, offer in enumerate(offers[:3]):
            req = _req("create_instance", {"offer_id": offer, "reason": "t"}, tool_id=f"toolu_s{n}")
            result = await env.run(fleet.create_instance, req)
            assert result.mutating and not result.is_error, result.content
            labels.append(create_label(AGENT, 1, req.tool_use_id))
            results.append(result)
        return labels, results, vast.derived_key(DRAIN_KEY_PURPOSE)


def _store_bytes(tmp_path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in tmp_path.glob("fleet.db*"))


async def test_a_router_create_carries_the_machines_own_credential_and_nothing_else(
    recorded: tuple[SimServer, CreateBodies],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sim, seen = recorded
    _worker_env(monkeypatch, sim, tmp_path, "router")
    caplog.set_level(logging.DEBUG)
    store = Store(f"sqlite:///{tmp_path / 'fleet.db'}")
    store.create_all()
    try:
        labels, results, key = await _rent_three(sim, store)
    finally:
        store.dispose()

    authority = Authority.load_or_create(tmp_path / "router-ca")
    ca_key = (tmp_path / "router-ca" / "ca.key").read_text()
    client_key = authority.router_client().key_pem
    secrets = {
        **WORKER_SECRETS,
        **{f"part {n}": part for n, part in enumerate(SECRET_PARTS)},
        "the CA's key": ca_key,
        "the CA's key (DER)": _key_body(ca_key),
        "the router's client key": client_key,
        "the router's client key (DER)": _key_body(client_key),
        **{f"drain token of {label}": drain_token(key, label) for label in labels},
    }
    assert len(seen.bodies) == 3
    machine_keys: list[str] = []
    for raw, body, label in zip(seen.bodies, seen.parsed(), labels, strict=True):
        assert body["label"] == label
        assert not _leaks(raw, secrets), f"{label}: {_leaks(raw, secrets)}"
        env = body["env"]
        # Exactly: the front's port mapped, the machine's credential, the CA's certificate.
        assert set(env) == {
            "-p 9821:9821",
            "FLEET_FRONT_CERT",
            "FLEET_FRONT_KEY",
            "FLEET_ROUTER_CA",
            "FLEET_FRONT_PORT",
        }
        assert env["FLEET_FRONT_PORT"] == "9821" and body["onstart"] is None
        own_pem = base64.b64decode(env["FLEET_FRONT_KEY"]).decode()
        own = load_pem_private_key(own_pem.encode(), None)
        cert = x509.load_pem_x509_certificate(base64.b64decode(env["FLEET_FRONT_CERT"]))
        assert cert.public_key() == own.public_key()
        assert base64.b64decode(env["FLEET_ROUTER_CA"]).decode() == authority.ca_pem
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(authority.ca_pem.encode()))
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert names.get_values_for_type(x509.DNSName) == [server_name(label)]
        # The machine's own key: base64 once, never as plain PEM or DER.
        assert raw.decode().count(env["FLEET_FRONT_KEY"]) == 1
        assert own_pem not in raw.decode() and _key_body(own_pem) not in raw.decode()
        machine_keys.append(own_pem)
    assert len(set(machine_keys)) == 3, "each machine its own key"

    # Nowhere else: not the results (workflow history), the store, the log.
    kept = [r.model_dump_json() for r in results] + [caplog.text]
    stored = _store_bytes(tmp_path)
    for pem in machine_keys:
        for form in (pem, _key_body(pem), base64.b64encode(pem.encode()).decode()):
            assert not any(form in text for text in kept)
            assert form.encode() not in stored
    for name, secret in WORKER_SECRETS.items():
        assert secret not in caplog.text, name


async def test_an_old_path_create_carries_its_drain_token_and_nothing_of_the_worker(
    recorded: tuple[SimServer, CreateBodies], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """curio_on_host trusts the host with the cluster's credentials through
    its image; the worker's own secrets still never travel, nor another
    machine's drain token."""
    sim, seen = recorded
    _worker_env(monkeypatch, sim, tmp_path, "curio_on_host")
    store = Store(f"sqlite:///{tmp_path / 'fleet.db'}")
    store.create_all()
    try:
        labels, _, key = await _rent_three(sim, store)
    finally:
        store.dispose()
    secrets = {**WORKER_SECRETS, **{f"part {n}": part for n, part in enumerate(SECRET_PARTS)}}
    assert len(seen.bodies) == 3
    assert not (tmp_path / "router-ca").exists(), "no CA on the old path"
    for raw, body, label in zip(seen.bodies, seen.parsed(), labels, strict=True):
        others = {f"drain token of {o}": drain_token(key, o) for o in labels if o != label}
        assert not _leaks(raw, {**secrets, **others}), f"{label}: {_leaks(raw, secrets)}"
        assert body["env"] == {
            "-p 9100:9100": "1",
            "PROVER_STATUS_PORT": "9100",
            "FLEET_DRAIN_TOKEN": drain_token(key, label),
        }


async def test_router_mode_without_credentials_rents_nothing(tmp_path: Path) -> None:
    """A worker in router mode with no way to make the machines' credentials
    is refused when it is built, before any create could go without one."""
    store = Store(f"sqlite:///{tmp_path / 'fleet.db'}")
    try:
        async with VastClient(VAST_KEY, "http://127.0.0.1:9", pacing=NO_PACING) as vast:
            with pytest.raises(ValueError, match="need the machines' credentials"):
                FleetActivities(vast, Settings.from_env({}).prover, store=store)
            FleetActivities(
                vast, Settings.from_env({"FLEET_PROVER_MODE": "curio_on_host"}).prover, store=store
            )
    finally:
        store.dispose()
