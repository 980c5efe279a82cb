"""Real servers for the tests, the validation scripts and local runs (test scaffolding, not shipped: no product
package imports it): a single-node Cassandra and a three-node cluster from Maven Central jars, memcached (the one
launcher), a throw-away PostgreSQL, and a load generator against a real memcached."""

from __future__ import annotations

__all__: list[str] = []
