"""Evaluator for the Cassandra deployment kind: the kvsim fork-join replay (Rust core) of a trace.

The trace is grouped into requests once (ordered by first timestamp, then request id — as `tailtune simulate`)
and its keys hashed to ring tokens once; each seed materializes one `kvsim.Workload` (arrivals, demands) that
every candidate replays (common random numbers). A prefix workload (first `fraction` of the requests) is
materialized on demand for pruning.

Value sizes (issue 4's model, as `tailtune simulate`): when the trace's `value_size` has more than one distinct
known value, every workload is materialized with size-aware mean demands (t0 + size / bandwidth, unknown sizes →
the median) — for every candidate, so plain queue policies and replica selectors see the same workload. Then:

- plain queue policies (`fifo`, `rein`, `brb-*`, ...) replay with the core `Workload.replay` (round-robin);
- `tailx`, `heron` and `replica` replay through `kvsim.replay_sized` with the large-key filter and a replica
  selector (see `SIZED` below and docs/tuner.md, "Replica selection").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tailtune.base.errors import BadInputError
from tuner.evaluator import Evaluator, EvaluatorSpec
from tuner.objective import Metrics
from tuner.source import WorkloadSource
from tuner.space import QUEUE_DISCIPLINES, REPLICA_SELECTORS, Candidate

if TYPE_CHECKING:
    import kvsim
    import kvsim.replicas

__all__ = ["QUEUE_DISCIPLINES", "REPLICA_SELECTORS", "SIZED", "KvsimCassandraEvaluator"]

#: Core policies this evaluator does not offer: the oracle is not deployable (it reads every server's queue);
#: duplicate / speculative are redundancy baselines, not schedulers to tune.
_NOT_TUNABLE = frozenset({"oracle", "duplicate", "speculative"})

#: Candidate policies replayed through `kvsim.replay_sized` (large-key filter + replica selector):
#: - `tailx`: queue policy tailx; params thr_l_bytes, tl_scale, ts_scale, allowance_scale (numbers) and
#:   `replica` (selector name, default `ds` as `tailtune simulate --policy tailx`);
#: - `heron`: the Héron selector; params thr_l_bytes (the selector's) and `queue` (queue discipline);
#: - `replica`: another selector; params `replica` (selector name) and `queue` (queue discipline).
SIZED = ("tailx", "heron", "replica")


class KvsimCassandraEvaluator(Evaluator):
    """Replays a dataset / trace / profile on a kvsim cluster (default: Rein's 128 servers × 8 slots, RF 3)."""

    deployment = "cassandra"

    def __init__(
        self,
        source: Mapping[str, Any],
        *,
        servers: int = 128,
        slots: int = 8,
        replication: int = 3,
        vnodes: int = 1,
        service_rate: float = 3750.0,
        net_latency_us: float = 50.0,
        clients: int = 128,
        load: float = 0.75,
        warmup: float = 0.1,
        use_timestamps: bool = False,
        use_sizes: bool = True,
    ) -> None:
        self.source = WorkloadSource.from_dict(source)
        self.options: dict[str, Any] = {
            "servers": servers, "slots": slots, "replication": replication, "vnodes": vnodes,
            "service_rate": service_rate, "net_latency_us": net_latency_us, "clients": clients,
            "load": load, "warmup": warmup, "use_timestamps": use_timestamps, "use_sizes": use_sizes,
        }
        self._cluster: kvsim.Cluster | None = None
        self._offsets: npt.NDArray[np.int64] | None = None
        self._tokens: npt.NDArray[np.int64] | None = None
        self._ts: npt.NDArray[np.float64] | None = None  # request timestamps (use_timestamps only)
        self._sizes: npt.NDArray[np.float64] | None = None  # per op (input order), None = core model
        self._mean_demand: npt.NDArray[np.float64] | None = None
        self._default_thr: float | None = None
        self._workloads: dict[tuple[int, int], kvsim.Workload] = {}

    # ------------------------------------------------------------------ data
    def _prepare(self) -> None:
        if self._offsets is not None:
            return
        import kvsim

        o = self.options
        try:
            self._cluster = kvsim.Cluster(
                servers=o["servers"], slots=o["slots"], replication=o["replication"], vnodes=o["vnodes"],
                service_rate=float(o["service_rate"]), net_latency_us=float(o["net_latency_us"]),
                clients=o["clients"],
            )
        except (kvsim.ParameterError, OverflowError, TypeError) as exc:
            raise BadInputError.single("deployment", str(exc)) from None
        table = self.source.load()
        where = self.source.label
        from tailtune.simulation.cassandra import SimulationSpec, request_layout

        layout_spec = SimulationSpec(policy="fifo", params={}, use_timestamps=bool(self.options["use_timestamps"]))
        offsets, row_order, keys, timestamps = request_layout(table, layout_spec, source=where)
        if self.options.get("use_sizes", True):
            self._prepare_sizes(table, row_order, keys, where)
        self._offsets = offsets
        self._tokens = kvsim.tokens_for_keys(keys)
        self._ts = timestamps

    def _prepare_sizes(self, table: Any, row_order: Any, keys: Any, where: str) -> None:
        """Size-aware demands when the trace's value sizes differ (the `tailtune simulate` rule)."""
        import kvsim

        from tailtune.simulation.replicas import ReplicaSpec, _sizes_in_rows, needs_sized_replay

        if not needs_sized_replay(table, "fifo", ReplicaSpec()):
            return
        rows = _sizes_in_rows(table, where)
        if rows is None or not np.isfinite(rows).any():
            return
        assert self._cluster is not None
        model = kvsim.DemandModel.default(self._cluster.service_rate)
        info = kvsim.fill_unknown_sizes(rows[row_order], keys)
        self._sizes = np.ascontiguousarray(info.sizes, dtype=np.float64)
        self._mean_demand = model.mean_s(self._sizes)
        self._default_thr = float(kvsim.default_thr_l(model, float(info.median_bytes)))

    @property
    def requests(self) -> int:
        self._prepare()
        assert self._offsets is not None
        return len(self._offsets) - 1

    @property
    def sized(self) -> bool:
        """Whether the workloads use size-aware demands (the trace's value sizes differ)."""
        self._prepare()
        return self._sizes is not None

    def _prefix(self, fraction: float) -> int:
        assert self._offsets is not None
        n_all = len(self._offsets) - 1
        return n_all if fraction >= 1.0 else max(1, math.ceil(fraction * n_all))

    def _workload(self, seed: int, fraction: float) -> kvsim.Workload:
        import kvsim

        self._prepare()
        assert self._offsets is not None and self._tokens is not None
        n = self._prefix(fraction)
        cached = self._workloads.get((seed, n))
        if cached is not None:
            return cached
        offsets = self._offsets[: n + 1]
        n_ops = int(offsets[-1])
        try:
            wl = kvsim.Workload(
                self._cluster,  # type: ignore[arg-type]
                offsets,
                tokens=self._tokens[:n_ops],
                mean_demand_s=self._mean_demand[:n_ops] if self._mean_demand is not None else None,
                timestamps=self._ts[:n] if self._ts is not None else None,
                load=float(self.options["load"]),
                seed=int(seed),
            )
        except kvsim.KvsimError as exc:
            raise BadInputError.single(self.source.label, str(exc)) from None
        self._workloads[(seed, n)] = wl
        return wl

    @staticmethod
    def _split(candidate: Candidate) -> tuple[dict[str, float], dict[str, str]]:
        """(numeric params, string params); strings are allowed only for `replica` and `queue`."""
        nums: dict[str, float] = {}
        names: dict[str, str] = {}
        for k, v in candidate.params.items():
            if isinstance(v, str):
                if candidate.policy not in SIZED or k not in ("replica", "queue"):
                    raise BadInputError.single("candidate", f"{v!r} is not a number", field=k)
                names[k] = v
            else:
                nums[k] = float(v)
        return nums, names

    def _replay(self, candidate: Candidate, seed: int, fraction: float) -> kvsim.Result:
        import kvsim

        if candidate.policy not in self.policies():
            raise BadInputError.single("candidate", f"kvsim cannot replay policy {candidate.policy!r}",
                                       field="policy")
        params, names = self._split(candidate)
        wl = self._workload(seed, fraction)
        try:
            if candidate.policy in SIZED:
                return self._replay_sized(candidate.policy, params, names, wl, seed).result
            size_aware = bool(params.pop("size_aware_cost", 0.0))
            return wl.replay(
                candidate.policy, params, warmup=float(self.options["warmup"]), size_aware_cost=size_aware
            )
        except kvsim.KvsimError as exc:
            named = re.search(r"parameter '([^']+)'", str(exc))
            raise BadInputError.single(f"candidate {candidate.label()}", str(exc),
                                       field=named.group(1) if named else None) from None

    def sized_call(
        self, policy: str, params: Mapping[str, float], names: Mapping[str, str]
    ) -> tuple[str, dict[str, float], str, dict[str, float], float | None]:
        """How a `SIZED` candidate maps onto `kvsim.replay_sized`:
        (queue policy, its params, replica selector, its params, thr_l_bytes)."""
        where = f"candidate {policy}"
        if policy == "tailx":
            replica = names.get("replica", "ds")
            queue, qparams, rparams = "tailx", dict(params), {}
            thr = params.get("thr_l_bytes") or None
        elif policy == "heron":
            replica, queue, qparams = "heron", names.get("queue", "fifo"), {}
            rparams = dict(params)
            thr = params.get("thr_l_bytes") or None
        else:
            if "replica" not in names:
                raise BadInputError.single(where, "needs a replica selector", field="replica")
            replica, queue, qparams, rparams, thr = names["replica"], names.get("queue", "fifo"), {}, {}, None
            if params:
                raise BadInputError.single(where, f"unknown parameter(s) {sorted(params)}", field=sorted(params)[0])
        if replica not in REPLICA_SELECTORS:
            raise BadInputError.single(where, f"unknown replica selector {replica!r} (one of {REPLICA_SELECTORS})",
                                       field="replica")
        if queue != "tailx" and queue not in QUEUE_DISCIPLINES:
            raise BadInputError.single(where, f"unknown queue discipline {queue!r} (one of {QUEUE_DISCIPLINES})",
                                       field="queue")
        if thr is None:
            thr = self._default_thr
        if queue == "tailx" and thr is not None:
            qparams["thr_l_bytes"] = thr
        return queue, qparams, replica, rparams, thr

    def _replay_sized(
        self, policy: str, params: Mapping[str, float], names: Mapping[str, str], wl: kvsim.Workload, seed: int
    ) -> kvsim.replicas.SizedResult:
        import kvsim

        queue, qparams, replica, rparams, thr = self.sized_call(policy, params, names)
        sizes = self._sizes[: wl.tokens.size] if self._sizes is not None else None
        return kvsim.replay_sized(
            wl, queue, qparams, replica=replica, replica_params=rparams, sizes=sizes,
            thr_l_bytes=thr if sizes is not None else None, warmup=float(self.options["warmup"]), seed=int(seed),
        )

    def fanout(self) -> dict[str, Any]:
        """The trace's fan-out on the simulated cluster (the `fanout` summary section; see tuner/fanout.py)."""
        from tuner.fanout import fanout_for_cluster

        self._prepare()
        assert self._offsets is not None and self._tokens is not None and self._cluster is not None
        return fanout_for_cluster(self._offsets, self._tokens, self._cluster)

    # ------------------------------------------------------------------ contract
    def policies(self) -> tuple[str, ...]:
        import kvsim

        core = tuple(p for p in kvsim.policy_names() if p not in _NOT_TUNABLE and p not in SIZED)
        return (*core, *SIZED)

    def evaluate(self, candidate: Candidate, seed: int, fraction: float = 1.0) -> Metrics:
        r = self._replay(candidate, seed, fraction)
        return Metrics(r.p50_ms, r.p95_ms, r.p99_ms, r.p999_ms, r.mean_ms)

    def latencies_ms(self, candidate: Candidate, seed: int) -> npt.NDArray[np.float64]:
        return np.asarray(self._replay(candidate, seed, 1.0).latency_ms, dtype=np.float64)

    def spec(self) -> EvaluatorSpec:
        return EvaluatorSpec("kvsim-cassandra", {"source": self.source.as_dict(), **self.options})
