"""What the client observed, per config version: the JSON of `stats()` and of the report it sends the service.

The README documents both shapes. An observation is one config version's figures (requests, errors, queries,
latency histograms per size class); a report is the observations of one window (since the last report the
service accepted) plus who sent it. Sending is `post_report`: never raises, returns (ok, error).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

import httpx

from tailtune_client.histogram import SIZE_CLASSES, HistogramJson, LogHistogram

__all__ = [
    "REPORT_SCHEMA",
    "ClientInfo",
    "ConfigStatus",
    "Observation",
    "ObservationJson",
    "ReportJson",
    "ServerStats",
    "Stats",
    "post_report",
]

REPORT_SCHEMA = "tailtune.client.observations/1"


class ClientInfo(TypedDict):
    name: str
    version: str
    id: str
    host: str
    pid: int


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
