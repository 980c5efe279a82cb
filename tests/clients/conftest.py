"""The app on a real socket and the memcached publisher's key, for the client's tests against the real service (the
app's fixtures, metadata DB and tokens, are tests/app_fixtures.py)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from service.main import create_app
from tests.app_fixtures import Svc

__all__ = ["KEY", "KEY_ENV", "config_key", "served"]

#: The memcached publisher's MAC key, in the variable TAILTUNE_MEMCACHED_CONFIG_KEY_ENV names.
KEY_ENV, KEY = "TT_TEST_MC_CONFIG_KEY", "a-test-key-for-the-memcached-configs"


@pytest.fixture
def config_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The publisher's key in its variable (the test names `KEY_ENV` in the settings it publishes with)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def served(svc: Svc) -> Iterator[str]:
    """The service app on a real socket (uvicorn in a thread), sharing the test's metadata DB."""
    server = uvicorn.Server(uvicorn.Config(create_app(svc.settings), host="127.0.0.1", port=_free_port(),
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30  # a start-up limit, not a timed assertion
        while not server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
