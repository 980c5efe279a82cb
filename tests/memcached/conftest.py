"""A real memcached (Debian package) on a free 127.0.0.1 port for this folder's tests, always stopped after.

Started as `memcached -l 127.0.0.1 -p PORT -P PIDFILE [-u memcache when root]` by
`analysis.memcached_profile.running_memcached`; the tests that need it are skipped without memcached.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from analysis.memcached_profile import MemcachedServer, running_memcached


@pytest.fixture(scope="session")
def memcached_server() -> Iterator[MemcachedServer]:
    if shutil.which("memcached") is None:
        pytest.skip("memcached is not installed (apt-get install -y memcached)")
    with running_memcached(threads=4) as server:
        yield server
