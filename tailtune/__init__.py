"""tailtune: tunes multiget schedulers for Cassandra and memcached against a trace-driven simulator."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
