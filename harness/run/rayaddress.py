"""A Ray address checked before ray.init, which waits a minute or more on an address nothing
answers at, and retries for minutes (printing Ray's C++ warnings) on one where something
other than Ray listens: both are bad input within CONNECT_TIMEOUT_S here."""

from __future__ import annotations

import socket

from harness.errors import BadInput
from harness.inputs import check_text

CONNECT_TIMEOUT_S = 3.0  # a Ray address that does not answer within this is bad input


def check_address(address: str, option: str = "--ray-address") -> None:
    """BadInput, within CONNECT_TIMEOUT_S, for a HOST:PORT (or ray://HOST:PORT) nothing
    answers at: ray.init itself waits a minute or more for an unreachable cluster. `option`
    names where the address came from."""
    if address in ("auto", "local"):
        return
    check_text(address, option)
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port[:6]) < 65536:
        raise BadInput(f"{option} {address!r}: expected HOST:PORT, ray://HOST:PORT, "
                       "'auto' or 'local'")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_S) as s:
            speaks = _speaks_grpc(s)
    except (OSError, UnicodeError) as e:  # UnicodeError: a host name IDNA cannot encode
        why = getattr(e, "strerror", None) or e
        raise BadInput(f"{option} {address}: unreachable ({why}); start the "
                       "cluster (`ray start --head`) or pass its head's address") from None
    if not speaks:
        raise BadInput(f"{option} {address}: something listens there but it is not Ray (no "
                       f"gRPC answer within {CONNECT_TIMEOUT_S:.0f} s); pass the head's GCS "
                       "port (6379 by default) or its Ray Client port (ray://HOST:10001)")


# HTTP/2's client preface and an empty SETTINGS frame (RFC 9113, 3.4 and 6.5).
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _speaks_grpc(sock: socket.socket) -> bool:
    """Whether the service on `sock` answers HTTP/2's preface with a SETTINGS frame, as Ray's
    GCS and Ray Client servers (gRPC) do at once. Hand-written rather than a gRPC channel's
    readiness: these ten lines need no channel, and neither an HTTP/1 server nor one that
    never speaks can pass them; ray.init itself would retry such a service for minutes."""
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.sendall(_H2_PREFACE)
        head = b""
        while len(head) < 9:
            chunk = sock.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
    except OSError:  # a timeout included
        return False
    return head[3] == 0x04 and head[5:9] == b"\x00\x00\x00\x00"  # SETTINGS, stream 0
