"""The router's TLS channel to one machine's front.

Touches nothing but the channel it makes: TLS with the worker's CA as the
only root, the router's client certificate (which the front requires), the
machine's own name checked (``grpc.ssl_target_name_override``: the address
is an IP and a mapped port, the name is the one its certificate was issued
for, fleet_agent/cuzk/credentials.py), and Curio's message limits
(fleet_agent/cuzk/service.py, ``channel_options``). A host holding another
machine's certificate, or none of ours, fails the handshake.
"""

from __future__ import annotations

import grpc
import grpc.aio

from .credentials import ClientCredential, server_name
from .service import channel_options

__all__ = ["machine_channel"]


def machine_channel(address: str, label: str, client: ClientCredential) -> grpc.aio.Channel:
    """A channel to the front at `address` (``host:port``) of the machine with
    `label`; the caller closes it."""
    credentials = grpc.ssl_channel_credentials(
        root_certificates=client.ca_pem.encode(),
        private_key=client.key_pem.encode(),
        certificate_chain=client.cert_pem.encode(),
    )
    options: list[tuple[str, str | int]] = [
        *channel_options(),
        ("grpc.ssl_target_name_override", server_name(label)),
    ]
    return grpc.aio.secure_channel(address, credentials, options=options)
