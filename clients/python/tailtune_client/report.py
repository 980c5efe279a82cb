"""What the client observed, per config version: the JSON of `stats()` and of the report it sends the service.

The README documents both shapes. An observation is one config version's figures (requests, errors, queries,
latency histograms per size class); a report is the observations of one window (since the last report the
service accepted) plus who sent it. `Recorder` keeps both tallies for a client (the memcached client and the
Cassandra driver profiles); sending is `post_report`: never raises, returns (ok, error).
"""

from __future__ import annotations

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
from tailtune_client.histogram import SIZE_CLASSES, HistogramJson, LogHistogram

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

    def empty(self) -> bool:
        return self.requests == 0 and self.failed_requests == 0 and self.queries == 0

    def to_json(self) -> ObservationJson:
        total = LogHistogram()
        for h in self.classes.values():
            total.merge(h)
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
                    "window_start": self._window_start}

    def window(self) -> tuple[list[Observation], float]:
        """A copy of the observations since the last accepted report, and when that window started."""
        with self.lock:
            return [o.copy() for o in self._win.values()], self._window_start

    def send(self, url: str, token: str | None, timeout: float, payload: PayloadFn) -> bool:
        """POST the window's report (`payload(observations, start, end)`); True when accepted. On failure the
        observations rejoin the next window, which starts where this one did. Never raises for I/O."""
        with self._send_lock:
            with self.lock:
                sending, self._win = self._win, {}
                start, end = self._window_start, time.time()
                self._window_start = end
            ok, error = post_report(url, payload(list(sending.values()), start, end), token, timeout)
            with self.lock:
                self._last_at = time.time()
                if ok:
                    self._sent += 1
                    self._error = None
                    return True
                self._error = error
                for key, obs in sending.items():  # not accepted: what was in flight rejoins the window
                    if key in self._win:
                        obs.merge(self._win[key])
                    self._win[key] = obs
                self._window_start = start
            return False


def post_report(url: str, payload: Mapping[str, Any], token: str | None, timeout_s: float) -> tuple[bool, str | None]:
    """POST the payload as JSON; (True, None) on a 2xx answer, else (False, why). Never raises for I/O."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        resp = httpx.post(url, json=dict(payload), headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        return False, f"POST {url}: {type(exc).__name__}: {exc}"
    if 200 <= resp.status_code < 300:
        return True, None
    detail = resp.text[:200].strip()
    return False, f"POST {url}: HTTP {resp.status_code}{': ' + detail if detail else ''}"
