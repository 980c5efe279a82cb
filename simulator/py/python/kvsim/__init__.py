"""kvsim: Python interface to the tailtune replay simulator (Rust core)."""

from __future__ import annotations

from kvsim._kvsim import model_version

__all__ = ["model_version"]
