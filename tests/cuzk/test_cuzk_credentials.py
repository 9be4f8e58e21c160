"""The worker's CA for the router's TLS (fleet_agent/cuzk/credentials.py):
where it keeps its keys, what it issues, and what a machine is given."""

from __future__ import annotations

import base64
import datetime as dt
import os
import re
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fleet_agent.cuzk import credentials
from fleet_agent.cuzk.credentials import (
    Authority,
    CredentialError,
    machine_env,
    server_name,
)

LABEL = "fleet-agent/main/r3-0123456789"


def _cert(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())


def _eku(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def _cn(cert: x509.Certificate) -> str:
    return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def test_the_ca_is_made_once_private_and_loaded_again(tmp_path: Path) -> None:
    directory = tmp_path / "router-ca"
    first = Authority.load_or_create(directory)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "ca.key").stat().st_mode) == 0o600
    again = Authority.load_or_create(directory)
    assert again.ca_pem == first.ca_pem
    ca = _cert(first.ca_pem)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert "PRIVATE" not in first.ca_pem and "PRIVATE" not in repr(first)


def test_a_directory_others_may_enter_is_closed(tmp_path: Path) -> None:
    directory = tmp_path / "open"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)
    Authority.load_or_create(directory)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_a_key_others_may_read_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    Authority.load_or_create(tmp_path)
    os.chmod(tmp_path / "ca.key", 0o644)
    with pytest.raises(CredentialError, match=r"ca\.key is readable by others \(mode 0644\)"):
        Authority.load_or_create(tmp_path)


def test_a_key_without_its_certificate_is_refused_not_replaced(tmp_path: Path) -> None:
    Authority.load_or_create(tmp_path)
    key = (tmp_path / "ca.key").read_bytes()
    (tmp_path / "ca.pem").unlink()
    with pytest.raises(CredentialError, match="has no certificate beside it"):
        Authority.load_or_create(tmp_path)
    assert (tmp_path / "ca.key").read_bytes() == key


def test_a_machine_credential_serves_its_own_name_only(tmp_path: Path) -> None:
    authority = Authority.load_or_create(tmp_path)
    cred = authority.machine_credential(LABEL)
    cert = _cert(cred.cert_pem)
    assert cred.server_name == server_name(LABEL)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [cred.server_name]
    assert _eku(cert) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    cert.verify_directly_issued_by(_cert(authority.ca_pem))
    life = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
    assert dt.timedelta(days=29) < life <= dt.timedelta(days=30)
    key = serialization.load_pem_private_key(cred.key_pem.encode(), None)
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert key.public_key().public_bytes(*fmt) == cert.public_key().public_bytes(*fmt)
    assert "PRIVATE" not in repr(cred)
    # A fresh key each time: one machine's key opens no other.
    assert authority.machine_credential(LABEL).key_pem != cred.key_pem


def test_the_router_client_is_made_once_and_reused(tmp_path: Path) -> None:
    authority = Authority.load_or_create(tmp_path)
    client = authority.router_client()
    cert = _cert(client.cert_pem)
    assert _cn(cert) == "fleet-router"
    assert _eku(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert client.ca_pem == authority.ca_pem
    assert stat.S_IMODE((tmp_path / "router-client.key").stat().st_mode) == 0o600
    assert Authority.load_or_create(tmp_path).router_client().cert_pem == client.cert_pem
    assert "PRIVATE" not in repr(client)


def test_the_router_client_is_made_again_near_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    authority = Authority.load_or_create(tmp_path)
    first = authority.router_client()
    monkeypatch.setattr(credentials, "CLIENT_RENEW_DAYS", credentials.CLIENT_DAYS + 1)
    assert authority.router_client().cert_pem != first.cert_pem


def test_a_router_client_of_another_ca_is_not_reused(tmp_path: Path) -> None:
    Authority.load_or_create(tmp_path / "a").router_client()
    other = Authority.load_or_create(tmp_path / "b")
    for name in ("router-client.key", "router-client.pem"):
        (tmp_path / "b" / name).write_bytes((tmp_path / "a" / name).read_bytes())
        os.chmod(tmp_path / "b" / name, 0o600)
    client = other.router_client()
    _cert(client.cert_pem).verify_directly_issued_by(_cert(other.ca_pem))


def test_server_names_are_dns_labels_and_never_shared() -> None:
    name = server_name(LABEL)
    assert re.fullmatch(r"m-fleet-agent-main-r3-0123456789-[0-9a-f]{10}\.fleet\.invalid", name)
    assert server_name("a/b") != server_name("a.b")
    long = server_name("fleet-agent/" + "x" * 200 + "/r1-abcdef0123")
    first = long.split(".")[0]
    assert len(first) <= 63 and "r1-abcdef0123" in first
    assert re.fullmatch(r"[a-z0-9-]+", server_name("Ünïcode ☃/r1").split(".")[0])
    with pytest.raises(ValueError):
        server_name("")


def test_machine_env_carries_the_four_values_as_single_lines(tmp_path: Path) -> None:
    authority = Authority.load_or_create(tmp_path)
    cred = authority.machine_credential(LABEL)
    env = machine_env(cred, authority.ca_pem)
    assert set(env) == {
        "FLEET_FRONT_CERT",
        "FLEET_FRONT_KEY",
        "FLEET_ROUTER_CA",
        "FLEET_FRONT_PORT",
    }
    assert env["FLEET_FRONT_PORT"] == "9821"
    assert all("\n" not in v for v in env.values())
    assert base64.b64decode(env["FLEET_FRONT_KEY"]).decode() == cred.key_pem
    assert base64.b64decode(env["FLEET_FRONT_CERT"]).decode() == cred.cert_pem
    assert base64.b64decode(env["FLEET_ROUTER_CA"]).decode() == authority.ca_pem
    assert machine_env(cred, authority.ca_pem, 20001)["FLEET_FRONT_PORT"] == "20001"
    # Nothing of the CA's own key, nor the router's.
    ca_key = (tmp_path / "ca.key").read_text()
    assert all(
        ca_key not in base64.b64decode(v).decode()
        for k, v in env.items()
        if k != "FLEET_FRONT_PORT"
    )
    with pytest.raises(ValueError):
        machine_env(cred, authority.ca_pem, 0)
