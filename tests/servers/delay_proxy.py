"""A TCP relay in front of a real server that holds every reply for `delay_s` before passing it on: a slower
network (what `tc netem delay` does) for the tests of the verify step's environment reference. Every byte goes
to and comes from the real server; only the time it takes changes. The delay is read per reply, so a test can
turn it on between a publish and a check."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

__all__ = ["DelayProxy", "delay_proxy"]


class DelayProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.delay_s = 0.0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10.0)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._socks += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, reply: bool) -> None:
        try:
            while chunk := src.recv(65536):
                if reply and self.delay_s > 0:
                    time.sleep(self.delay_s)
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            for sock in self._socks:
                sock.close()


@contextmanager
def delay_proxy(host: str, port: int) -> Iterator[DelayProxy]:
    proxy = DelayProxy((host, port))
    try:
        yield proxy
    finally:
        proxy.close()
