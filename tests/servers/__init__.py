"""The test kit: the real servers the tests (`tests/`, `clients/python/tests/`), the validation scripts
(`validation/`) and the benchmarks (`bench/`) start, each on free 127.0.0.1 ports and always stopped; test
scaffolding, not shipped (no product package imports it).

- `cassandra_server` — a single Cassandra node from Maven Central jars (and `free_port`, `nodetool`);
  `cassandra_cluster` — three or more nodes on 127.0.0.1, .2, .3, built on it;
- `memcached_server` — memcached (the one launcher); `memcached_loadgen` — a load generator against it;
- `postgres_server` — a throw-away PostgreSQL;
- `spark_standalone` — a Spark standalone master and worker;
- `tailtune_service` — tailtune's own service: the API in a thread, or `tailtune serve` in its own process;
- `hostile_memcached`, `fake_cql` — attackers posing as memcached and as a CQL endpoint.
"""

from __future__ import annotations

__all__: list[str] = []
