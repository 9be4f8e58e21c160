"""A certificate and key for the console's TLS tests, made in the test by a
throwaway CA (trustme): nothing is downloaded, and the CA signs for
127.0.0.1 and localhost only."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme

__all__ = ["CertFiles", "cert_files"]


@dataclass(frozen=True)
class CertFiles:
    ca: trustme.CA
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        """What a client that trusts this CA (and only it) verifies with."""
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context


def cert_files(directory: Path) -> CertFiles:
    """A server certificate (its chain after it) and its unencrypted key,
    written as PEM files into `directory`."""
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "localhost")
    cert, key = directory / "console-cert.pem", directory / "console-key.pem"
    cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(str(key))
    return CertFiles(ca, cert, key)
