"""The service's figures (`control.metrics.snapshot`, read from the metadata DB at each scrape) as Prometheus metric
families. The names, their labels and what they count are listed in docs/operations.md § Metrics and the
dashboard; `tests/service/test_metrics.py` checks every one of them is served."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from control.common import now
from control.db import Database
from control.fidelity_store import summary
from control.metrics import FINISHED, DeploymentFigures, Snapshot, snapshot

__all__ = ["METRICS", "STEP_BUCKETS_S", "ServiceCollector", "registry"]

#: The bucket bounds of the step durations, seconds: from a publish (sub-second) to a long tune (hours).
STEP_BUCKETS_S = (0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0)

#: Every metric family this collector serves (the names as exposed, before a counter's `_total`).
METRICS = (
    "tailtune_jobs",
    "tailtune_jobs_finished",
    "tailtune_queue_depth",
    "tailtune_queue_due",
    "tailtune_job_step_duration_seconds",
    "tailtune_publishes",
    "tailtune_publish_status",
    "tailtune_config_version_running",
    "tailtune_config_version_latest",
    "tailtune_verifications",
    "tailtune_running_p99_expected_seconds",
    "tailtune_running_p99_band_low_seconds",
    "tailtune_running_p99_band_high_seconds",
    "tailtune_running_p99_observed_seconds",
    "tailtune_model_error_ratio",
    "tailtune_model_pair_agreement",
    "tailtune_model_pair_agreement_low",
    "tailtune_model_pair_agreement_high",
    "tailtune_model_pairs_resolved",
    "tailtune_model_pairs_agreeing",
    "tailtune_model_fidelity_records",
)

_DEP = ["deployment", "kind"]


def _jobs(snap: Snapshot) -> Iterator[Metric]:
    jobs = GaugeMetricFamily("tailtune_jobs", "Jobs in the queue's table by kind and status.",
                             labels=["kind", "status"])
    finished = CounterMetricFamily("tailtune_jobs_finished", "Jobs that ended, by kind and outcome.",
                                   labels=["kind", "outcome"])
    for (kind, status), n in sorted(snap.jobs.items()):
        jobs.add_metric([kind, status], n)
        if status in FINISHED:
            finished.add_metric([kind, status], n)
    depth = GaugeMetricFamily("tailtune_queue_depth", "Queued jobs (waiting for a worker), by kind.",
                              labels=["kind"])
    due = GaugeMetricFamily("tailtune_queue_due", "Queued jobs whose start time has come, by kind.", labels=["kind"])
    for kind, n in sorted(snap.due.items()):
        depth.add_metric([kind], snap.jobs.get((kind, "queued"), 0))
        due.add_metric([kind], n)
    yield from (jobs, finished, depth, due)


def _step_histogram(snap: Snapshot) -> Metric:
    hist = HistogramMetricFamily("tailtune_job_step_duration_seconds",
                                 "Durations of the jobs' recorded steps that ran, by job kind, step and outcome.",
                                 labels=["kind", "step", "outcome"])
    for (kind, step, outcome), durations in sorted(snap.steps.items()):
        buckets = [(repr(b), sum(1 for d in durations if d <= b)) for b in STEP_BUCKETS_S]
        hist.add_metric([kind, step, outcome], [*buckets, ("+Inf", len(durations))], sum_value=sum(durations))
    return hist


#: The per-deployment gauges: name → (help, labels beside the deployment's name and kind).
_GAUGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "tailtune_publish_status": ("1 for the deployment's current publish status.", ("status",)),
    "tailtune_config_version_running": ("The newest config version published to the deployment.", ()),
    "tailtune_config_version_latest": ("The deployment's newest accepted config version.", ()),
    "tailtune_verifications": ("Config versions by their verification status.", ("status",)),
    "tailtune_running_p99_expected_seconds": ("The running version's expected p99 (its recommendation).", ()),
    "tailtune_running_p99_band_low_seconds": ("Low end of the running version's expected p99 band.", ()),
    "tailtune_running_p99_band_high_seconds": ("High end of the running version's expected p99 band.", ()),
    "tailtune_running_p99_observed_seconds": ("The running version's p99 its clients reported (last verify).", ()),
    "tailtune_model_error_ratio": ("The model's mean error on the cluster, exp(mean ln(predicted/observed)) - 1, "
                                   "by percentile (live replays).", ("quantile",)),
    "tailtune_model_pair_agreement": ("Share of resolved config pairs whose p99 difference the model predicted "
                                      "with the right sign.", ()),
    "tailtune_model_pair_agreement_low": ("Wilson 95 % interval of the pair agreement, low end.", ()),
    "tailtune_model_pair_agreement_high": ("Wilson 95 % interval of the pair agreement, high end.", ()),
    "tailtune_model_pairs_resolved": ("Config pairs the live replays resolved (m).", ()),
    "tailtune_model_pairs_agreeing": ("Resolved pairs the model got the sign of (k).", ()),
    "tailtune_model_fidelity_records": ("Live replay reports pooled into the model's fidelity.", ()),
}


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def _values(dep: DeploymentFigures) -> Iterator[tuple[str, tuple[str, ...], float | None]]:
    """(gauge, its extra label values, value or None: no series) of one deployment."""
    yield "tailtune_publish_status", (dep.publish_status,), 1.0
    yield "tailtune_config_version_running", (), dep.running_version
    yield "tailtune_config_version_latest", (), dep.latest_version
    for status, n in dep.verifications.items():
        yield "tailtune_verifications", (status,), n
    lo, hi = dep.expected_band_ms or (None, None)
    yield "tailtune_running_p99_expected_seconds", (), _seconds(dep.expected_p99_ms)
    yield "tailtune_running_p99_band_low_seconds", (), _seconds(lo)
    yield "tailtune_running_p99_band_high_seconds", (), _seconds(hi)
    yield "tailtune_running_p99_observed_seconds", (), _seconds(dep.observed_p99_ms)
    fid = dep.fidelity
    if fid is None:
        return
    for q, pct in fid.error_pct.items():
        yield "tailtune_model_error_ratio", (q,), pct / 100.0
    low, high = fid.agreement_interval or (None, None)
    yield "tailtune_model_pair_agreement", (), fid.agreement
    yield "tailtune_model_pair_agreement_low", (), low
    yield "tailtune_model_pair_agreement_high", (), high
    yield "tailtune_model_pairs_resolved", (), fid.agree_m
    yield "tailtune_model_pairs_agreeing", (), fid.agree_k
    yield "tailtune_model_fidelity_records", (), fid.records


def _deployments(snap: Snapshot) -> Iterator[Metric]:
    publishes = CounterMetricFamily("tailtune_publishes", "Recorded publish steps (a publish job's or a nightly's), "
                                    "by deployment and outcome.", labels=[*_DEP, "outcome"])
    for key, n in sorted(snap.publishes.items()):
        publishes.add_metric(list(key), n)
    yield publishes
    # every family, with or without series: a service with no deployment yet still names them all
    families = {name: GaugeMetricFamily(name, doc, labels=[*_DEP, *extra]) for name, (doc, extra) in _GAUGES.items()}
    for dep in snap.deployments:
        for name, extra, value in _values(dep):
            if value is not None:
                families[name].add_metric([dep.name, dep.kind, *extra], value)
    yield from families.values()


class ServiceCollector(Collector):
    """Reads the metadata DB at each scrape: one snapshot per scrape, in one session."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterable[Metric]:
        with self.db.session() as s:
            snap = snapshot(s, now(), summary)
        return [*_jobs(snap), _step_histogram(snap), *_deployments(snap)]


def registry(db: Database) -> CollectorRegistry:
    """A registry holding only the service's collector (no process metrics: a scrape describes the service, not
    the process that happened to answer it)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ServiceCollector(db))
    return reg
