"""Evaluator for the Cassandra deployment kind: the kvsim fork-join replay (Rust core) of a trace, through the
simulation layer (`simulation.cassandra`) that `tailtune simulate` uses too.

The trace is prepared once (requests grouped, keys hashed, value sizes → demands when they differ); each seed
materializes one workload that every candidate replays (common random numbers); a prefix workload (first
`fraction` of the requests) is made on demand for pruning, as a view of the whole one.

Sharing: a trace of at least `SHARE_MIN_OPS` ops goes into a host-wide store of memory-mapped files
(`simulation.shared`, under `TAILTUNE_HOME/tmp/`, named by a digest of the source and the deployment):
the first process to prepare it writes the trace, the layout and each seed's draws there, and every other
evaluator of the same source and deployment on the host — the tuner's worker processes — maps them instead of
loading the source and materializing its own copy. Candidates use the policy vocabulary of
`simulation.policies` (e.g. `heron` with `queue`, `tailx` with `replica`, `replica` with both).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from simulation import cassandra
from simulation.cassandra import CassandraDeployment, PreparedTrace
from simulation.policies import REPLICA_POLICY, SELECTOR_POLICIES, resolve
from simulation.registry import NOT_TUNABLE, cassandra_queue_policies
from simulation.source import WorkloadSource
from tuner.evaluators.base import Evaluator, EvaluatorSpec
from tuner.objective import Metrics
from tuner.space import Candidate

if TYPE_CHECKING:
    import kvsim

    from simulation.shared import WorkloadStore

__all__ = ["SHARE_MIN_OPS", "KvsimCassandraEvaluator"]

#: Traces with at least this many ops are shared through the host's workload store (smaller ones cost less to
#: rebuild than to write).
SHARE_MIN_OPS = 250_000

class KvsimCassandraEvaluator(Evaluator):
    """Replays a dataset / trace / profile on a kvsim cluster (default: Rein's 128 servers × 8 slots, RF 3).

    Keyword options are the fields of `CassandraDeployment` (servers, slots, replication, load, warmup, ...).
    """

    deployment = "cassandra"

    def __init__(self, source: Mapping[str, Any], **options: Any) -> None:
        self.source = WorkloadSource.from_dict(source)
        self.setup = CassandraDeployment.from_dict(options)
        self.options = options
        self._trace: PreparedTrace | None = None
        self._utilisation: dict[tuple[Any, ...], float] = {}
        #: the largest fraction of requests answered with a read timeout in any replay of each candidate
        self._timeouts: dict[tuple[Any, ...], float] = {}
        #: (seed, candidate keys) whose whole replays keep their latencies for `latencies_ms`, and those kept
        self._keep: tuple[int, set[tuple[Any, ...]]] | None = None
        self._kept: dict[tuple[Any, ...], npt.NDArray[np.float64]] = {}

    def _prepared(self) -> PreparedTrace:
        if self._trace is None:
            store = self._store()
            trace = cassandra.load_shared(store) if store is not None else None
            if trace is None:
                trace = cassandra.prepare(self.source.load(), self.setup, source=self.source.label)
                if store is not None and trace.tokens.size >= SHARE_MIN_OPS:
                    trace = cassandra.share(trace, store)
            self._trace = trace
        return self._trace

    def _store(self) -> WorkloadStore | None:
        """The host's store for this source and deployment (None: a source whose content has no stable name)."""
        from pathlib import Path

        import kvsim

        from base.settings import get_settings
        from simulation.shared import WorkloadStore

        doc: dict[str, Any] = {"source": self.source.as_dict(), "deployment": self.setup.as_dict(),
                               "model": kvsim.model_version()}
        if self.source.trace is not None:
            try:
                st = Path(self.source.trace).stat()
            except OSError:
                return None
            doc["file"] = [str(Path(self.source.trace).resolve()), st.st_size, st.st_mtime_ns]
        return WorkloadStore.under(get_settings().home_dir / "tmp", doc)

    @property
    def requests(self) -> int:
        return self._prepared().requests

    def replay_requests(self) -> int:
        return self.requests

    @property
    def sized(self) -> bool:
        """Whether the workloads use size-aware demands (the trace's value sizes differ)."""
        return self._prepared().sizes is not None

    def _replay(self, candidate: Candidate, seed: int, fraction: float,
                stop: tuple[float, float] | None = None) -> kvsim.Result:
        from base.errors import BadInputError

        where = f"candidate {candidate.label()}"
        if candidate.policy not in self.policies():
            raise BadInputError.single("candidate", f"kvsim cannot replay policy {candidate.policy!r}",
                                       field="policy")
        policy = resolve(candidate.policy, candidate.params, where=where)
        res = cassandra.replay(self._prepared(), self.setup, policy, seed, fraction=fraction, classes=False,
                               where=where, stop=stop)
        if res.stopped:  # a part of the replay: nothing kept, nothing known of its overload
            return res
        if self._keep is not None and fraction >= 1.0 and seed == self._keep[0] and candidate.key() in self._keep[1]:
            self._kept[candidate.key()] = np.asarray(res.latency_ms, dtype=np.float64)
        if res.timeouts is not None and res.timeouts["requests"] and res.requests:
            frac = res.timeouts["requests"] / res.requests
            key = candidate.key()
            self._timeouts[key] = max(frac, self._timeouts.get(key, 0.0))
        extra = int(res.copies["ops"]) if res.copies is not None else 0
        if extra and res.ops:
            util = self.load() * (res.ops + extra) / res.ops
            key = candidate.key()
            self._utilisation[key] = max(util, self._utilisation.get(key, 0.0))
        return res

    def load(self) -> float:
        """The offered load replayed: the deployment's, or with `load` None what the trace's own arrival times
        offer the deployment's capacity (`cassandra.offered_load`)."""
        if self.setup.load is not None:
            return float(self.setup.load)
        offered = cassandra.offered_load(self._prepared(), self.setup)
        return float("nan") if offered is None else offered

    def overloaded(self, candidate: Candidate) -> str | None:
        """Offered utilisation with the extra (speculative or duplicate) reads = load × (ops + extra) / ops; over
        the setting `tune_max_utilisation` (default 0.95) the candidate overloads the cluster. Requests answered
        with a read timeout in more than `tune_max_timeout_fraction` (default 0.1 %) of a replay: the cluster
        cannot serve the candidate."""
        from base.settings import get_settings

        settings = get_settings()
        timed_out = self._timeouts.get(candidate.key(), 0.0)
        if timed_out > settings.tune_max_timeout_fraction:
            return (f"{timed_out:.2%} of its requests are answered with a read timeout (load {self.load():.3g}), "
                    f"above the limit {settings.tune_max_timeout_fraction:.2%}: the cluster cannot serve it")
        util = self._utilisation.get(candidate.key())
        limit = settings.tune_max_utilisation
        if util is None or util <= limit:
            return None
        return (f"its extra reads raise the servers' utilisation to {util:.2f} (load {self.load():.3g}), above "
                f"the limit {limit:g}: it overloads the cluster")

    def adapt_summary(self, summary: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """K/R ranges from the fan-out of the topology that is replayed, not the one `analyze` assumed."""
        return {**(summary or {}), "fanout": self.fanout()}

    def fanout(self) -> dict[str, Any]:
        """The trace's fan-out on the simulated cluster (the `fanout` summary section; see tuner/fanout.py)."""
        from tuner.fanout import fanout_for_cluster

        trace = self._prepared()
        return fanout_for_cluster(trace.offsets, trace.tokens, self.setup.cluster())

    # ------------------------------------------------------------------ contract
    def policies(self) -> tuple[str, ...]:
        core = tuple(p for p in cassandra_queue_policies() if p not in NOT_TUNABLE)
        return (*core, *SELECTOR_POLICIES, REPLICA_POLICY, "stock")

    def evaluate(self, candidate: Candidate, seed: int, fraction: float = 1.0) -> Metrics:
        return _metrics(self._replay(candidate, seed, fraction))

    def evaluate_below(self, candidate: Candidate, seed: int, p99_ms: float) -> Metrics | None:
        """The replay stops once its p99 is certainly above `p99_ms` (`kvsim.ReplayConfig.stop`)."""
        r = self._replay(candidate, seed, 1.0, stop=(0.99, p99_ms))
        return None if r.stopped else _metrics(r)

    def latencies_ms(self, candidate: Candidate, seed: int) -> npt.NDArray[np.float64]:
        """From the kept replay when `keep_latencies` named the candidate and seed (handed over once), else a
        replay of the whole workload."""
        if self._keep is not None and seed == self._keep[0]:
            kept = self._kept.pop(candidate.key(), None)
            if kept is not None:
                return kept
        return np.asarray(self._replay(candidate, seed, 1.0).latency_ms, dtype=np.float64)

    def keep_latencies(self, candidates: Iterable[Candidate], seed: int) -> None:
        """The CDF figure asks for the current config's and the paper default's latencies on the first seed after
        their references replayed it: keep them from those replays (8 B per request each) instead of replaying
        the whole workload again (a minute per candidate at 10 M requests)."""
        keys = {c.key() for c in candidates}
        if self._keep is not None and self._keep[0] == seed:
            keys |= self._keep[1]
        else:
            self._kept.clear()
        self._keep = (seed, keys)

    def spec(self) -> EvaluatorSpec:
        return EvaluatorSpec("kvsim-cassandra", {"source": self.source.as_dict(), **self.options})

    def warmup_fraction(self) -> float:
        return float(self.setup.warmup)

    def deployment_record(self) -> dict[str, Any]:
        record = {"kind": "cassandra", "source": self.source.as_dict(), **self.setup.as_dict()}
        if self.setup.load is None:
            record["offered_load"] = self.load()  # what the trace's own arrivals offer the calibrated capacity
        return record

    def simulate_args(self, candidate: Candidate, seed: int) -> list[str]:
        params = [a for k, v in sorted(candidate.params.items()) for a in ("--param", f"{k}={v}")]
        setup = self.setup.cli_args()
        if "--client-rtt-ms" in setup:  # a measured round trip's quantiles: a file, not 101 numbers inline
            from base.settings import get_settings
            from tuner.sampling import write_input

            i = setup.index("--client-rtt-ms") + 1
            setup[i] = str(write_input("client-rtt-ms", setup[i].replace(",", "\n") + "\n", get_settings()))
        return ["simulate", *self.source.cli_args(), *setup, "--policy", candidate.policy, *params,
                "--seed", str(seed)]


def _metrics(r: kvsim.Result) -> Metrics:
    return Metrics(r.p50_ms, r.p95_ms, r.p99_ms, r.p999_ms, r.mean_ms)
