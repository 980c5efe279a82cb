"""What the client observed, per config version: the JSON of `stats()` and of the report it sends the service.

The README documents both shapes. An observation is one config version's figures (requests, errors, queries,
latency histograms per size class); a report is the observations of one window (since the last report the
service accepted) plus who sent it. `Recorder` keeps both tallies for a client (the memcached client and the
Cassandra driver profiles); sending is `post_report`: never raises, returns (ok, error). A report the service
refuses (a 4xx other than 408/425/429) would be refused again: its window is dropped, logged once, and counted.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

import httpx

from tailtune_client.config import ForgedStatus
from tailtune_client.histogram import SIZE_CLASSES, HistogramJson, LogHistogram, SchemeError, checked_count

__all__ = [
    "REPORT_SCHEMA",
    "CanaryStatus",
    "ClientInfo",
    "ConfigStatus",
    "Observation",
    "ObservationJson",
    "Recorder",
    "ReportJson",
    "ServerStats",
    "Stats",
    "client_info",
    "post_report",
]

REPORT_SCHEMA = "tailtune.client.observations/1"
#: 4xx answers that say "later" rather than "never": the window is kept for the next report.
RETRY_STATUSES = frozenset({408, 425, 429})
_log = logging.getLogger("tailtune_client.report")


class ClientInfo(TypedDict):
    name: str
    version: str
    id: str
    host: str
    pid: int


class CanaryStatus(TypedDict):
    """A canary in progress: `version` runs on `fraction` of the requests, `stable_version` on the rest."""

    version: int | None
    fraction: float
    stable_version: int | None


class ConfigStatus(TypedDict):
    version: int | None
    mode: str
    params: dict[str, int]
    deployment: str | None
    deployment_id: int | None
    source: str
    loaded_at: float
    checks: int
    swaps: int
    last_check_at: float | None
    last_ok_at: float | None
    stale: bool
    last_error: str | None
    last_error_at: float | None
    canary: CanaryStatus | None
    #: Pool documents the config source ignored as not the publisher's (None: the source is not the pool).
    forged: ForgedStatus | None


class ServerStats(TypedDict):
    queries: int
    keys: int
    hits: int
    merged: int
    errors: int
    connects: int
    queued: int
    busy: int
    down: bool
    last_error: str | None
    last_error_at: float | None


class ObservationJson(TypedDict):
    config_version: int | None
    mode: str
    params: dict[str, int]
    requests: int
    failed_requests: int
    missing_keys_on_error: int
    keys: int
    queries: int
    merged_queries: int
    classes: dict[str, HistogramJson]
    all: HistogramJson


class Stats(TypedDict):
    client: ClientInfo
    config_version: int | None
    mode: str
    last_config_error: str | None
    config: ConfigStatus
    options: dict[str, Any]
    servers: dict[str, ServerStats]
    latency: list[ObservationJson]
    reports: dict[str, Any]


class ReportJson(TypedDict):
    schema: str
    client: ClientInfo
    deployment: str | None
    deployment_id: int | None
    pool: dict[str, Any]
    window: dict[str, float]
    config: dict[str, Any]
    observations: list[ObservationJson]


@dataclass(slots=True)
class Observation:
    """One config version's figures; `merge` adds another's (a report that was not accepted goes back)."""

    config_version: int | None
    mode: str
    params: dict[str, int]
    requests: int = 0
    failed_requests: int = 0
    missing_keys_on_error: int = 0
    keys: int = 0
    queries: int = 0
    merged_queries: int = 0
    classes: dict[str, LogHistogram] = field(default_factory=lambda: {c[0]: LogHistogram() for c in SIZE_CLASSES})
    #: All requests' histogram as a document gave it (`from_json`); None: the merge of `classes`.
    total: LogHistogram | None = None

    @classmethod
    def from_json(cls, doc: Any, field: str = "observation") -> Observation:
        """Back from `to_json()` (what a report carries), strictly: `config_version` null or an integer from 0 to
        2^63 − 1, `mode` a string, `params` string → integer, the counters counts, `classes` the size classes'
        histograms and `all` a histogram (`LogHistogram.from_json`); each may be left out (empty). `SchemeError`
        names the first field that is not so."""
        if not isinstance(doc, Mapping):
            raise SchemeError(field, "must be an object (an observation)")
        version = doc.get("config_version")
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                    or not 0 <= version < 2**63):
            raise SchemeError(f"{field}.config_version", "must be null (a bootstrap config) or an integer from 0 "
                              f"to 2^63 - 1, got {version!r:.40}")
        mode = doc.get("mode", "")
        if not isinstance(mode, str) or len(mode) > _NAME_MAX:
            raise SchemeError(f"{field}.mode", f"must be a string of at most {_NAME_MAX} characters")
        raw_params = doc.get("params", {})
        if not isinstance(raw_params, Mapping) or len(raw_params) > _NAME_MAX:
            raise SchemeError(f"{field}.params", f"must be an object of at most {_NAME_MAX} name: integer pairs")
        params: dict[str, int] = {}
        for k, v in raw_params.items():
            if (not isinstance(k, str) or len(k) > _NAME_MAX or isinstance(v, bool) or not isinstance(v, int)
                    or not -(2**63) <= v < 2**63):
                raise SchemeError(f"{field}.params.{str(k)[:_NAME_MAX]}", "must be a 64-bit integer")
            params[k] = v
        out = cls(version, mode, params)
        for name in _COUNTERS:
            setattr(out, name, checked_count(doc.get(name, 0), f"{field}.{name}"))
        classes = doc.get("classes", {})
        if not isinstance(classes, Mapping):
            raise SchemeError(f"{field}.classes", "must be an object of size class: histogram")
        for name, hist in classes.items():
            if name not in out.classes:
                raise SchemeError(f"{field}.classes", f"{str(name)[:_NAME_MAX]!r} is not a size class (one of "
                                  f"{', '.join(out.classes)})")
            out.classes[name] = LogHistogram.from_json(hist, f"{field}.classes.{name}")
        if doc.get("all") is not None:
            out.total = LogHistogram.from_json(doc["all"], f"{field}.all")
        return out

    def histogram(self) -> LogHistogram:
        """All requests: `total` when a document gave it, else the classes merged."""
        if self.total is not None:
            return self.total.copy()
        total = LogHistogram()
        for h in self.classes.values():
            total.merge(h)
        return total

    def copy(self) -> Observation:
        return Observation(
            self.config_version,
            self.mode,
            dict(self.params),
            self.requests,
            self.failed_requests,
            self.missing_keys_on_error,
            self.keys,
            self.queries,
            self.merged_queries,
            {k: h.copy() for k, h in self.classes.items()},
            None if self.total is None else self.total.copy(),
        )

    def merge(self, other: Observation) -> None:
        """Add `other`'s figures (same config) to these."""
        self.requests += other.requests
        self.failed_requests += other.failed_requests
        self.missing_keys_on_error += other.missing_keys_on_error
        self.keys += other.keys
        self.queries += other.queries
        self.merged_queries += other.merged_queries
        for k, h in other.classes.items():
            self.classes[k].merge(h)
        if self.total is not None or other.total is not None:
            self.total = self.histogram()
            self.total.merge(other.histogram())

    def empty(self) -> bool:
        return self.requests == 0 and self.failed_requests == 0 and self.queries == 0

    def to_json(self) -> ObservationJson:
        total = self.histogram()
        if total.n == 0:
            total.min_us, total.max_us = math.inf, 0.0
        return {
            "config_version": self.config_version,
            "mode": self.mode,
            "params": dict(self.params),
            "requests": self.requests,
            "failed_requests": self.failed_requests,
            "missing_keys_on_error": self.missing_keys_on_error,
            "keys": self.keys,
            "queries": self.queries,
            "merged_queries": self.merged_queries,
            "classes": {k: h.to_json() for k, h in self.classes.items()},
            "all": total.to_json(),
        }


def client_info(client_id: str, version: str) -> ClientInfo:
    """Who sends a report: this package, a client id (one per client object), the host and the process."""
    return {"name": "tailtune-client", "version": version, "id": client_id, "host": socket.gethostname(),
            "pid": os.getpid()}


_NAME_MAX = 64
_COUNTERS = ("requests", "failed_requests", "missing_keys_on_error", "keys", "queries", "merged_queries")
ObsKey = tuple[int | None, str, tuple[tuple[str, int], ...]]
#: Builds a report from the observations of a window, its start and its end.
PayloadFn = Callable[[list[Observation], float, float], Mapping[str, Any]]


class Recorder:
    """What one client observed per config: since it started (`latency()`, for `stats()`) and since the last
    report the service accepted (`window()`), and the sending of reports (`send`). Thread-safe: callers that
    change observations hold `lock`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._obs: dict[ObsKey, Observation] = {}
        self._win: dict[ObsKey, Observation] = {}
        self._window_start = time.time()
        self._send_lock = threading.Lock()
        self._sent = 0
        self._error: str | None = None
        self._last_at: float | None = None
        self._dropped = 0
        self._dropped_requests = 0
        self._logged: set[int] = set()

    def observations(self, version: int | None, mode: str, params: Mapping[str, int]) -> tuple[
        Observation, Observation
    ]:
        """(since the start, since the last report) of one config; call under `lock`."""
        key: ObsKey = (version, mode, tuple(sorted(params.items())))
        out = []
        for table in (self._obs, self._win):
            obs = table.get(key)
            if obs is None:
                obs = table[key] = Observation(version, mode, dict(params))
            out.append(obs)
        return out[0], out[1]

    def latency(self) -> list[ObservationJson]:
        with self.lock:
            return [o.to_json() for o in self._obs.values()]

    def reports(self) -> dict[str, Any]:
        with self.lock:
            return {"sent": self._sent, "last_at": self._last_at, "last_error": self._error,
                    "window_start": self._window_start, "dropped": self._dropped,
                    "dropped_requests": self._dropped_requests}

    def window(self) -> tuple[list[Observation], float]:
        """A copy of the observations since the last accepted report, and when that window started."""
        with self.lock:
            return [o.copy() for o in self._win.values()], self._window_start

    def send(self, url: str, token: str | None, timeout: float, payload: PayloadFn) -> bool:
        """POST the window's report (`payload(observations, start, end)`); True when accepted. When the service
        refuses it (a 4xx but 408/425/429) the window is dropped (logged once per status, counted in `reports()`);
        on any other failure its observations rejoin the next window, which starts where this one did. Never
        raises for I/O."""
        with self._send_lock:
            with self.lock:
                sending, self._win = self._win, {}
                start, end = self._window_start, time.time()
                self._window_start = end
            ok, error, status = _post(url, payload(list(sending.values()), start, end), token, timeout)
            with self.lock:
                self._last_at = time.time()
                if ok:
                    self._sent += 1
                    self._error = None
                    return True
                self._error = error
                if status is not None and 400 <= status < 500 and status not in RETRY_STATUSES:
                    self._dropped += 1
                    self._dropped_requests += sum(o.requests for o in sending.values())
                    if status not in self._logged:
                        self._logged.add(status)
                        _log.warning("report refused, window dropped (not resent; later refusals with HTTP %d "
                                     "are counted in stats()['reports']['dropped']): %s", status, error)
                    return False
                for key, obs in sending.items():  # not accepted: what was in flight rejoins the window
                    if key in self._win:
                        obs.merge(self._win[key])
                    self._win[key] = obs
                self._window_start = start
            return False


def post_report(url: str, payload: Mapping[str, Any], token: str | None, timeout_s: float) -> tuple[bool, str | None]:
    """POST the payload as JSON; (True, None) on a 2xx answer, else (False, why). Never raises for I/O."""
    ok, error, _ = _post(url, payload, token, timeout_s)
    return ok, error


def _post(url: str, payload: Mapping[str, Any], token: str | None, timeout_s: float) -> tuple[
    bool, str | None, int | None
]:
    """`post_report` with the answer's HTTP status (None when there was no answer)."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        resp = httpx.post(url, json=dict(payload), headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return False, f"POST {url}: {type(exc).__name__}: {exc}", None
    if 200 <= resp.status_code < 300:
        return True, None, resp.status_code
    detail = resp.text[:200].strip()
    return False, f"POST {url}: HTTP {resp.status_code}{': ' + detail if detail else ''}", resp.status_code
