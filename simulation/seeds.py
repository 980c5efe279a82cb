"""The one seed-derivation rule of every replay (`simulate`, `tune`, the analysis and the benchmarks).

A replay seed `s` names a workload: the simulator core derives its own streams (arrivals, demands, replica
choices, slowdowns) from `s` inside kvsim. What is drawn in Python from a seed comes from a named stream,
`rng(s, STREAM)` = `numpy.random.default_rng(SeedSequence([s, STREAM]))`, so two draws never share a stream
and the same (seed, stream) gives the same numbers in every process.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MEMCACHED_ARRIVALS", "rng"]

#: Poisson arrivals of a memcached replay redrawn with a mean inter-arrival gap (`--inter-arrival-us`).
MEMCACHED_ARRIVALS = 0x417


def rng(seed: int, stream: int) -> np.random.Generator:
    """The random generator of `stream` for replay seed `seed`."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(stream)]))
