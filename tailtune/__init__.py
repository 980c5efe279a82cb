"""tailtune: tunes multiget schedulers for Cassandra and memcached against a trace-driven simulator.

This package is the top of the import layers: the `tailtune` command (`tailtune.cli`).
"""

from __future__ import annotations

from base import __version__

__all__ = ["__version__"]
