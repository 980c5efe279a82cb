"""Applies the driver side of a published stock Cassandra config in a Python application: a cassandra-driver
`ExecutionProfile` built from it.

Two lines (the `cassandra` extra: `pip install "tailtune-client[cassandra]"`):

    from tailtune_client.cassandra import execution_profile
    cluster = Cluster(hosts, execution_profiles={EXEC_PROFILE_DEFAULT: execution_profile(CONFIG_URL, token=TOKEN)})

`CONFIG_URL` is the service's `GET /api/v1/configs/{deployment_id}`; the config is fetched with `If-None-Match`
(`tailtune_client.config.HttpConfigSource`). The profile has:

- `load_balancing_policy = TokenAwarePolicy(child, shuffle_replicas=<published>)` (child: the application's
  policy, default `DCAwareRoundRobinPolicy()`);
- `speculative_execution_policy = ConstantSpeculativeExecutionPolicy(delay, max_attempts)` when the config
  speculates (`delay` in seconds; `max_attempts` counts only the extra executions), else
  `NoSpeculativeExecutionPolicy()`.

The driver speculates only on statements marked idempotent, and statements default to non-idempotent: mark the
reads (`SimpleStatement(..., is_idempotent=True)`, `prepared.is_idempotent = True`), or the speculative execution
setting has no effect.

Where the settings come from in a published config: `config.target.driver.python` (what the service renders:
tuned when the deployment's driver is `python`; otherwise the same speculative execution at the Python driver's
defaults for the rest); a config without it is read from its params (`driver.shuffle_replicas`,
`driver.speculative_execution.delay` in ms, `driver.speculative_execution.max_executions` counting the first),
unset ones at the Python driver's defaults (no shuffling, no speculative execution).

`TunedProfiles` keeps the settings live and measures them: two profiles registered in the Cluster (`tailtune`
and `tailtune-canary`), updated in place when a new version is published; `execute()` runs a statement on the
version it picks for that request — a new version with `canary_fraction` f < 1 on a random f of the requests,
the version before it on the rest — and records its latency under that version, and `report_to()` sends the
service the same observations report as the memcached client (`tailtune_client.report`). With `capture=` (a
`tailtune_client.capture.RequestCapture`) a sample of the statements run through `execute` is recorded — the
partition keys it reads when `keys` names them, its latency, the version it ran — and uploaded as a
`tailtune-client` trace (the token each key maps to is not recorded: the helper does not read the cluster's ring).
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tailtune_client import __version__
from tailtune_client.capture import RequestCapture
from tailtune_client.config import ConfigError, ConfigSourceError, HttpConfigSource, canary_fraction, json_object
from tailtune_client.histogram import size_class
from tailtune_client.report import REPORT_SCHEMA, CanaryStatus, Observation, ObservationJson, Recorder, client_info

__all__ = [
    "CANARY_PROFILE",
    "STABLE_PROFILE",
    "DriverSettings",
    "TunedProfiles",
    "build_profile",
    "execution_profile",
    "fetch_settings",
    "parse_driver_settings",
    "update_profile",
]


@dataclass(frozen=True, slots=True)
class DriverSettings:
    """The Python driver settings of one published config version."""

    shuffle_replicas: bool
    #: Seconds before each speculative execution (None: no speculative execution).
    delay_s: float | None
    #: Extra executions (the Python driver's `max_attempts`; 0 with `delay_s` None).
    max_attempts: int
    version: int | None = None
    deployment_id: int | None = None
    #: Run this version on this fraction of the requests first (0 < f <= 1; None: on all of them).
    canary_fraction: float | None = None

    @property
    def speculates(self) -> bool:
        return self.delay_s is not None and self.max_attempts > 0

    @property
    def canary(self) -> bool:
        return self.canary_fraction is not None and self.canary_fraction < 1

    def params(self) -> dict[str, int]:
        """The settings as the integers an observation carries (the delay in µs)."""
        return {"shuffle_replicas": int(self.shuffle_replicas), "max_attempts": self.max_attempts,
                "delay_us": 0 if self.delay_s is None else round(self.delay_s * 1e6)}


def _number(value: Any, what: str, where: str, *, integer: bool = False, low: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < low:
        raise ConfigError(f"{where}: {what} must be a number >= {low:g}, got {value!r}")
    if integer and int(value) != value:
        raise ConfigError(f"{where}: {what} must be an integer, got {value!r}")
    return float(value)


def _from_block(block: Mapping[str, Any], where: str) -> tuple[bool, float | None, int]:
    lb = block.get("load_balancing") or {}
    if not isinstance(lb, Mapping):
        raise ConfigError(f"{where}: driver.python.load_balancing must be an object")
    shuffle = lb.get("shuffle_replicas", False)
    if not isinstance(shuffle, bool):
        raise ConfigError(f"{where}: driver.python.load_balancing.shuffle_replicas must be true/false")
    spec = block.get("speculative_execution")
    if spec is None:
        return shuffle, None, 0
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where}: driver.python.speculative_execution must be an object or null")
    delay = _number(spec.get("delay"), "speculative_execution.delay", where)
    attempts = int(_number(spec.get("max_attempts"), "speculative_execution.max_attempts", where, integer=True))
    return shuffle, (delay if attempts > 0 else None), attempts


def _from_params(params: Mapping[str, Any], where: str) -> tuple[bool, float | None, int]:
    shuffle = params.get("driver.shuffle_replicas", 0)
    if shuffle not in (0, 1, True, False):
        raise ConfigError(f"{where}: params.driver.shuffle_replicas must be 0 or 1, got {shuffle!r}")
    execs = int(
        _number(params.get("driver.speculative_execution.max_executions", 1), "max_executions", where, integer=True,
                low=1)
    )
    delay_ms = _number(params.get("driver.speculative_execution.delay", 0.0), "delay", where)
    if execs <= 1:
        return bool(shuffle), None, 0
    return bool(shuffle), round(delay_ms / 1000.0, 9), execs - 1


def parse_driver_settings(doc: Mapping[str, Any] | str | bytes) -> DriverSettings:
    """The driver settings of a published config: the service's answer (`{"deployment_id", "version",
    "config"}`), the Cassandra publisher's document (`{"deployment", "version", "config"}`) or a bare config.
    `ConfigError` names what is wrong (for example a rendering with Java settings only)."""
    doc = json_object(doc)
    version = doc.get("version") if isinstance(doc.get("version"), int) else None
    dep_id = doc.get("deployment_id") if isinstance(doc.get("deployment_id"), int) else None
    body: Mapping[str, Any] = doc["config"] if isinstance(doc.get("config"), Mapping) else doc
    where = "config" if version is None else f"config version {version}"
    raw_target = body.get("target")
    target: Mapping[str, Any] = raw_target if isinstance(raw_target, Mapping) else {}
    raw_driver = target.get("driver")
    driver: Mapping[str, Any] | None = raw_driver if isinstance(raw_driver, Mapping) else None
    if driver is not None and driver.get("python") is None and driver.get("java") is not None:
        raise ConfigError(
            f"{where}: rendered for the Java driver 4 only (target.driver.python is null)"
        )
    if driver is not None and isinstance(driver.get("python"), Mapping):
        shuffle, delay, attempts = _from_block(driver["python"], where)
    else:
        raw_params = body.get("params")
        params: Mapping[str, Any] = raw_params if isinstance(raw_params, Mapping) else {}
        shuffle, delay, attempts = _from_params(params, where)
    return DriverSettings(shuffle, delay, attempts, version=version, deployment_id=dep_id,
                          canary_fraction=canary_fraction(body, where))


def _driver() -> Any:
    try:
        import cassandra.policies as policies
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            'tailtune_client.cassandra needs the Cassandra driver: pip install "tailtune-client[cassandra]"'
        ) from exc
    return policies


def _policies(settings: DriverSettings, child_policy: Any | None) -> tuple[Any, Any]:
    p = _driver()
    child = child_policy if child_policy is not None else p.DCAwareRoundRobinPolicy()
    lb = p.TokenAwarePolicy(child, shuffle_replicas=settings.shuffle_replicas)
    if settings.speculates:
        assert settings.delay_s is not None
        spec = p.ConstantSpeculativeExecutionPolicy(settings.delay_s, settings.max_attempts)
    else:
        spec = p.NoSpeculativeExecutionPolicy()
    return lb, spec


def build_profile(settings: DriverSettings, *, child_policy: Any | None = None, **profile_kwargs: Any) -> Any:
    """A cassandra-driver `ExecutionProfile` with the settings' load balancing and speculative execution;
    `profile_kwargs` (consistency_level, request_timeout, ...) are passed through."""
    from cassandra.cluster import ExecutionProfile

    lb, spec = _policies(settings, child_policy)
    return ExecutionProfile(load_balancing_policy=lb, speculative_execution_policy=spec, **profile_kwargs)


def update_profile(profile: Any, settings: DriverSettings) -> None:
    """Apply newer settings to a profile a running Cluster already uses: the speculative execution policy is
    replaced (the driver reads it per request) and the token-aware policy's shuffling is switched in place."""
    _, spec = _policies(settings, None)
    profile.speculative_execution_policy = spec
    lb = profile.load_balancing_policy
    if isinstance(lb, _driver().TokenAwarePolicy):
        lb.shuffle_replicas = settings.shuffle_replicas


def fetch_settings(source: HttpConfigSource) -> DriverSettings | None:
    """The settings of the published config, or None when it did not change since the last fetch (ETag)."""
    return source.fetch_parsed(parse_driver_settings)


def execution_profile(
    config_url: str,
    *,
    token: str | None = None,
    timeout_s: float = 5.0,
    child_policy: Any | None = None,
    **profile_kwargs: Any,
) -> Any:
    """Fetch the published config from the service (`GET /api/v1/configs/{id}`) and build its
    `ExecutionProfile`. Raises ConfigSourceError when the service does not answer with a config."""
    source = HttpConfigSource(config_url, token, timeout_s)
    try:
        settings = fetch_settings(source)
    finally:
        source.close()
    if settings is None:  # pragma: no cover - a first GET sends no If-None-Match
        raise ConfigSourceError(f"GET {config_url}: no config")
    return build_profile(settings, child_policy=child_policy, **profile_kwargs)


#: The names under which `TunedProfiles` registers its two profiles in a Cluster.
STABLE_PROFILE = "tailtune"
CANARY_PROFILE = "tailtune-canary"
_MODE = "python-driver"


class TunedProfiles:
    """The published driver settings of a deployment, live, with a canary and latency reports:

        profiles = TunedProfiles(CONFIG_URL, token=READ_TOKEN)
        cluster = Cluster(hosts, execution_profiles=profiles.execution_profiles())
        session = cluster.connect()
        rows = profiles.execute(session, statement, params)       # the version this request runs, timed
        profiles.report_to(OBSERVATIONS_URL, REPORT_TOKEN)

    The first config is fetched in the constructor (`ConfigSourceError` when the service does not answer with
    one, unless `config` — a bootstrap config, any shape `parse_driver_settings` reads — is given: then that runs,
    reported with `config_version` null, until the service has a published version); `refresh()` (or the
    poller, every `poll_interval` s) picks newer versions up. A version with
    `canary_fraction` f < 1 goes to the canary profile and runs on a random f of the requests while the version
    before it keeps the stable profile and the rest; a version without it replaces both. A client that starts
    while a canary is published has no version before it and runs the canary on every request, unless `stable`
    (a published document, as `parse_driver_settings` reads) says what ran before. `profile_kwargs`
    (consistency_level, request_timeout, ...) go to both profiles.
    """

    def __init__(
        self,
        config_url: str,
        *,
        token: str | None = None,
        timeout_s: float = 5.0,
        child_policy: Any | None = None,
        poll_interval: float | None = 10.0,
        stable: Mapping[str, Any] | str | bytes | None = None,
        deployment: str | None = None,
        config: Mapping[str, Any] | str | bytes | None = None,
        capture: RequestCapture | None = None,
        **profile_kwargs: Any,
    ) -> None:
        bootstrap = parse_driver_settings(config) if config is not None else None
        self._source = HttpConfigSource(config_url, token, timeout_s)
        self.token = token
        self.deployment = deployment
        self._lock = threading.Lock()
        self._rec = Recorder()
        self._rng = random.Random()
        self._id = str(uuid.uuid4())
        self.last_error: str | None = None
        self.capture = capture
        if capture is not None:
            capture.attach("cassandra", None, tables=True)
        try:
            first = fetch_settings(self._source)
        except ConfigSourceError as exc:
            if bootstrap is None:
                self._source.close()
                raise
            first, self.last_error = bootstrap, str(exc)
        except BaseException:
            self._source.close()
            raise
        if first is None:  # pragma: no cover - a first GET sends no If-None-Match
            self._source.close()
            raise ConfigSourceError(f"GET {config_url}: no config")
        self._current = first
        self._stable = parse_driver_settings(stable) if stable is not None and first.canary else None
        base = self._stable or first
        self.profiles = {
            STABLE_PROFILE: build_profile(base, child_policy=child_policy, **profile_kwargs),
            CANARY_PROFILE: build_profile(first, child_policy=child_policy, **profile_kwargs),
        }
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self.poll_interval = poll_interval or 0.0
        if self.poll_interval > 0:
            self._poller = threading.Thread(target=self._poll, name="tailtune-client profile poller", daemon=True)
            self._poller.start()

    def execution_profiles(self) -> dict[str, Any]:
        """{name: ExecutionProfile} for `Cluster(execution_profiles=...)` (add your own beside them)."""
        return dict(self.profiles)

    @property
    def settings(self) -> DriverSettings:
        """The newest version's settings (a canary's: those of the canary)."""
        return self._current

    def canary(self) -> CanaryStatus | None:
        with self._lock:
            cur, stable = self._current, self._stable
        if stable is None or cur.canary_fraction is None:
            return None
        return {"version": cur.version, "fraction": cur.canary_fraction, "stable_version": stable.version}

    def refresh(self) -> bool:
        """Ask the service once; True when a newer version was applied. Errors are kept in `last_error`."""
        try:
            new = fetch_settings(self._source)
        except (ConfigSourceError, ConfigError) as exc:
            self.last_error = str(exc)
            return False
        self.last_error = None
        with self._lock:
            cur = self._current
            if new is None or (new.version is not None and cur.version is not None and new.version <= cur.version):
                return False
            if new.canary:
                if not cur.canary:
                    self._stable = cur  # what ran before keeps the stable profile and the other requests
                update_profile(self.profiles[CANARY_PROFILE], new)
                if self._stable is None:
                    update_profile(self.profiles[STABLE_PROFILE], new)
            else:
                self._stable = None
                update_profile(self.profiles[STABLE_PROFILE], new)
                update_profile(self.profiles[CANARY_PROFILE], new)
            self._current = new
            return True

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_interval):
            self.refresh()

    def pick(self) -> tuple[str, DriverSettings]:
        """(profile name, settings) one request runs: the canary on its fraction, the stable version otherwise."""
        with self._lock:
            cur, stable = self._current, self._stable
        if stable is None or cur.canary_fraction is None:
            return STABLE_PROFILE if not cur.canary else CANARY_PROFILE, cur
        if self._rng.random() < cur.canary_fraction:
            return CANARY_PROFILE, cur
        return STABLE_PROFILE, stable

    def execute(self, session: Any, query: Any, parameters: Any = None, *, keys: int | Sequence[str] = 1,
                op: str = "read", table: str | None = None, **kwargs: Any) -> Any:
        """`session.execute(query, parameters, execution_profile=<the version's profile>, **kwargs)`, timed: the
        latency is recorded under that version in the size class of `keys` (the keys the request reads: their
        number, or the partition keys themselves); a request that raises counts as failed and the exception
        propagates. With a capture, a sampled request whose `keys` names them is recorded with its `op` and
        `table` (one that gives a number only is counted as `unkeyed`)."""
        name, settings = self.pick()
        count = keys if isinstance(keys, int) else len(keys)
        sampled = self.capture is not None and self.capture.sample()
        wall = time.time()
        started = time.perf_counter()
        try:
            result = session.execute(query, parameters, execution_profile=name, **kwargs)
        except BaseException:
            with self._rec.lock:
                for obs in self._rec.observations(settings.version, _MODE, settings.params()):
                    obs.failed_requests += 1
            if sampled:
                self._record(wall, keys, op, table, (time.perf_counter() - started) * 1e6, settings, True)
            raise
        elapsed_us = (time.perf_counter() - started) * 1e6
        with self._rec.lock:
            for obs in self._rec.observations(settings.version, _MODE, settings.params()):
                obs.requests += 1
                obs.keys += count
                obs.queries += 1
                obs.classes[size_class(count)].record(elapsed_us)
        if sampled:
            self._record(wall, keys, op, table, elapsed_us, settings, False)
        return result

    def _record(self, wall: float, keys: int | Sequence[str], op: str, table: str | None, elapsed_us: float,
                settings: DriverSettings, failed: bool) -> None:
        assert self.capture is not None
        if isinstance(keys, int):
            self.capture.unkeyed()
            return
        names = [str(k) for k in keys]
        self.capture.record(ts=wall, op=op, keys=names, sizes=[None] * len(names), latency_us=elapsed_us,
                            config_version=settings.version, failed=failed, table=table)

    def latency(self) -> list[ObservationJson]:
        """One observation per version run since the start (the shape of the memcached client's)."""
        return self._rec.latency()

    def _payload(self, window: list[Observation], start: float, end: float) -> dict[str, Any]:
        cur = self._current
        return {
            "schema": REPORT_SCHEMA,
            "client": client_info(self._id, __version__),
            "deployment": self.deployment,
            "deployment_id": cur.deployment_id,
            "pool": {"kind": "cassandra-driver", "profiles": [STABLE_PROFILE, CANARY_PROFILE]},
            "window": {"start": start, "end": end},
            "config": {"version": cur.version, "mode": _MODE, "params": cur.params(), "canary": self.canary()},
            "observations": [o.to_json() for o in window if not o.empty()],
        }

    def report(self) -> dict[str, Any]:
        """The payload for the service: observations since the last report it accepted."""
        window, start = self._rec.window()
        return self._payload(window, start, time.time())

    def report_to(self, url: str, token: str | None = None, *, timeout: float = 5.0) -> bool:
        """POST the report to the service's `/api/v1/deployments/{id}/observations`; True when accepted (a failed
        one's observations go into the next report). Never raises for I/O."""
        return self._rec.send(url, token if token is not None else self.token, timeout, self._payload)

    def close(self) -> None:
        """Stop the poller and close the config source (idempotent). The Cluster is the application's."""
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=self.poll_interval + 5.0)
            self._poller = None
        self._source.close()

    def __enter__(self) -> TunedProfiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
