"""The simulation layer: a trace table → a materialized kvsim workload → one replay config → a result.

Used by the CLI (`tailtune simulate`), the tuner's evaluators and the analysis alike, so a replay of the same
deployment, policy, parameters and seed gives the same figures everywhere.
"""

from __future__ import annotations
