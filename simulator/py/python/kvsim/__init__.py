"""kvsim: Python interface to the tailtune replay simulator (Rust core)."""

from __future__ import annotations

from kvsim._kvsim import model_version
from kvsim.chisel import replay_memcached  # memcached deployment kind (issue 5)

__all__ = ["model_version"]
__all__ += ["replay_memcached"]
