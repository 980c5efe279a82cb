"""Real servers for tests and local runs: a single-node Cassandra from Maven Central jars, and memcached."""

from __future__ import annotations

__all__: list[str] = []
