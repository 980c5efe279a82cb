"""The app on a real socket and the memcached publisher's key, for the client's tests against the real service (the
app's fixtures, metadata DB and tokens, are tests/app_fixtures.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import uvicorn

from service.main import create_app
from tests.app_fixtures import Svc
from tests.servers.cassandra_server import free_port
from tests.servers.tailtune_service import serving

__all__ = ["KEY", "KEY_ENV", "config_key", "served"]

#: The memcached publisher's MAC key, in the variable TAILTUNE_MEMCACHED_CONFIG_KEY_ENV names.
KEY_ENV, KEY = "TT_TEST_MC_CONFIG_KEY", "a-test-key-for-the-memcached-configs"


@pytest.fixture
def config_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The publisher's key in its variable (the test names `KEY_ENV` in the settings it publishes with)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


@pytest.fixture
def served(svc: Svc) -> Iterator[str]:
    """The service app on a real socket (uvicorn in a thread), sharing the test's metadata DB."""
    config = uvicorn.Config(create_app(svc.settings), host="127.0.0.1", port=free_port(), log_level="warning")
    with serving(config) as server:
        yield f"http://127.0.0.1:{server.config.port}"
