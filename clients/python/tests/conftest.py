"""Fixtures: three real memcached servers per test, a real HTTP config service."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ttc_support import ConfigService, Memcached


@pytest.fixture
def pool() -> Iterator[list[Memcached]]:
    nodes = [Memcached() for _ in range(3)]
    try:
        for n in nodes:
            n.start()
        yield nodes
    finally:
        for n in nodes:
            n.close()


@pytest.fixture
def service() -> Iterator[ConfigService]:
    svc = ConfigService()
    svc.start()
    try:
        yield svc
    finally:
        svc.stop()
