"""Deployments resource: the Cassandra clusters and memcached pools tailtune tunes and publishes to."""

from __future__ import annotations

__all__: list[str] = []
