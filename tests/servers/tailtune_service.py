"""tailtune's own service, started as the tests and `bench/` start it: uvicorn serving a config in a thread of the
caller's process (`serving`: the tests, which share the test's metadata DB with it), or the `tailtune serve` command
in its own process (`running_serve`: the API benchmark, which measures the server's CPU apart from its client).
Both wait until the server answers and always stop it."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import uvicorn

__all__ = ["running_serve", "serving"]


@contextmanager
def serving(
    config: uvicorn.Config, *, sockets: list[socket.socket] | None = None, bound_s: float = 30.0
) -> Iterator[uvicorn.Server]:
    """`config` served by uvicorn in a daemon thread (on `sockets` when given, else on the config's host and port);
    yields the server once it has started. `bound_s` bounds the start and the stop (a limit, not a timed
    assertion)."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + bound_s
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        yield server
    finally:
        server.should_exit = True
        thread.join(timeout=bound_s)


@contextmanager
def running_serve(env: Mapping[str, str], port: int, *, start_s: float = 20.0) -> Iterator[subprocess.Popen[bytes]]:
    """`tailtune serve --port PORT` in its own process with `env` (its TAILTUNE_HOME and settings), its output
    dropped; yields the process once `/api/v1/health` answers (or `start_s` has passed: the caller's first request
    then fails with the reason)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tailtune", "serve", "--port", str(port)],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + start_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/health"):
                    break
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)
