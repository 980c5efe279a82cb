"""An attacker's CQL endpoint: it answers the native protocol's handshake (OPTIONS → SUPPORTED, STARTUP →
AUTHENTICATE with Cassandra's PasswordAuthenticator) so a driver sends its credentials, and records every byte
it receives. It never accepts the credentials: by default it does not answer them (the client times out); with
`reject=True` it answers them as a node with another password does (an ERROR frame, code 0x0100 "Bad
credentials", in a protocol v5 segment). Test scaffolding, not a model of Cassandra.
"""

from __future__ import annotations

import io
import socket
import struct
import threading
from types import TracebackType

__all__ = ["FakeCqlServer"]

_OPTIONS, _STARTUP, _SUPPORTED, _AUTHENTICATE, _ERROR = 0x05, 0x01, 0x06, 0x03, 0x00
_BAD_CREDENTIALS = 0x0100


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def _multimap(d: dict[str, list[str]]) -> bytes:
    out = struct.pack(">H", len(d))
    for k, vs in d.items():
        out += _string(k) + struct.pack(">H", len(vs)) + b"".join(_string(v) for v in vs)
    return out


class FakeCqlServer:
    """`with FakeCqlServer() as fake:` listens on 127.0.0.1:`fake.port`; `fake.received()` is every byte sent to
    it (all connections), `fake.connections` how many connections it accepted."""

    def __init__(self, *, reject: bool = False) -> None:
        self.reject = reject
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.port = int(self._sock.getsockname()[1])
        self._data: list[bytes] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.connections = 0
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> FakeCqlServer:
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        self._sock.close()

    def received(self) -> bytes:
        with self._lock:
            return b"".join(self._data)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _recv(self, conn: socket.socket, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n and not self._stop.is_set():
            try:
                chunk = conn.recv(n - len(buf))
            except TimeoutError:
                continue
            except OSError:
                return None
            if not chunk:
                return None
            with self._lock:
                self._data.append(chunk)
            buf += chunk
        return buf if len(buf) == n else None

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        with conn:
            while not self._stop.is_set():
                head = self._recv(conn, 9)
                if head is None:
                    return
                version, _flags, stream, opcode, length = struct.unpack(">BBhBI", head)
                if self._recv(conn, length) is None:
                    return
                if opcode == _OPTIONS:
                    body = _multimap({"CQL_VERSION": ["3.4.7"], "COMPRESSION": [], "PROTOCOL_VERSIONS": ["5/v5"]})
                    reply = _SUPPORTED
                elif opcode == _STARTUP:
                    body = _string("org.apache.cassandra.auth.PasswordAuthenticator")
                    reply = _AUTHENTICATE
                else:
                    break
                conn.sendall(struct.pack(">BBhBI", 0x80 | (version & 0x7F), 0, stream, reply, len(body)) + body)
                if reply == _AUTHENTICATE:
                    break
            # from here on the client speaks v5 segments: record whatever it sends (its credentials)
            if self.reject:
                self._refuse_login(conn)
            while self._recv(conn, 1) is not None:
                pass

    def _refuse_login(self, conn: socket.socket) -> None:
        """Read the client's first v5 segment (AUTH_RESPONSE) and answer it with a Bad-credentials ERROR."""
        from cassandra.segment import SegmentCodec

        head = self._recv(conn, 6)  # 3 bytes: payload length (17 bits) and flags; 3 bytes: CRC24
        if head is None:
            return
        length = int.from_bytes(head[:3], "little") & 0x1FFFF
        payload = self._recv(conn, length + 4)  # the payload and its CRC32
        if payload is None or len(payload) < 9:
            return
        version, _flags, stream = struct.unpack(">BBh", payload[:4])
        body = struct.pack(">i", _BAD_CREDENTIALS) + _string("Provided username and/or password are incorrect")
        frame = struct.pack(">BBhBI", 0x80 | (version & 0x7F), 0, stream, _ERROR, len(body)) + body
        out = io.BytesIO()
        SegmentCodec().encode(out, frame)
        conn.sendall(out.getvalue())
