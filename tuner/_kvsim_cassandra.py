"""Evaluator for the Cassandra deployment kind: the kvsim fork-join replay (Rust core) of a trace.

The trace is grouped into requests once (ordered by first timestamp, then request id — as `tailtune simulate`)
and its keys hashed to ring tokens once; each seed materializes one `kvsim.Workload` (arrivals, demands) that
every candidate replays (common random numbers). A prefix workload (first `fraction` of the requests) is
materialized on demand for pruning.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tailtune.errors import BadInputError
from tuner.evaluator import Evaluator, EvaluatorSpec
from tuner.objective import Metrics
from tuner.source import WorkloadSource
from tuner.space import Candidate

if TYPE_CHECKING:
    import kvsim

__all__ = ["KvsimCassandraEvaluator"]

#: Core policies this evaluator does not offer: the oracle is not deployable (it reads every server's queue);
#: tailx needs the size-aware replay with the large-key filter (`kvsim.replay_sized`, issue 4), which this
#: evaluator does not drive yet — replayed plainly it would see no large key at all.
_NOT_TUNABLE = frozenset({"oracle", "tailx"})


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
    ) -> None:
        self.source = WorkloadSource.from_dict(source)
        self.options: dict[str, Any] = {
            "servers": servers, "slots": slots, "replication": replication, "vnodes": vnodes,
            "service_rate": service_rate, "net_latency_us": net_latency_us, "clients": clients,
            "load": load, "warmup": warmup, "use_timestamps": use_timestamps,
        }
        self._cluster: kvsim.Cluster | None = None
        self._offsets: npt.NDArray[np.int64] | None = None
        self._tokens: npt.NDArray[np.int64] | None = None
        self._ts: npt.NDArray[np.float64] | None = None  # request timestamps (use_timestamps only)
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
        from tailtune.simulation import SimulationSpec, request_layout

        layout_spec = SimulationSpec(policy="fifo", params={}, use_timestamps=bool(self.options["use_timestamps"]))
        offsets, _, keys, timestamps = request_layout(table, layout_spec, source=where)
        self._offsets = offsets
        self._tokens = kvsim.tokens_for_keys(keys)
        self._ts = timestamps

    @property
    def requests(self) -> int:
        self._prepare()
        assert self._offsets is not None
        return len(self._offsets) - 1

    def _workload(self, seed: int, fraction: float) -> kvsim.Workload:
        import kvsim

        self._prepare()
        assert self._offsets is not None and self._tokens is not None
        n_all = len(self._offsets) - 1
        n = n_all if fraction >= 1.0 else max(1, math.ceil(fraction * n_all))
        cached = self._workloads.get((seed, n))
        if cached is not None:
            return cached
        offsets = self._offsets[: n + 1]
        try:
            wl = kvsim.Workload(
                self._cluster,  # type: ignore[arg-type]
                offsets,
                tokens=self._tokens[: int(offsets[-1])],
                timestamps=self._ts[:n] if self._ts is not None else None,
                load=float(self.options["load"]),
                seed=int(seed),
            )
        except kvsim.KvsimError as exc:
            raise BadInputError.single(self.source.label, str(exc)) from None
        self._workloads[(seed, n)] = wl
        return wl

    def _replay(self, candidate: Candidate, seed: int, fraction: float) -> kvsim.Result:
        import kvsim

        if candidate.policy not in self.policies():
            raise BadInputError.single("candidate", f"kvsim cannot replay policy {candidate.policy!r}",
                                       field="policy")
        params: dict[str, float] = {}
        for k, v in candidate.params.items():
            if isinstance(v, str):
                raise BadInputError.single("candidate", f"{v!r} is not a number", field=k)
            params[k] = float(v)
        wl = self._workload(seed, fraction)
        try:
            return wl.replay(candidate.policy, params, warmup=float(self.options["warmup"]))
        except kvsim.KvsimError as exc:
            named = re.search(r"parameter '([^']+)'", str(exc))
            raise BadInputError.single(f"candidate {candidate.label()}", str(exc),
                                       field=named.group(1) if named else None) from None

    # ------------------------------------------------------------------ contract
    def policies(self) -> tuple[str, ...]:
        import kvsim

        return tuple(p for p in kvsim.policy_names() if p not in _NOT_TUNABLE)

    def evaluate(self, candidate: Candidate, seed: int, fraction: float = 1.0) -> Metrics:
        r = self._replay(candidate, seed, fraction)
        return Metrics(r.p50_ms, r.p95_ms, r.p99_ms, r.p999_ms, r.mean_ms)

    def latencies_ms(self, candidate: Candidate, seed: int) -> npt.NDArray[np.float64]:
        return np.asarray(self._replay(candidate, seed, 1.0).latency_ms, dtype=np.float64)

    def spec(self) -> EvaluatorSpec:
        return EvaluatorSpec("kvsim-cassandra", {"source": self.source.as_dict(), **self.options})
