"""What a live replay's driver is given and gives back, kind-independent: the dataset's requests in arrival order
(`ReplayTrace`), how they are dealt to the arms (`deal`), the job (`ReplayJob`), and each arm's measured latencies
per block (`ArmMeasure`, `DriverRun`; `latency_blocks` turns per-request latencies into them).

**The trace.** Requests are the dataset's rows grouped by `request_id`, in the order of their first `ts` (ties by
id), each with its keys in row order and each key's value size (−1: unknown); `offsets_us[i]` is request i's
arrival after the first one's. Both kinds' drivers send each request as the application's multiget (memcached
through its client, Cassandra as the arm's `multiget.shape` queries), and the model replays the same multigets. A
kind whose generator could send only one key per request (`ReplayDriver.one_key_per_request`) would get the trace
flattened: each key of a request a request of its own at the request's arrival time — and the model would replay
the same flattened requests, so the two compare the same thing.

**Dealing.** Every arm meets the same cluster at the same moment: the requests are dealt to the arms like cards,
a fresh random permutation of the arms for each run of `len(arms)` consecutive requests (seeded): every arm gets
every n-th request on average and the same count ±1 in any stretch, at random. A repeat deals anew (seed + repeat).

**Blocks.** Measured time (scaled, from the measured run's start) is cut into blocks of `block_s`; block b holds the
requests intended in [b, b + 1) × `block_s`. Only whole blocks are compared (a trailing part block is left out of
the histograms, its requests still counted). The comparisons resample blocks (`tuner.fidelity`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from base.errors import TailtuneError
from base.settings import Settings
from tuner.fidelity import BlockHistograms

__all__ = [
    "Arm",
    "ArmMeasure",
    "DriverRun",
    "Period",
    "Progress",
    "ReplayDriver",
    "ReplayJob",
    "ReplayRefused",
    "ReplayTrace",
    "deal",
    "latency_blocks",
]

#: Where a driver says how far it is: (stage, fraction 0..1 of the driver's part).
Progress = Callable[[str, float], None]


class ReplayRefused(TailtuneError):
    """The live replay will not run (or its result is not a comparison): the deployment does not allow it, its
    kind has no replay driver, the configs cannot run together, a limit would be passed, the generator lagged
    (`control.replay.LagTooHigh`), ... One line saying which and what to do (exit code 2)."""

    exit_code = 2


@dataclass(frozen=True)
class Arm:
    """One config under test: its name, the SPEC it came from, the config (`{"policy", "params"}`) and how it
    runs beside the others (`concurrent`: in the same stream; `alternating`: whole runs in ABBA order)."""

    name: str
    spec: str
    config: dict[str, Any]
    mode: str = "concurrent"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "spec": self.spec, "config": self.config, "mode": self.mode}


@dataclass(frozen=True, eq=False)
class ReplayTrace:
    """Requests in arrival order (module doc): `offsets_us` per request, request i's keys
    `keys[key_offsets[i]:key_offsets[i + 1]]` with their `value_sizes` (−1 unknown)."""

    source: str
    offsets_us: npt.NDArray[np.int64]
    key_offsets: npt.NDArray[np.int64]
    keys: tuple[str, ...]
    value_sizes: npt.NDArray[np.int64]

    @property
    def requests(self) -> int:
        return int(self.offsets_us.size)

    @property
    def span_s(self) -> float:
        return float(self.offsets_us[-1]) / 1e6 if self.requests else 0.0

    def request_keys(self, i: int) -> tuple[str, ...]:
        return self.keys[int(self.key_offsets[i]) : int(self.key_offsets[i + 1])]

    def mean_rate(self) -> float:
        """Requests per second of the trace's own arrivals (0 for a trace that spans no time)."""
        return (self.requests - 1) / self.span_s if self.requests > 1 and self.span_s > 0 else 0.0

    @classmethod
    def from_table(cls, table: Any, source: str) -> ReplayTrace:
        """The requests of a canonical table (`request_id`, `ts`, `key`, `value_size`; module doc). ReplayRefused
        when it has no arrival times spanning some time (the live replay sends on them) or no keys."""
        names = set(table.column_names)
        missing = [c for c in ("request_id", "ts", "key") if c not in names]
        if missing:
            raise ReplayRefused(f"{source}: the live replay needs the columns {', '.join(missing)}")
        if table.num_rows == 0:
            raise ReplayRefused(f"{source}: the dataset has no requests")
        rid = np.asarray(table.column("request_id").to_numpy(zero_copy_only=False), dtype=np.int64)
        ts = np.asarray(table.column("ts").to_numpy(zero_copy_only=False), dtype=np.float64)
        if not np.all(np.isfinite(ts)) or not ts.max() > ts.min():
            raise ReplayRefused(f"{source}: the live replay sends requests on their own arrival times, and this "
                                "dataset's ts do not span any time")
        keys = np.asarray(table.column("key").to_pylist(), dtype=object)
        if "value_size" in names:
            raw = table.column("value_size").to_pylist()
            sizes = np.asarray([-1 if v is None else int(v) for v in raw], dtype=np.int64)
        else:
            sizes = np.full(table.num_rows, -1, dtype=np.int64)
        ids, inverse = np.unique(rid, return_inverse=True)
        first = np.full(ids.size, np.inf)
        np.minimum.at(first, inverse, ts)
        rank = np.empty(ids.size, dtype=np.int64)
        rank[np.lexsort((ids, first))] = np.arange(ids.size)
        rows = np.argsort(rank[inverse], kind="stable")
        counts = np.bincount(rank[inverse], minlength=ids.size)
        arrivals = np.sort(first)
        offsets = np.round((arrivals - arrivals[0]) * 1e6).astype(np.int64)
        key_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return cls(source, offsets, key_offsets, tuple(str(k) for k in keys[rows]), sizes[rows])

    def flattened(self) -> ReplayTrace:
        """Each key of each request as a request of its own at its request's arrival (module doc)."""
        per = np.diff(self.key_offsets)
        if np.all(per == 1):
            return self
        offsets = np.repeat(self.offsets_us, per)
        return ReplayTrace(self.source, offsets, np.arange(len(self.keys) + 1, dtype=np.int64), self.keys,
                           self.value_sizes)

    def head(self, n: int) -> ReplayTrace:
        """The first `n` requests."""
        n = max(0, min(n, self.requests))
        end = int(self.key_offsets[n])
        return ReplayTrace(self.source, self.offsets_us[:n], self.key_offsets[: n + 1], self.keys[:end],
                           self.value_sizes[:end])

    def sent_before(self, seconds: float, rate_scale: float) -> int:
        """How many requests are intended before `seconds` (scaled) from the start."""
        return int(np.searchsorted(self.offsets_us / 1e6 / rate_scale, seconds, side="left"))

    def _second_ends(self, rate_scale: float) -> npt.NDArray[np.intp]:
        """For each request, the index of the first request intended a second (scaled) or more after it."""
        t = np.round(self.offsets_us / rate_scale).astype(np.int64)
        return np.searchsorted(t, t + 1_000_000, side="left")

    def peak_rate(self, rate_scale: float) -> float:
        """The most requests intended within one second (scaled), over every window starting at a request."""
        if self.requests == 0:
            return 0.0
        ends = self._second_ends(rate_scale)
        return float(np.max(ends - np.arange(ends.size)))

    def peak_key_rate(self, rate_scale: float) -> float:
        """The most keys the requests intended within one second (scaled) read, over every window starting at a
        request (a multiget of n keys counts n)."""
        if self.requests == 0:
            return 0.0
        ends = self._second_ends(rate_scale)
        offsets = np.asarray(self.key_offsets, dtype=np.int64)
        return float(np.max(offsets[ends] - offsets[: ends.size]))

    def to_table(self, rate_scale: float) -> Any:
        """The requests as a canonical table (`request_id`, `ts` scaled, `key`, `value_size`): what the model
        replays."""
        import pyarrow as pa

        per = np.diff(self.key_offsets)
        rid = np.repeat(np.arange(self.requests, dtype=np.int64), per)
        ts = np.repeat(self.offsets_us / rate_scale / 1e6, per)
        sizes = [None if s < 0 else int(s) for s in self.value_sizes]
        return pa.table({"request_id": rid, "ts": ts, "key": list(self.keys),
                         "value_size": pa.array(sizes, type=pa.int64())})


def deal(requests: int, arms: int, seed: int) -> npt.NDArray[np.int16]:
    """The arm of each request (module doc): a random permutation of the arms per run of `arms` requests."""
    rng = np.random.default_rng(seed)
    rounds = math.ceil(requests / arms) if arms else 0
    perms = np.argsort(rng.random((rounds, arms)), axis=1)
    return np.asarray(perms.reshape(-1)[:requests], dtype=np.int16)


@dataclass(frozen=True)
class Period:
    """One whole run of a job (module doc): its group, the arms it sends to (indices into the job's arms) and the
    group's cluster-wide settings (`{}`: none)."""

    group: int
    arms: tuple[int, ...]
    cluster: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class ReplayJob:
    """One live replay as a driver runs it: the arms (their configs checked), the trace to send (already
    flattened for a driver that reads one key per request, cut to what is sent: warm-up and measured run), the
    dealing of each repeat, the rate scale (request i at offset_i / rate_scale), the measured duration of one
    repeat (scaled s), the unmeasured warm-up before it (the trace's first `warmup_s`, sent once per repeat), the
    block length, the repeats, the seed, a run id naming its scratch, and the settings (limits); `periods` (one
    per `dealt`; empty: each repeat is every arm with no cluster-wide settings) as the module doc says."""

    deployment: str
    run_id: str
    arms: tuple[Arm, ...]
    trace: ReplayTrace
    dealt: tuple[npt.NDArray[np.int16], ...]
    rate_scale: float
    duration_s: float
    warmup_s: float
    block_s: float
    seed: int
    settings: Settings
    periods: tuple[Period, ...] = ()

    @property
    def repeats(self) -> int:
        """Whole runs (periods) the job sends."""
        return len(self.dealt)

    def period(self, r: int) -> Period:
        """Run r's period (every arm, no cluster-wide settings, when the job names none)."""
        return self.periods[r] if self.periods else Period(0, tuple(range(len(self.arms))))

    @property
    def blocks(self) -> int:
        """Whole blocks of one repeat's measured run."""
        return math.floor(self.duration_s / self.block_s + 1e-9)


@dataclass(frozen=True)
class ArmMeasure:
    """One arm's measured run: its latencies per whole block (all repeats' blocks, in order), its requests
    (sent in the measured runs) and their errors and timeouts, `wrong` answers (a value read that is not the one
    written), and the reads the cluster served for it with the part of them that is extra (None: not known)."""

    name: str
    histograms: BlockHistograms
    requests: int
    errors: int
    timeouts: int
    wrong: int = 0
    reads: int | None = None
    extra_reads: int | None = None


@dataclass(frozen=True)
class DriverRun:
    """What a driver measured: the generator's name, each arm's measure (the job's arm order), the rates, the
    generator's CPU per request and lag (ms: p50, p99, max), the configs as they ran (a driver fills in what a
    config leaves to the live system: the table option a user's table has), the cluster's counters, notes, and
    the model parameters the prediction replays every arm with (`model_params`)."""

    generator: str
    arms: tuple[ArmMeasure, ...]
    intended_per_s: float
    achieved_per_s: float
    cpu_us_per_request: float
    lag_ms: dict[str, float]
    configs: dict[str, dict[str, Any]]
    cluster: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: Model parameters every arm is replayed with, from how the generator ran (the Java generator's timer tick,
    #: `se_tick_ms`): facts of the run, not of a config.
    model_params: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class ReplayDriver(Protocol):
    """What `DeploymentKind.replay_driver(target)` returns: the live replay of one deployment of its kind.

    * `one_key_per_request`: its generator sends one key per request (the engine flattens the trace);
    * `default_config()`: the config `current` means when the deployment names none;
    * `complete(arms, trace, rate_scale, seed, notes)`: the arms with what their configs leave to the kind filled
      in from the trace (memcached: Chisel's analyzer's levels), before the configs are checked;
    * `modes(arms)`: how each arm runs beside the others (`concurrent` / `alternating`: the arms differ in a
      cluster-wide setting), or ReplayRefused naming what the arms cannot run as (a setting it cannot replay or
      apply live);
    * `cluster_settings(arm)`: the part of the arm's config the driver applies to the whole cluster (`{}`: none;
      a kind whose settings are all per arm always returns `{}`); arms with equal ones form one group;
    * `run(job, stop=, progress=)`: load the scratch, then run each period (`job.period(r)`: apply its cluster
      settings when they are not those of the period before, warm up, send, measure), remove the scratch and put
      back the cluster-wide settings found before the first period whatever happens (also when `stop` is set: then
      it raises). Connections go to the deployment's endpoints only, under its egress rules; nothing but scratch
      and the periods' cluster-wide settings is written."""

    one_key_per_request: bool

    def default_config(self) -> dict[str, Any]: ...

    def complete(self, arms: Sequence[Arm], trace: ReplayTrace, rate_scale: float, seed: int,
                 notes: list[str]) -> list[Arm]: ...

    def modes(self, arms: Sequence[Arm]) -> list[str]: ...

    def cluster_settings(self, arm: Arm) -> dict[str, Any]: ...

    def run(self, job: ReplayJob, *, stop: threading.Event, progress: Progress) -> DriverRun: ...


#: `latency_blocks`' bucket bounds: 1 µs to one hour, each 1 % above the last (rounded to whole µs).
_EDGES: npt.NDArray[np.float64] = np.unique(np.ceil(1.01 ** np.arange(0, 2200)))


def latency_blocks(latency_us: npt.ArrayLike, arm: npt.ArrayLike, block: npt.ArrayLike, arms: int, blocks: int,
                   block_s: float) -> list[BlockHistograms]:
    """Per-request latencies (µs) of requests of `arm` in `block` (−1 or ≥ `blocks`: left out) as each arm's
    `BlockHistograms` over shared buckets 1 % wide (the bounds from the lowest to the highest bucket any request
    fell in). For drivers that time each request themselves."""
    lat = np.maximum(np.asarray(latency_us, dtype=np.float64), 1.0)
    a = np.asarray(arm, dtype=np.int64)
    b = np.asarray(block, dtype=np.int64)
    keep = (b >= 0) & (b < blocks)
    lat, a, b = lat[keep], a[keep], b[keep]
    j = np.minimum(np.searchsorted(_EDGES, lat, side="left"), _EDGES.size - 1)
    lo, hi = (int(j.min()), int(j.max())) if j.size else (0, 0)
    upper = _EDGES[lo : hi + 1]
    counts = np.zeros((arms, max(blocks, 0), upper.size), dtype=np.int64)
    np.add.at(counts, (a, b, j - lo), 1)
    return [BlockHistograms(upper, counts[i], block_s) for i in range(arms)]
