"""An attacker posing as memcached (never a stand-in for a real server): it answers `stats`, `stats settings` and
`watch` the way a test asks for — an endless line without a newline after the watch's `OK`, an endless stream of
`STAT` lines, crafted values — on a free 127.0.0.1 port, and counts the bytes it managed to send."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tests.servers.cassandra_server import free_port

__all__ = ["HostileMemcached", "hostile_memcached"]

_CHUNK = b"x" * 65536
#: Well-formed watch lines, sent without end by the "flood" watch (a disk filler).
_LINES = b"".join(b"ts=1700000000.%06d gid=%d type=item_get key=k%d status=found clsid=1 cfd=9 size=10\n" % (i, i, i)
                  for i in range(500))


@dataclass
class HostileMemcached:
    """`watch`: "endless-line" (OK, then bytes without a newline, as fast as they are read, or one chunk every
    `trickle_s` seconds), "flood" (OK, then well-formed lines as fast as they are read), "ok" (OK, then
    silence); `stats`: "endless" (STAT lines, never END) or the STAT lines of `stats` (and `settings` for
    `stats settings`) then END."""

    watch: str = "endless-line"
    stats_mode: str = "normal"
    stats: dict[str, str] = field(default_factory=lambda: {"version": "1.6.21", "threads": "4"})
    settings: dict[str, str] = field(default_factory=lambda: {"num_threads": "4", "item_size_max": "1048576"})
    trickle_s: float = 0.0
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    sent: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _listener: socket.socket | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(16)
        sock.settimeout(0.2)
        self._listener = sock
        threading.Thread(target=self._accept, daemon=True, name="hostile-memcached").start()

    def close(self) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            buf = b""
            while not self._stop.is_set():
                while b"\n" not in buf:
                    data = conn.recv(4096)
                    if not data:
                        return
                    buf += data
                line, _, buf = buf.partition(b"\n")
                cmd = line.strip().decode()
                if cmd.startswith("watch"):
                    self._send(conn, b"OK\r\n")
                    while not self._stop.is_set():
                        if self.watch == "endless-line":
                            self._send(conn, _CHUNK)
                        elif self.watch == "flood":
                            self._send(conn, _LINES)
                        if self.watch == "ok" or self.trickle_s:
                            time.sleep(self.trickle_s or 0.05)
                    return
                if cmd.startswith("stats"):
                    if self.stats_mode == "endless":
                        n = 0
                        while not self._stop.is_set():
                            self._send(conn, b"".join(b"STAT k%d %d\r\n" % (n + i, i) for i in range(2000)))
                            n += 2000
                        return
                    values = self.settings if cmd == "stats settings" else self.stats
                    self._send(conn, b"".join(f"STAT {k} {v}\r\n".encode() for k, v in values.items()) + b"END\r\n")
                    continue
                self._send(conn, b"ERROR\r\n")


@contextlib.contextmanager
def hostile_memcached(**kwargs: object) -> Iterator[HostileMemcached]:
    server = HostileMemcached(**kwargs)  # type: ignore[arg-type]
    server.start()
    try:
        yield server
    finally:
        server.close()
