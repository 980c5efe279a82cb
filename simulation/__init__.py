"""The simulation layer: a trace table → a materialized kvsim workload → one replay config → a result.

Used by the CLI (`tailtune simulate`), the tuner's evaluators and the benchmarks alike, so a replay of the same
deployment, policy, parameters and seed gives the same figures everywhere.

- `source`: where a trace comes from (dataset, file, generator profile).
- `layout`: rows → requests (the seed-independent structure of a workload).
- `policies`: the policy and parameter vocabulary and how it maps onto a kvsim replay.
- `seeds`: the one seed-derivation rule.
- `kinds`: the one list of deployment kinds (`KINDS`) and each kind's model half; callers dispatch through it.
- `cassandra`, `memcached`: the deployment kinds' models (deployment options, prepared trace, replay).
"""

from __future__ import annotations

from simulation.cassandra import CassandraDeployment, PreparedTrace
from simulation.memcached import MEMCACHED_POLICIES, MemcachedDeployment, MemcachedTrace
from simulation.policies import ParamValue, ResolvedPolicy, parse_params, resolve
from simulation.source import WorkloadSource, load_table

__all__ = [
    "MEMCACHED_POLICIES",
    "CassandraDeployment",
    "MemcachedDeployment",
    "MemcachedTrace",
    "ParamValue",
    "PreparedTrace",
    "ResolvedPolicy",
    "WorkloadSource",
    "load_table",
    "parse_params",
    "resolve",
]
