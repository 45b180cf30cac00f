"""Messages between the driver and the resident tasks: a JSON header and raw arrays.

A message is ``uint32 header length``, the header (UTF-8 JSON, an object), then the
bytes of every array the header lists under ``"arrays"`` (``[dtype, shape]`` pairs,
little-endian, C order). Nothing is ever unpickled: a peer can send only numbers
and JSON, and only the array types in :data:`DTYPES`.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

#: the array types a message may carry
DTYPES = frozenset({"<i8", "<f8", "|u1", "|b1", "<u2"})
#: largest header accepted (the header holds small fields only; arrays follow it)
MAX_HEADER = 1 << 20
_LEN = struct.Struct("<I")


class WireError(ConnectionError):
    """The peer closed the connection or sent something that is not a message."""


def _recv_exact(sock: socket.socket, buf: memoryview) -> None:
    got = 0
    while got < len(buf):
        n = sock.recv_into(buf[got:])
        if n == 0:
            raise WireError("connection closed by the peer")
        got += n


def send(sock: socket.socket, header: dict[str, Any],
         arrays: Sequence[np.ndarray] = ()) -> None:
    """Send ``header`` and ``arrays`` as one message."""
    arrs = [np.asarray(a, order="C") for a in arrays]  # (ascontiguousarray makes 0-d 1-d)
    specs = []
    for a in arrs:
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        if dt.str not in DTYPES:
            raise TypeError(f"cannot send arrays of type {a.dtype}")
        specs.append([dt.str, list(a.shape)])
    head = json.dumps({**header, "arrays": specs}, separators=(",", ":")).encode()
    sock.sendall(_LEN.pack(len(head)) + head)
    for a in arrs:
        if a.nbytes:
            sock.sendall(a.astype(a.dtype.newbyteorder("<"), copy=False).reshape(-1)
                         .view(np.uint8).data)


def recv(sock: socket.socket, max_bytes: int | None = None) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Receive one message: ``(header, arrays)``.

    ``max_bytes`` bounds the total size of the arrays (a message that announces more
    is refused before anything is allocated).
    """
    raw = bytearray(_LEN.size)
    _recv_exact(sock, memoryview(raw))
    (size,) = _LEN.unpack(raw)
    if size > MAX_HEADER:
        raise WireError(f"message header of {size} bytes is too large")
    head = bytearray(size)
    _recv_exact(sock, memoryview(head))
    try:
        header = json.loads(head.decode())
        specs = header.pop("arrays")
        shapes = [(np.dtype(d), tuple(int(s) for s in shape)) for d, shape in specs]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise WireError(f"malformed message header ({exc})") from None
    if not isinstance(header, dict) or any(d.str not in DTYPES for d, _ in shapes):
        raise WireError("malformed message header")
    total = sum(d.itemsize * int(np.prod(s, dtype=np.int64)) for d, s in shapes)
    if any(x < 0 for _, s in shapes for x in s) or (max_bytes is not None and total > max_bytes):
        raise WireError(f"message of {total} bytes refused")
    arrays = []
    for d, s in shapes:
        a = np.empty(s, dtype=d)
        if a.nbytes:
            _recv_exact(sock, a.reshape(-1).view(np.uint8).data)
        arrays.append(a)
    return header, arrays
