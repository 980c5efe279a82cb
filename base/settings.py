"""The one settings class. Every setting is an environment variable `TAILTUNE_<NAME>` (see docs/operations.md).

A list setting takes the plain comma-separated form (`10.20.0.0/16,10.30.0.0/16`) or a JSON list
(`["10.20.0.0/16"]`). A malformed setting fails `get_settings()` with one `SettingsInvalid` line naming the
variable and the form it expects (never its value: it may be a credential).
"""

from __future__ import annotations

import json
import types
import typing
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import Field, PrivateAttr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from base.errors import TailtuneError

__all__ = ["ENV_PREFIX", "Settings", "SettingsInvalid", "expected_form", "get_settings", "load_settings", "split_list"]

ENV_PREFIX = "TAILTUNE_"


class SettingsInvalid(TailtuneError):
    """A `TAILTUNE_*` variable that does not parse (exit code 2: bad input)."""

    exit_code = 2


def split_list(raw: str) -> list[str]:
    """A list setting's value: a JSON list when it starts with `[`, else comma-separated items (spaces around an
    item dropped, empty items ignored: `""` is the empty list)."""
    text = raw.strip()
    if text.startswith("["):
        value = json.loads(text)
        if not isinstance(value, list):
            raise ValueError("not a JSON list")
        return value
    return [item.strip() for item in text.split(",") if item.strip()]


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (list, tuple, set, frozenset)


def expected_form(annotation: Any) -> str:
    """What a setting of this type is written as, for the error of a malformed one."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return expected_form(args[0])
    if _is_list(annotation):
        return "a comma-separated list (a,b) or a JSON list ([\"a\", \"b\"])"
    if typing.get_origin(annotation) is typing.Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(annotation))
    forms = {bool: "true or false", int: "an integer", float: "a number", Path: "a path", str: "a string"}
    return forms.get(annotation, "a value") if isinstance(annotation, type) else "a value"


class _EnvSource(EnvSettingsSource):
    """The environment, with list settings in the plain comma-separated form as well as JSON."""

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        if isinstance(value, str) and _is_list(field.annotation):
            return split_list(value)
        return super().decode_complex_value(field_name, field, value)


class Settings(BaseSettings):
    """Where tailtune keeps its state and which external services it talks to.

    Every path default lives under `home`, so `TAILTUNE_HOME=/tmp/x` isolates a whole installation.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _EnvSource(settings_cls), dotenv_settings, file_secret_settings

    home: Path = Field(default=Path(".tailtune"), description="Root of datasets, metadata DB, MLflow, Optuna.")
    database_url: str | None = Field(default=None, description="SQLAlchemy URL of the metadata DB.")
    mlflow_tracking_uri: str | None = Field(default=None, description="MLflow tracking URI.")
    optuna_storage: str | None = Field(default=None, description="Optuna storage URL (RDB) or journal file path.")
    spark_master: str = Field(default="local[*]", description="Spark master URL (local[*] or spark://host:port).")
    analysis_fanout_requests: int = Field(
        default=10_000_000, gt=0,
        description="The analysis's fan-out histogram counts every request up to this many, above it a uniform "
        "sample of about this many (docs/analysis.md § Fan-out).",
    )

    # --- service and jobs (see docs/operations.md) ----------------------------------------------------
    api_host: str = Field(default="127.0.0.1", description="Address `tailtune serve` binds.")
    api_port: int = Field(default=8000, description="Port `tailtune serve` binds.")
    api_tokens: list[str] = Field(
        default_factory=list,
        description="Extra API tokens as 'SCOPE:SHA256HEX' (scope read|write|report; the hash, never the token); "
        "a report token bound to deployments as 'report:SHA256HEX:NAME+NAME'.",
    )
    open_reads_on_localhost: bool = Field(
        default=True, description="Allow GETs from 127.0.0.1/::1 without a token (embedded default)."
    )
    upload_max_bytes: int = Field(default=2 * 1024**3, description="Largest accepted trace upload, bytes.")
    worker_lease_s: float = Field(
        default=30.0,
        description="Job lease: a job whose worker stops heartbeating this long is resumed by another.",
    )
    worker_poll_s: float = Field(default=1.0, description="How often an idle worker looks for jobs.")
    job_max_attempts: int = Field(default=3, description="Attempts of a job before it is marked failed.")
    job_backoff_s: float = Field(default=5.0, description="Job retry backoff: base * 2**(attempt-1) seconds.")
    selftest_jobs: bool = Field(
        default=False,
        description="Accept and run `selftest` jobs (N sleeping steps: the tests' and smoke tests' job kind); "
        "production leaves it off.",
    )
    password_envs: list[str] = Field(
        default_factory=list,
        description="Environment variables a deployment's connection.password_env may name besides "
        "TAILTUNE_CASSANDRA_PASSWORD_* (control/egress.py); no other variable is ever read for one.",
    )
    connect_networks: list[str] = Field(
        default_factory=list,
        description="Networks (CIDRs) the service and the worker may connect to for a deployment (readiness, "
        "discovery, calibration, capture, publishing); empty: any. The API refuses an address outside them; a host "
        "name is resolved once, refused when any address is outside, and connected to at the checked address.",
    )
    publish_attempts: int = Field(default=4, description="Attempts of one publish to one target.")
    publish_backoff_s: float = Field(default=0.5, description="Publish retry backoff: base * 2**(n-1) s.")
    publish_timeout_s: float = Field(default=5.0, description="Timeout of one request to a publish target.")
    config_cache_s: float = Field(
        default=1.0,
        description="How long the API may serve a deployment's latest config from memory (staleness bound).",
    )
    scheduler_catchup_s: float = Field(
        default=6 * 3600.0,
        description="After an outage, a missed cron slot younger than this runs once; older are skipped.",
    )

    cassandra_lib: Path | None = Field(
        default=None,
        description="Folder of the Cassandra jars a binary full query log is read with (cassandra-fql); default: "
        "the lib/ the setup fetches, ~/.cache/tailtune/cassandra-5.0.9/lib (docs/formats.md § cassandra-fql).",
    )

    # --- ingest limits (docs/operations.md § Limits; ingest/limits.py) ------------------------------------------
    # Caps on one ingest run by the service (an upload through the API, the nightly job) and by any `ingest_file`
    # caller that passes no limits. Each is checked while the file streams and fails the ingest with a message
    # naming its variable; 0 = no limit. `tailtune ingest` of a local file applies only the two shape caps
    # (line bytes, columns) by default, the others only when given (--max-rows, ...) or with --upload-limits.
    ingest_max_decompressed_bytes: int = Field(
        default=16 * 1024**3, ge=0, description="Most bytes one input may decompress to (or be, uncompressed)."
    )
    ingest_max_compression_ratio: float = Field(
        default=100.0,
        ge=0,
        description="Most decompressed bytes per compressed byte (judged after the first 16 MiB decompressed).",
    )
    ingest_max_rows: int = Field(default=100_000_000, ge=0, description="Most rows (key accesses) of one dataset.")
    ingest_max_line_bytes: int = Field(default=1024**2, ge=0, description="Longest line of a text input, bytes.")
    ingest_max_columns: int = Field(
        default=1024, ge=0, description="Most columns of a header, a Parquet schema or a header-less line."
    )
    fql_duplicate_window_ms: int = Field(
        default=100,
        ge=0,
        description="Several nodes' full query logs: a record whose statements and bound values equal those of a "
        "record another node logged at most this many ms before is counted as a likely duplicate (a hedged or "
        "retried request), kept and reported (docs/formats.md § Several nodes' logs).",
    )
    ingest_count_memory_mb: int = Field(
        default=512,
        ge=64,
        description="Memory for the exact distinct counts of a dataset too large for the in-memory sets (more "
        "than 32 M request ids or keys), MiB: DuckDB, one thread, spilling to the staging folder beyond it.",
    )

    # --- service hardening: limits and guards of the API and the worker (docs/operations.md § Limits) --------
    api_allowed_hosts: list[str] = Field(
        default_factory=lambda: ["localhost", "127.0.0.1", "::1"],
        description="Host header values the API answers (DNS-rebinding guard); '*' allows any; the bind "
        "address of `tailtune serve` is always allowed.",
    )
    api_max_body_bytes: int = Field(
        default=1024**2, description="Largest request body except trace uploads (JSON), bytes; 413 past it."
    )
    api_max_list: int = Field(default=1000, description="Largest `limit` of a listing (default page: 100).")
    config_max_bytes: int = Field(
        default=64 * 1024, description="Largest config (canonical JSON) stored as a version or current_config."
    )
    config_max_depth: int = Field(
        default=32,
        ge=8,
        le=200,
        description="Deepest nesting of a config (objects and lists; the config itself is level 1); 422 past it. "
        "At most 200: the API's JSON answers cannot serialise much deeper.",
    )
    memcached_item_max_bytes: int = Field(
        default=1024**2, description="memcached's item size limit (its -I); a bigger config document fails."
    )
    memcached_stale_versions_max: int = Field(
        default=10_000, ge=0,
        description="Most version keys (v1..vN) of a deleted same-name deployment a memcached publish removes from "
        "a server still holding that deployment's current key.",
    )
    memcached_config_key_env: str = Field(
        default="",
        description="The environment variable (of the worker) holding the key memcached config documents are MACed "
        "with (HMAC-SHA256, at least 16 bytes); clients reading the config from the pool are given the same key. "
        "Empty: documents carry no MAC, and only clients polling the API's config can run them.",
    )
    tune_max_trials: int = Field(default=1000, description="Largest `tune.trials` of a job.")
    tune_max_seeds: int = Field(default=20, description="Largest `tune.seeds` of a job.")
    tune_max_timeout_s: float = Field(default=86400.0, description="Largest `tune.timeout_s` of a job.")
    tune_max_utilisation: float = Field(
        default=0.95, gt=0.0,
        description="A candidate whose extra reads (speculative retry, hedging) push the servers' offered "
        "utilisation above this is pruned as overloading the cluster.",
    )
    tune_max_timeout_fraction: float = Field(
        default=0.001, ge=0.0, le=1.0,
        description="A candidate under which more than this fraction of the requests is answered with a read "
        "timeout (Cassandra's replicas drop the expired reads) is pruned as one the cluster cannot serve.",
    )
    tune_min_rung_requests: int = Field(
        default=150_000, ge=1,
        description="A study's pruning rungs go below its prefix (a quarter, a sixteenth, ... of the first seed: "
        "successive halving) while a rung still replays at least this many requests.",
    )
    tune_holdout_fraction: float = Field(
        default=0.2, ge=0.0, lt=1.0,
        description="A trace with timestamps: the last this fraction of its span is held out of the study and the "
        "verdict confirmed on it (tuner/holdout.py); 0: confirm on fresh seeds of the whole trace only.",
    )
    tune_holdout_min_requests: int = Field(
        default=2000, ge=0,
        description="A held-out stretch with fewer requests than this is not split off (the confirmation then "
        "replays fresh seeds of the whole trace).",
    )
    tune_confirm_seeds: int = Field(
        default=5, ge=1, le=100,
        description="Fresh seeds the verdict is confirmed on (at least the study's own count; tuner/confirm.py).",
    )
    tune_confirm_alpha: float = Field(
        default=0.05, gt=0.0, lt=1.0, description="Level of the held-out confirmation's one-sided test."
    )
    job_time_budget_s: float = Field(
        default=6 * 3600.0, description="A running job is stopped (failed, not retried) after this long; 0: none."
    )
    job_logs_max_bytes: int = Field(default=256 * 1024, description="A job's logs stop growing past this.")
    nightly_cdf_points: int = Field(
        default=256, ge=0, le=10_000,
        description="Points per latency CDF a nightly job records with its recommendation (current, recommended "
        "or best found, the other server kind's best: the console draws them); each curve is one more replay of "
        "the first seed; 0: none.",
    )
    tmp_unowned_max_age_s: float = Field(
        default=86400.0,
        description="Start-up sweep: scratch left by no known process is removed once untouched this long.",
    )
    min_free_bytes: int = Field(
        default=1024**3, ge=0,
        description="Readiness fails while TAILTUNE_HOME's filesystem has fewer bytes free than this; 0: no check.",
    )
    api_read_timeout_s: float = Field(
        default=30.0, gt=0,
        description="A request body (upload or JSON) that sends no byte for this long, or a request head not "
        "complete this long after it began, is answered 408 and its connection closed.",
    )
    api_max_url_bytes: int = Field(
        default=16 * 1024, gt=0, description="Longest request target (path and query), bytes; 414 past it."
    )
    api_max_header_bytes: int = Field(
        default=64 * 1024, gt=0, description="Most bytes of a request's header fields (names and values); 431 past it."
    )

    # --- the web console (docs/console.md) ---------------------------------------------------------------------
    console_session_s: float = Field(
        default=12 * 3600.0, gt=0, le=30 * 86400.0,
        description="How long the console's sign-in cookie lasts (seconds); then the browser asks for the token again.",
    )
    console_secure_cookies: bool = Field(
        default=False,
        description="Mark the console's cookies Secure (sent over HTTPS only): set it when a proxy terminates TLS in "
        "front of `tailtune serve`; a request that arrives over HTTPS gets Secure cookies anyway.",
    )

    # --- discovery (`tailtune deployments discover`; docs/operations.md § The deployment's model) ------------
    discover_timeout_s: float = Field(
        default=10.0, gt=0, description="Timeout of connecting to, and of one request to, a deployment's nodes."
    )
    discover_probe_reads: int = Field(
        default=200, ge=0, le=100_000,
        description="Single-key reads timed client-side, one at a time, on a table whose service time the node's "
        "latency tables cannot resolve (below their 1 ms resolution); 0: none.",
    )
    model_max_bytes: int = Field(
        default=8 * 1024**2, gt=0,
        description="Largest deployment model (JSON) discovery or calibration stores: what a live system reports "
        "beyond it is refused, not stored.",
    )
    calibrate_reads: int = Field(
        default=1000, ge=20, le=100_000,
        description="Requests `tailtune deployments calibrate` times, one at a time, for each measurement (trivial "
        "round trips, single-partition reads); the round trips' p99, replayed, rests on 1 % of them.",
    )
    calibrate_keys: int = Field(
        default=8, ge=2, le=100,
        description="Partitions each multi-partition read of `tailtune deployments calibrate` reads at once (`IN`): "
        "the per-partition client cost is the difference from a single-partition read over this less one.",
    )
    calibrate_warmup: int = Field(
        default=1000, ge=0, le=100_000,
        description="Rounds (one trivial request and one of each read) `tailtune deployments calibrate` runs uncounted "
        "before it times any: the node's and the client's rarely used paths warm up first.",
    )
    calibrate_capacity_rates: list[float] = Field(
        default=[200.0, 400.0], min_length=1, max_length=8,
        description="Requests a second of each loaded phase of the capacity measurement (`tailtune deployments "
        "calibrate` of a Cassandra deployment naming `connection.jmx_port`): single-partition and `IN` reads at each "
        "rate, beside idle intervals; the utilization law's fit needs the mixes, not a high load (docs/model.md § "
        "Capacity).",
    )
    calibrate_capacity_interval_s: float = Field(
        default=2.0, ge=0.5, le=60.0,
        description="Seconds of one interval of the capacity measurement: the node's CPU and counters are read at "
        "each interval's ends (ProcessCpuTime resolves 10 ms: an interval holds hundreds of its steps).",
    )
    calibrate_capacity_intervals: int = Field(
        default=4, ge=1, le=100,
        description="Intervals of each phase of the capacity measurement (idle, single-partition and IN reads at "
        "each rate): the fit and its bootstrap interval are over all of them.",
    )
    calibrate_capacity_warmup_s: float = Field(
        default=20.0, ge=0.0, le=600.0,
        description="Seconds of single-partition reads at the highest capacity rate, unmeasured, before the capacity "
        "measurement: a JVM's first minutes of a read path cost it several times its later CPU (its JIT).",
    )
    discover_profile_reps: int = Field(
        default=20, ge=1, le=10_000,
        description="Multigets per keys-per-request size when `--profile-servers` profiles a memcached server.",
    )

    # --- verify after publish, rollback, canary (docs/operations.md § Verify, rollback, canary) ------------------
    verify_min_requests: int = Field(
        default=1000, ge=1,
        description="Fewest requests a verdict needs: client-reported requests of the version checked and of the "
        "version before it, or coordinator reads since the publish (Cassandra's server side); fewer: pending.",
    )
    verify_alpha: float = Field(
        default=0.05, gt=0.0, lt=1.0,
        description="Significance of the one-sided regression test (bootstrap of the p99 ratio): a version is "
        "rolled back only when p < this.",
    )
    verify_min_regression_pct: float = Field(
        default=10.0, ge=0.0,
        description="How much worse (p99, percent) a version must be to count as a regression: the test's null "
        "hypothesis is 'p99 after <= p99 before x (1 + this/100)'.",
    )
    verify_bootstrap_resamples: int = Field(
        default=2000, ge=100, le=100_000, description="Resamples of the bootstrap behind the regression test."
    )
    verify_model_error_pct: float = Field(
        default=100.0, ge=0.0,
        description="The model's error allowed around the expected p99 on top of the recommendation's own interval "
        "and sampling bound: 100 = within a factor 2 (what validation/ measured against real servers).",
    )
    verify_window_s: float = Field(
        default=60.0, gt=0.0, le=86_400.0,
        description="How often the deployment's clients send their reports (the application's `report_to` "
        "interval): one report window, the unit of the verify horizon.",
    )
    verify_after_windows: int = Field(
        default=5, ge=1, le=10_000,
        description="The verify horizon: every publish schedules its version's check this many report windows "
        "(verify_window_s) after it, and a version is judged once, on its clients' first this many windows; "
        "before they are in it is pending.",
    )
    verify_recheck_s: float = Field(
        default=300.0, gt=0.0, description="A pending verification is checked again after this many seconds."
    )
    verify_reference_probes: int = Field(
        default=200, ge=0, le=100_000,
        description="Trivial-request round trips (memcached `version`, Cassandra `SELECT ... FROM system.local`) "
        "the publisher measures at publish time and the verify job at check time: the environment's reference "
        "for windows that are not concurrent. 0: none measured.",
    )
    verify_max_checks: int = Field(
        default=24, ge=1,
        description="Checks of one version the worker schedules by itself while it is pending (the nightly job "
        "still re-checks it after that).",
    )
    report_max_observations: int = Field(
        default=100, ge=1, le=10_000,
        description="Most observations (config versions) one client report may carry; more: 422.",
    )

    # --- drift: a nightly job skips its study when nothing moved (docs/drift.md says why each value) ----------
    drift_multiget_ks: float = Field(
        default=0.05, gt=0.0, le=1.0,
        description="Kolmogorov–Smirnov distance of the request-size distributions above which they moved.",
    )
    drift_multiget_ks_alpha: float = Field(
        default=0.001, gt=0.0, lt=1.0,
        description="Level of the KS test: a distance below its critical value for the two traces' request "
        "counts is sampling noise, whatever drift_multiget_ks says.",
    )
    drift_multiget_p99: float = Field(
        default=0.25, gt=0.0, description="Relative change of the p99 request size above which it moved."
    )
    drift_zipf_alpha: float = Field(
        default=0.10, gt=0.0, description="Absolute change of the Zipf exponent (MLE) above which it moved."
    )
    drift_hot_set: float = Field(
        default=0.05, gt=0.0, le=1.0,
        description="Share of accesses to top keys that were not top keys before, above which the hot set moved.",
    )
    drift_hot_set_share: float = Field(
        default=0.05, gt=0.0, le=1.0,
        description="Absolute change of the top keys' share of accesses above which it moved.",
    )
    drift_value_size: float = Field(
        default=0.25, gt=0.0,
        description="Largest relative change of the per-access value-size p50/p90/p99 above which sizes moved.",
    )
    drift_request_rate: float = Field(
        default=0.10, gt=0.0, description="Relative change of the mean request rate above which it moved."
    )
    drift_fanout: float = Field(
        default=0.10, gt=0.0,
        description="Relative change of the mean servers per request (fan-out) above which it moved.",
    )

    # --- memcached capture (`tailtune capture memcached`, a nightly job's `capture`; docs/formats.md) --------
    memcached_watch_gap_us: int = Field(
        default=3, ge=0,
        description="memcached-watch grouping: fetches of one connection at most this many µs apart (and no key "
        "twice) form one request (docs/formats.md § memcached-watch; `tailtune ingest --watch-gap-us`).",
    )
    capture_timeout_s: float = Field(
        default=10.0, gt=0, description="Timeout of connecting to a memcached server to capture, and of its replies."
    )
    capture_max_duration_s: float = Field(
        default=3600.0, gt=0, description="Longest capture a nightly job may ask for (`capture.duration_s`)."
    )
    capture_max_bytes: int = Field(
        default=4 * 1024**3, ge=0,
        description="A capture stops once its file holds this many bytes (the rest is not captured; said so); "
        "0: none.",
    )
    capture_max_line_bytes: int = Field(
        default=64 * 1024, ge=1024, le=64 * 1024**2,
        description="Longest line of a memcached watch stream a capture accepts (memcached's are a few hundred "
        "bytes): a server sending a longer one fails the capture, naming it.",
    )
    capture_clients_wait_s: float = Field(
        default=120.0, gt=0,
        description="A nightly's capture from the clients (`capture.source: clients`): how long, after its "
        "duration, it waits for an upload received during it that another job is still ingesting; past it the "
        "step fails and is retried.",
    )
    memcached_stats_max_bytes: int = Field(
        default=1024**2, ge=4096, le=1024**3,
        description="Most bytes of one memcached `stats` reply that capture, discovery and calibration read (a "
        "stock server's is a few KiB); a longer reply fails the read, naming the server. Its lines are at most "
        "`capture_max_line_bytes`, and the whole reply arrives within the caller's timeout.",
    )
    memcached_stats_max_lines: int = Field(
        default=10_000, ge=100, le=10_000_000,
        description="Most lines of one memcached `stats` reply (a stock server sends about 100).",
    )
    # --- the live replay (`tailtune replay`, `control.replay`; docs/replay.md) ------------------------------
    replay_max_rate: float = Field(
        default=2000.0, gt=0.0,
        description="Most requests per second the live replay sends a deployment, over any one second of the "
        "replay (warm-up included): a replay whose trace, scaled, would send more is refused before anything is "
        "sent.",
    )
    replay_max_key_rate: float = Field(
        default=20000.0, gt=0.0,
        description="Most keys per second the live replay's requests read, over any one second of the replay "
        "(warm-up included; a multiget of n keys counts n — each a partition read on Cassandra, a key fetched on "
        "memcached): a replay whose trace, scaled, would read more is refused before anything is sent.",
    )
    replay_max_error_fraction: float = Field(
        default=0.01, ge=0.0, le=1.0,
        description="The live replay stops sending once the errors and timeouts exceed this fraction of its "
        "completed requests (after `replay_abort_after` of them), and reports nothing as a comparison.",
    )
    replay_abort_after: int = Field(
        default=200, ge=1, description="Completed requests before the error fraction can stop a live replay."
    )
    replay_max_lag_ms: float = Field(
        default=5.0, gt=0.0,
        description="Highest p99 of the load generator's own lag (actual send less intended send) at which a live "
        "replay's latencies are a comparison: above it the replay is refused (LagTooHigh).",
    )
    replay_warmup_s: float = Field(
        default=10.0, ge=0.0, le=3600.0,
        description="Seconds of the trace the live replay sends, unmeasured, before its measured run: the twin "
        "tables' speculative-retry thresholds update twice in 10 s, the connections and caches warm up.",
    )
    replay_max_duration_s: float = Field(
        default=3600.0, gt=0.0, description="Longest measured live replay (all repeats together), seconds."
    )
    replay_max_keys: int = Field(
        default=1_000_000, ge=1,
        description="Most distinct keys one live replay loads into each scratch table (or scratch key range).",
    )
    replay_max_value_bytes: int = Field(
        default=1024**2, ge=1, le=64 * 1024**2,
        description="Largest scratch value the live replay writes (a trace's larger value sizes are cut to it, "
        "and said so).",
    )
    replay_lease_s: float = Field(
        default=120.0, ge=10.0, le=86_400.0,
        description="A live replay's lease on its scratch tables (renewed every quarter of it while it runs): "
        "the next replay drops a dead one's tables once its lease ran out; memcached scratch keys expire this "
        "long after the replay's planned end.",
    )
    replay_max_in_flight: int = Field(
        default=1024, ge=1, le=1 << 20,
        description="Most requests the live replay's generator keeps outstanding (Cassandra: queries, a multiget's "
        "each); a send past it waits (lag).",
    )
    fidelity_report_max_bytes: int = Field(
        default=2_000_000, ge=1024, le=1 << 30,
        description="Largest live replay report (its JSON) stored as a fidelity record (`control.fidelity_store`).",
    )
    fidelity_max_pooled: int = Field(
        default=1000, ge=1, le=1_000_000,
        description="Most fidelity records (the newest) a deployment's fidelity summary pools "
        "(`GET /deployments/{id}/fidelity`, the console); the summary says how many older ones it left out.",
    )
    metrics_port: int | None = Field(
        default=None, ge=1, le=65535,
        description="Where `/metrics` (Prometheus) is served: unset, on the API behind the read scope; a port, "
        "there by `tailtune serve` on TAILTUNE_API_HOST without a token (and not on the API).",
    )
    replay_memcached_max_fill: float = Field(
        default=0.9, gt=0.0, le=1.0,
        description="Most of each memcached server's memory (`limit_maxbytes`, less the bytes its items already "
        "hold) the live replay's scratch keys may take, all arms together, counted in memcached's slab pages: a "
        "replay whose scratch would not fit is refused before anything is written (memcached would evict scratch "
        "keys, or the server's own items, and the answers would be wrong), naming the longest --duration that fits.",
    )
    replay_min_block_s: float = Field(
        default=15.0, ge=0.01, le=3600.0,
        description="Shortest block the live replay's paired block bootstrap accepts (`tuner.fidelity."
        "compare_concurrent`): latencies inside a block are correlated for seconds (a queue, a compaction, a GC "
        "pause), so shorter blocks are not independent units and the comparison is refused. Lower only to test.",
    )
    replay_confirm_duration_s: float = Field(
        default=1500.0, gt=0.0, le=86_400.0,
        description="Measured seconds of the live replay a nightly runs at its deployment's `confirm_on` before it "
        "publishes (docs/replay.md § confirm_on). The measured minimum for the +5 % gate on this project's machine: "
        "the A/A half-width h of the p99 difference's interval was 5.2 % at 20 blocks of 15 s and 4.1 % at 40, about "
        "25 %/√blocks. A config no worse than the current one passes only if its estimate plus h stays under +5 %; "
        "the estimate lies within ±h of the truth 95 % of the time, so an equal config passes reliably (97.5 %) when "
        "2h ≤ 5 %: h ≤ 2.5 %, (25/2.5)² = 100 blocks of 15 s, 1,500 s. A run shorter than this (a trace too short at "
        "its rate) is `not_replayed`, never published.",
    )
    replay_confirm_block_s: float = Field(
        default=15.0, ge=0.01, le=3600.0,
        description="Block length of the `confirm_on` replay (the paired block bootstrap's unit; at least "
        "`replay_min_block_s`).",
    )
    replay_confirm_max_worse: float = Field(
        default=0.05, ge=0.0, le=10.0,
        description="The `confirm_on` gate: a nightly publishes its recommendation only if the upper end of the "
        "95 % interval of the recommendation's p99 difference against the current config, measured by the live "
        "replay, is below this fraction (0.05: +5 %).",
    )
    #: This process's own scratch folder under home/tmp, once `control.scratch.claim_scratch` made it
    #: (not an environment variable): what a killed process leaves there is swept by the next start-up.
    _scratch: Path | None = PrivateAttr(default=None)

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def datasets_dir(self) -> Path:
        return self.home_dir / "datasets"

    @property
    def tmp_dir(self) -> Path:
        """Scratch space on the same filesystem as the datasets, so a finished write is one atomic rename."""
        return self._scratch or self.home_dir / "tmp"

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home_dir / 'tailtune.db'}"

    @property
    def resolved_mlflow_tracking_uri(self) -> str:
        return self.mlflow_tracking_uri or f"sqlite:///{self.home_dir / 'mlflow.db'}"

    @property
    def resolved_optuna_storage(self) -> str:
        return self.optuna_storage or str(self.home_dir / "optuna" / "journal.log")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (cached; tests clear the cache with `get_settings.cache_clear()`); a malformed
    variable raises `SettingsInvalid`."""
    return load_settings()


def _variable(field: str) -> str:
    return ENV_PREFIX + field.upper()


def load_settings() -> Settings:
    """`Settings()` from the environment, or one `SettingsInvalid` line naming the first malformed variable."""
    try:
        return Settings()
    except SettingsError as exc:  # a list setting that is neither JSON nor a plain list
        field = exc.args[0].split('"')[1] if exc.args and exc.args[0].count('"') >= 2 else ""
        info = Settings.model_fields.get(field)
        form = expected_form(info.annotation) if info is not None else "a valid value"
        raise SettingsInvalid(f"{_variable(field)}: malformed; expected {form}") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err.get("loc") else ""
        info = Settings.model_fields.get(field)
        form = expected_form(info.annotation) if info is not None else "a valid value"
        problem = str(err.get("msg", "invalid"))
        if info is not None and _is_list(info.annotation) and len(err["loc"]) > 1:
            problem = f"item {err['loc'][1]}: {problem}"
        raise SettingsInvalid(f"{_variable(field)}: {problem}; expected {form}") from None
