"""memcached deployments: discovery (`discovery`), calibration (`calibration`), the model (`model`), the publisher
(`publisher`) and the capture of a pool's watch (`capture`), behind `Memcached`."""

from __future__ import annotations

from kinds.memcached.kind import Memcached

__all__ = ["Memcached"]
