"""A real memcached (Debian package) on a free 127.0.0.1 port for this folder's tests, always stopped after.

Started by `tests.servers.memcached_server.running_memcached` (4 worker threads); the tests that need it are skipped
without memcached.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.servers.memcached_server import MemcachedNode, running_memcached


@pytest.fixture(scope="session")
def memcached_server() -> Iterator[MemcachedNode]:
    if shutil.which("memcached") is None:
        pytest.skip("memcached is not installed (apt-get install -y memcached)")
    with running_memcached(threads=4, memory_mb=64) as server:
        yield server
