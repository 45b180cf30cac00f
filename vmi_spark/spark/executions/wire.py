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
#: the length prefix of a message's header (little-endian uint32)
LENGTH = _LEN


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


#: most dimensions an array may have
MAX_NDIM = 8
#: largest total of array bytes a message may announce when the caller sets no bound
MAX_ARRAY_BYTES = 1 << 40
#: every error that parsing bytes a peer chose can raise (deep nesting, huge numbers, ...)
PARSE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError,
                OverflowError, UnicodeError, MemoryError)


def parse_header(raw: bytes | bytearray, max_bytes: int | None = None
                 ) -> tuple[dict[str, Any], list[tuple[np.dtype, tuple[int, ...]]], int]:
    """``(header, [(dtype, shape)], total array bytes)`` of a message's header bytes.

    Raises :class:`WireError` (one line) for anything that is not a header of known
    array types whose sizes add up to at most ``max_bytes`` (:data:`MAX_ARRAY_BYTES` if
    None); nothing is allocated for the arrays here.
    """
    limit = MAX_ARRAY_BYTES if max_bytes is None else max_bytes
    try:
        header = json.loads(bytes(raw).decode("utf-8"))
        if type(header) is not dict or type(header.get("arrays")) is not list:
            raise ValueError("not a message header")
        specs = header.pop("arrays")
        shapes = []
        total = 0
        for spec in specs:
            if type(spec) is not list or len(spec) != 2 or type(spec[1]) is not list:
                raise ValueError("not an array spec")
            name, dims = spec
            if type(name) is not str or name not in DTYPES:
                raise ValueError(f"array type {str(name)[:20]!r} refused")
            if len(dims) > MAX_NDIM or any(type(x) is not int or x < 0 for x in dims):
                raise ValueError("array shape refused")
            dtype = np.dtype(name)
            size = dtype.itemsize
            for x in dims:  # Python ints: no overflow; stops as soon as the limit is passed
                size *= x
                if size > limit:
                    break
            total += size
            if total > limit:
                raise WireError(f"message of more than {limit} array bytes refused")
            shapes.append((dtype, tuple(dims)))
    except PARSE_ERRORS as exc:
        text = " ".join(str(exc).split())[:100] or type(exc).__name__
        raise WireError(f"malformed message header ({text})") from None
    return header, shapes, total


def recv(sock: socket.socket, max_bytes: int | None = None,
         max_header: int = MAX_HEADER) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Receive one message: ``(header, arrays)``.

    ``max_header`` bounds the header's size (checked before it is read) and ``max_bytes``
    the total size of the arrays (a message that announces more is refused before
    anything is allocated).
    """
    raw = bytearray(_LEN.size)
    _recv_exact(sock, memoryview(raw))
    (size,) = _LEN.unpack(raw)
    if size > max_header:
        raise WireError(f"message header of {size} bytes is too large")
    head = bytearray(size)
    _recv_exact(sock, memoryview(head))
    header, shapes, _ = parse_header(head, max_bytes)
    arrays = []
    for d, s in shapes:
        a = np.empty(s, dtype=d)
        if a.nbytes:
            _recv_exact(sock, a.reshape(-1).view(np.uint8).data)
        arrays.append(a)
    return header, arrays


def arrays_from(shapes: Sequence[tuple[np.dtype, tuple[int, ...]]],
                data: bytes | bytearray) -> list[np.ndarray]:
    """The arrays of ``shapes`` read from ``data`` (their bytes, in order)."""
    arrays, at = [], 0
    for d, s in shapes:
        a = np.empty(s, dtype=d)
        a.reshape(-1).view(np.uint8)[:] = np.frombuffer(data, np.uint8, a.nbytes, at)
        at += a.nbytes
        arrays.append(a)
    return arrays
