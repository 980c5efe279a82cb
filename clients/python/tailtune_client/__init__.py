"""tailtune's client: applies the memcached config tailtune publishes (batching or Chisel split/merge) in the
application, over a sharded pool, and reports the latencies it sees back to the service.

`tailtune_client.memcached.Client` is the entry point; `tailtune_client.hashing.server_for` is the key → server
function it shares with pymemcache's HashClient and the simulator's sharded pool.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
