"""The worker's own certificate authority for the router's TLS to each machine.

Touches one directory (``var/router-ca/`` by default, the caller names it):
the CA's key and certificate, the router's client key and certificate, and a
lock file. Nothing here reaches the network or the store.

- The CA signs, at create time, one key + certificate per machine, named from
  its label (`server_name`: ``m-<label, sanitised>-<hash>.fleet.invalid``),
  usable only to serve TLS (EKU serverAuth). The machine gets that key, its
  certificate and the CA's certificate (public), nothing else of ours
  (`machine_env`).
- The router holds one client certificate (CN ``fleet-router``, EKU
  clientAuth only), kept in the directory and reused, which each machine's
  front requires (prover_image/front.py).
- The router trusts only the CA and checks each machine's name, so a host
  cannot answer for another machine, and a machine's certificate cannot pass
  for the router's.

Keys are EC P-256. Ed25519 was tried: grpc's BoringSSL client does not offer
it in its signature algorithms, so a front serving an Ed25519 certificate
fails every handshake ("Handshake read failed"), with grpcio 1.85.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import fcntl
import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "DEFAULT_FRONT_PORT",
    "DOMAIN",
    "ROUTER_CLIENT_CN",
    "Authority",
    "ClientCredential",
    "CredentialError",
    "MachineCredential",
    "machine_env",
    "server_name",
]

#: The name the router presents as a client; each front requires exactly it.
ROUTER_CLIENT_CN = "fleet-router"
#: Machines' names live under a reserved TLD (RFC 6761): no public CA issues
#: for it and no resolver answers it, so the name means "ours" only here.
DOMAIN = "fleet.invalid"
#: The front's port on the machine (prover_image/front.py).
DEFAULT_FRONT_PORT = 9821

CA_DAYS = 3650
#: A machine is rented for hours to days; a certificate outliving any
#: rental by a margin, and dead a month after the machine is gone.
MACHINE_DAYS = 30
CLIENT_DAYS = 365
#: The router's client certificate is issued again this close to its end.
CLIENT_RENEW_DAYS = 30
#: Clocks on rented hosts drift: certificates start this long before now.
BACKDATE = dt.timedelta(minutes=10)

_CA_KEY = "ca.key"
_CA_CERT = "ca.pem"
_CLIENT_KEY = "router-client.key"
_CLIENT_CERT = "router-client.pem"
_LOCK = ".lock"

#: A DNS label is at most 63 characters: ``m-`` + readable part + ``-`` + hash.
_HASH_CHARS = 10
_READABLE_CHARS = 63 - len("m-") - 1 - _HASH_CHARS


class CredentialError(RuntimeError):
    """The CA directory is unsafe or inconsistent; the message says how."""


@dataclass(frozen=True, slots=True)
class MachineCredential:
    """One machine's key and certificate (PEM), and the name the router checks."""

    cert_pem: str
    key_pem: str
    server_name: str

    def __repr__(self) -> str:  # the key never reaches a log through repr
        return f"MachineCredential(server_name={self.server_name!r})"


@dataclass(frozen=True, slots=True)
class ClientCredential:
    """The router's client key and certificate, and the CA it trusts (PEM)."""

    cert_pem: str
    key_pem: str
    ca_pem: str

    def __repr__(self) -> str:
        return "ClientCredential(cn='fleet-router')"


def server_name(label: str) -> str:
    """The TLS name of the machine with `label`: ``m-<readable>-<hash>.fleet.invalid``.

    The readable part is the label lowercased, every run of characters other
    than ``a-z0-9`` made one ``-``, cut from the left to fit a DNS label (its
    end, ``r<run>-<digest>``, is what tells machines apart). Sanitising loses
    information (``a/b`` and ``a.b`` read the same), so the name ends with a
    hash of the label as it is: two labels never share a name."""
    if not label:
        raise ValueError("a machine label is needed for its TLS name")
    readable = re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")
    readable = readable[-_READABLE_CHARS:].lstrip("-") or "x"
    digest = hashlib.sha256(label.encode()).hexdigest()[:_HASH_CHARS]
    return f"m-{readable}-{digest}.{DOMAIN}"


def _b64(pem: str) -> str:
    return base64.b64encode(pem.encode()).decode("ascii")


def machine_env(
    cred: MachineCredential, ca_pem: str, front_port: int = DEFAULT_FRONT_PORT
) -> dict[str, str]:
    """The environment a machine's create carries for the router path, and
    nothing else of ours: its key and certificate, the CA's certificate (each
    base64 of the PEM, one line) and the front's port (prover_image/entrypoint.py
    reads them)."""
    if not 1 <= front_port <= 65535:
        raise ValueError(f"front port {front_port} is not a TCP port")
    return {
        "FLEET_FRONT_CERT": _b64(cred.cert_pem),
        "FLEET_FRONT_KEY": _b64(cred.key_pem),
        "FLEET_ROUTER_CA": _b64(ca_pem),
        "FLEET_FRONT_PORT": str(front_port),
    }


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_private(path: Path, text: str) -> None:
    """Write `text` to a new file only its owner can read, then move it into
    place, so no reader ever sees a half-written or open key file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_public(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _read_private_key(path: Path) -> ec.EllipticCurvePrivateKey:
    """The EC key in `path`, refused when anyone but its owner may read it
    or another user owns it."""
    st = path.stat()
    if st.st_mode & 0o077:
        raise CredentialError(
            f"{path} is readable by others (mode {stat.S_IMODE(st.st_mode):04o}): "
            f"refusing to use it; check who has read it, then `chmod 600 {path}`"
        )
    if st.st_uid != os.getuid():
        raise CredentialError(f"{path} belongs to uid {st.st_uid}, not this user: refusing it")
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CredentialError(f"{path} does not hold an EC private key")
    return key


def _same_key(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> bool:
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*fmt) == key.public_key().public_bytes(*fmt)


class Authority:
    """The worker's CA, kept in one directory (mode 0700, keys 0600)."""

    def __init__(self, directory: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate):
        self.directory = directory
        self._key = key
        self.cert = cert
        self.ca_pem = _cert_pem(cert)

    def __repr__(self) -> str:
        return f"Authority({str(self.directory)!r})"

    @classmethod
    def load_or_create(cls, directory: Path) -> Authority:
        """The CA in `directory`, made there (with the directory) the first
        time. Idempotent and safe against another process doing the same at
        once (a lock file). Raises `CredentialError` for a key file others
        may read, or a key without its certificate (making a new CA then
        would cut every running machine off)."""
        directory = Path(directory)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if stat.S_IMODE(directory.stat().st_mode) & 0o077:
            # A directory made by someone else's umask or by hand: ours only.
            os.chmod(directory, 0o700)
        with _locked(directory):
            key_path, cert_path = directory / _CA_KEY, directory / _CA_CERT
            if key_path.exists():
                if not cert_path.exists():
                    raise CredentialError(
                        f"{key_path} has no certificate beside it ({cert_path}): restore it, "
                        f"or move the directory aside to start a new CA (machines made under "
                        f"the old one must then be replaced)"
                    )
                key = _read_private_key(key_path)
                cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
                if not _same_key(cert, key):
                    raise CredentialError(f"{cert_path} is not the certificate of {key_path}")
                return cls(directory, key, cert)
            key = ec.generate_private_key(ec.SECP256R1())
            cert = _ca_certificate(key)
            _write_private(key_path, _key_pem(key))
            _write_public(cert_path, _cert_pem(cert))
            return cls(directory, key, cert)

    def _issue(
        self,
        key: ec.EllipticCurvePrivateKey,
        cn: str,
        days: int,
        usage: x509.ObjectIdentifier,
        dns: str | None,
    ) -> x509.Certificate:
        now = _now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), False
            )
        )
        if dns is not None:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(dns)]), critical=False
            )
        return builder.sign(self._key, hashes.SHA256())

    def machine_credential(self, label: str) -> MachineCredential:
        """A fresh key and a certificate for the machine with `label`: its
        `server_name` as the only DNS name, serverAuth only, `MACHINE_DAYS`."""
        name = server_name(label)
        key = ec.generate_private_key(ec.SECP256R1())
        cert = self._issue(key, name, MACHINE_DAYS, ExtendedKeyUsageOID.SERVER_AUTH, name)
        return MachineCredential(cert_pem=_cert_pem(cert), key_pem=_key_pem(key), server_name=name)

    def router_client(self) -> ClientCredential:
        """The router's client credential (CN ``fleet-router``, clientAuth
        only), made once and reused; made again when it is within
        `CLIENT_RENEW_DAYS` of its end or was signed by another CA."""
        key_path, cert_path = self.directory / _CLIENT_KEY, self.directory / _CLIENT_CERT
        with _locked(self.directory):
            if key_path.exists() and cert_path.exists():
                key = _read_private_key(key_path)
                cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
                fresh = cert.not_valid_after_utc - _now() > dt.timedelta(days=CLIENT_RENEW_DAYS)
                if fresh and _same_key(cert, key) and self._signed(cert):
                    return ClientCredential(_cert_pem(cert), _key_pem(key), self.ca_pem)
            key = ec.generate_private_key(ec.SECP256R1())
            cert = self._issue(
                key, ROUTER_CLIENT_CN, CLIENT_DAYS, ExtendedKeyUsageOID.CLIENT_AUTH, None
            )
            _write_private(key_path, _key_pem(key))
            _write_public(cert_path, _cert_pem(cert))
            return ClientCredential(_cert_pem(cert), _key_pem(key), self.ca_pem)

    def _signed(self, cert: x509.Certificate) -> bool:
        try:
            cert.verify_directly_issued_by(self.cert)
        except (ValueError, TypeError, InvalidSignature):
            return False
        return True


def _ca_certificate(key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    now = _now()
    name = _name("fleet-agent router CA")
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        # path_length 0: it signs end certificates, never another CA.
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold the directory's lock: two processes never make two CAs or two
    client certificates at once."""
    fd = os.open(directory / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
