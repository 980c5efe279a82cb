"""The memcached client: a sharded pool that runs the published mode (`batching` or `chisel`).

Each key lives on one server, chosen by rendezvous hashing exactly as pymemcache's `HashClient`
(`tailtune_client.hashing.server_for`). A `get_many` groups its keys by server, then:

* `batching`: one multiget per server touched, all in parallel;
* `chisel`: a request of more than `elephant_threshold` keys (an elephant) sends each server's batch as
  ceil(k / `split_keys`) balanced chunks on consecutive connections (in parallel); a smaller request (a mouse)
  joins a merge group of up to `merge` mice per server, which share one multiget when they queue behind each
  other (`tailtune_client._lanes` says exactly how).

Every request takes the current config when it starts and keeps it to its end; a new version (from the service
or the publisher's memcached key, polled by a background thread) replaces the reference atomically, so requests
in flight are never dropped or mixed. A new version with `canary_fraction` f < 1 runs on a random f of the
requests while the version before it keeps the rest (both report their latencies under their own version) until
a version without it arrives. A server that fails gives `on_server_error="missing"` (its keys are absent
from the result, counted in stats) or `"raise"` (`ServerError`, with the other servers' results attached); no
call waits longer than `request_timeout`.

With `capture=` (a `tailtune_client.capture.RequestCapture`) a sample of the requests is recorded as the
application made them — keys, the server each key lives on, value sizes, latency, config version — before
batching or Chisel reshapes them, and uploaded as a `tailtune-client` trace.
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from tailtune_client import __version__
from tailtune_client._lanes import Job, Lane, Request
from tailtune_client.capture import RequestCapture
from tailtune_client.config import (
    ConfigError,
    ConfigSource,
    ConfigSourceError,
    HttpConfigSource,
    MemcachedConfig,
    MemcachedConfigSource,
    parse_config,
)
from tailtune_client.hashing import server_for, server_index, server_name
from tailtune_client.histogram import size_class
from tailtune_client.report import (
    REPORT_SCHEMA,
    CanaryStatus,
    ClientInfo,
    ConfigStatus,
    Observation,
    Recorder,
    ReportJson,
    ServerStats,
    Stats,
    client_info,
)

__all__ = ["Client", "ClientClosed", "ConfigError", "ServerError", "TailtuneClientError", "server_for"]

OnServerError = Literal["missing", "raise"]


class TailtuneClientError(Exception):
    """Base of the errors this client raises for memcached operations."""


class ServerError(TailtuneClientError):
    """One or more servers failed (or did not answer within `request_timeout`) under `on_server_error="raise"`.

    `errors` maps each failed server to why; `keys` are the keys that server held; `partial` has the values the
    other servers returned (for get_many).
    """

    def __init__(self, errors: dict[str, str], keys: list[str], partial: dict[str, bytes]) -> None:
        self.errors = errors
        self.keys = keys
        self.partial = partial
        detail = "; ".join(f"{s}: {e}" for s, e in errors.items())
        super().__init__(f"{len(errors)} server(s) failed, {len(keys)} key(s) unanswered: {detail}")


class ClientClosed(TailtuneClientError):
    """The client was closed."""


def _address(server: str | tuple[str, int]) -> tuple[str, int]:
    host, _, port = server_name(server).rpartition(":")
    return host, int(port)


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"keys must be str, got {type(key).__name__}: {key!r}")
    try:
        raw = key.encode("ascii")
    except UnicodeEncodeError:
        raise ValueError(f"key {key!r}: not ASCII") from None
    if not raw or len(raw) > 250:
        raise ValueError(f"key {key!r}: must be 1 to 250 bytes")
    parts = raw.split()
    if len(parts) != 1 or parts[0] != raw or b"\0" in raw:
        raise ValueError(f"key {key!r}: contains whitespace, a control character or NUL")
    return key


def _balanced(keys: list[str], chunks: int) -> list[list[str]]:
    """`chunks` contiguous slices whose sizes differ by at most one (the first ones take the remainder)."""
    n = max(1, min(chunks, len(keys)))
    base, rem = divmod(len(keys), n)
    out: list[list[str]] = []
    start = 0
    for j in range(n):
        size = base + (1 if j < rem else 0)
        out.append(keys[start : start + size])
        start += size
    return out


class _ConfigState:
    """The current config (one reference, swapped whole), the version a canary runs beside (`stable`), and what
    the last checks of the source said."""

    def __init__(self, initial: MemcachedConfig | None, source: ConfigSource | None, local: str) -> None:
        self.lock = threading.Lock()
        self.source = source
        self.description = source.description if source else local
        self.current = initial
        #: While `current` is a canary: the version it replaces, which keeps the other requests (None: no canary,
        #: or a canary with nothing before it, which then runs on every request).
        self.stable: MemcachedConfig | None = None
        self.loaded_at = time.time()
        self.checks = 0
        self.swaps = 0
        self.last_check_at: float | None = None
        self.last_ok_at: float | None = None
        self.stale = False
        self.last_error: str | None = None
        self.last_error_at: float | None = None

    def _error(self, message: str) -> None:
        with self.lock:
            self.stale = True
            self.last_error, self.last_error_at = message, time.time()

    def refresh(self) -> bool:
        """Ask the source once; True when a new version was swapped in. Never raises."""
        if self.source is None:
            return False
        now = time.time()
        with self.lock:
            self.checks += 1
            self.last_check_at = now
        try:
            new = self.source.fetch()
        except (ConfigSourceError, ConfigError) as exc:
            self._error(str(exc))
            return False
        except Exception as exc:  # the poller must outlive any surprise: report it, keep the config
            self._error(f"{self.description}: {type(exc).__name__}: {exc}")
            return False
        with self.lock:
            self.stale = False
            self.last_ok_at = now
            cur = self.current
            if new is None:
                return False
            if cur is not None and new.version is not None and cur.version is not None:
                if new.version < cur.version:
                    self.last_error = (
                        f"{self.description}: offers version {new.version}, older than the running version "
                        f"{cur.version}; kept {cur.version}"
                    )
                    self.last_error_at = now
                    return False
                if new.version == cur.version:
                    return False
            if not new.canary or cur is None:
                self.stable = None
            elif not cur.canary:
                self.stable = cur
            # a canary replacing a canary keeps the stable version both ran beside
            self.current = new
            self.loaded_at = now
            if cur is not None:
                self.swaps += 1
            return True

    def pick(self, rng: random.Random) -> MemcachedConfig:
        """The config one request runs: the canary on its fraction of the requests, the stable version on the
        rest; otherwise the current one."""
        with self.lock:
            cur, stable = self.current, self.stable
        assert cur is not None
        if stable is None or cur.canary_fraction is None or rng.random() < cur.canary_fraction:
            return cur
        return stable

    def canary(self) -> CanaryStatus | None:
        """Call under `lock`."""
        cur, stable = self.current, self.stable
        if cur is None or stable is None or cur.canary_fraction is None:
            return None
        return {"version": cur.version, "fraction": cur.canary_fraction, "stable_version": stable.version}


class Client:
    """A memcached client over a sharded pool that runs the published tailtune config (see the module doc).

    servers: `"host:port"` strings or (host, port) tuples; the order does not matter (names are hashed).
    config: a published document (`{"memcached_client": {...}}` or any shape `parse_config` reads). Without a
        source it is the config; with one it is the bootstrap config, used until the source answers (and kept
        when it never does).
    config_url: the service's `GET /api/v1/configs/{deployment_id}` URL (polled with If-None-Match).
    token: bearer token for `config_url` (and the default for `report_to`).
    deployment: the deployment's name; without `config_url` the client reads the config from the memcached
        publisher's key `tailtune:cfg:<deployment>:current` on the pool. Reports name it.
    config_key: the key the memcached publisher MACs its documents with (the value of the variable its
        `TAILTUNE_MEMCACHED_CONFIG_KEY_ENV` names); required to read the config from the pool: documents
        without its MAC, or naming another deployment, are ignored and reported (`MemcachedConfigSource`).
    deployment_id: the deployment's id in the service; when given, pool documents of another id are ignored.
    poll_interval: seconds between config checks by the background thread (0 or None: no thread; call
        `refresh_config()` yourself).
    connect_timeout, timeout: socket connect and read/write timeouts per query (seconds).
    request_timeout: the most a get_many/set_many waits for its servers (default connect_timeout + timeout);
        pieces not answered by then count as a failed server.
    connections_per_server: query threads (each with one connection) per server: the most chunks of one
        server that run in parallel.
    on_server_error: "missing" (a failed server's keys are absent from the result) or "raise" (`ServerError`).
    dead_timeout: seconds a server that had a connection error is skipped (its keys fail at once) before the
        client tries it again.
    capture: records a sample of the application's requests before they are reshaped (`RequestCapture`).

    Without `config` the first config check happens in the constructor and must succeed (`ConfigError` says
    why not). Use as a context manager or call `close()`.
    """

    def __init__(
        self,
        servers: Sequence[str | tuple[str, int]],
        *,
        config: Mapping[str, Any] | None = None,
        config_url: str | None = None,
        token: str | None = None,
        deployment: str | None = None,
        config_key: bytes | str | None = None,
        deployment_id: int | None = None,
        poll_interval: float | None = 10.0,
        connect_timeout: float = 0.5,
        timeout: float = 1.0,
        request_timeout: float | None = None,
        connections_per_server: int = 4,
        on_server_error: OnServerError = "missing",
        dead_timeout: float = 5.0,
        capture: RequestCapture | None = None,
    ) -> None:
        if not servers:
            raise ValueError("servers: give at least one host:port")
        if on_server_error not in ("missing", "raise"):
            raise ValueError(f"on_server_error must be 'missing' or 'raise', got {on_server_error!r}")
        if connections_per_server < 1:
            raise ValueError(f"connections_per_server must be >= 1, got {connections_per_server}")
        for name, value in (("connect_timeout", connect_timeout), ("timeout", timeout)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0 seconds, got {value}")
        names = [server_name(s) for s in servers]
        if len(set(names)) != len(names):
            raise ValueError(f"servers: duplicates in {names}")
        self.servers: tuple[str, ...] = tuple(names)
        self.capture = capture
        if capture is not None:
            capture.attach("memcached", self.servers)
        self.on_server_error: OnServerError = on_server_error
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self.request_timeout = request_timeout if request_timeout is not None else connect_timeout + timeout
        self.connections_per_server = connections_per_server
        self.dead_timeout = dead_timeout
        self.poll_interval = poll_interval or 0.0
        self.token = token
        self._id = str(uuid.uuid4())
        self._closed = False
        # since the start (stats) and since the last report the service accepted (report)
        self._rec = Recorder()
        self._rng = random.Random()

        initial = parse_config(config) if config is not None else None
        source: ConfigSource | None = None
        if config_url:
            source = HttpConfigSource(config_url, token, timeout_s=max(connect_timeout + timeout, 2.0))
        elif deployment:
            if config_key is None:
                raise ConfigError(
                    "deployment= without config_url= needs config_key= (the memcached publisher's key): memcached "
                    "has no authentication, so a config read from the pool must be verified"
                )
            source = MemcachedConfigSource(
                deployment, [_address(s) for s in names], connect_timeout + timeout, key=config_key,
                deployment_id=deployment_id,
            )
        if source is None and initial is None:
            raise ConfigError("no config: give config=, config_url= or deployment= (the client has no defaults)")
        self._config = _ConfigState(initial, source, "config= argument")
        self._deployment = deployment
        if source is not None:
            self._config.refresh()
            if self._config.current is None:
                source.close()
                raise ConfigError(
                    f"no config: {self._config.last_error} (pass config= as a bootstrap config to start "
                    "without the source)"
                )

        self._lanes = [
            Lane(
                name,
                _address(name),
                connections=connections_per_server,
                connect_timeout=connect_timeout,
                timeout=timeout,
                dead_timeout=dead_timeout,
                on_query=self._count_query,
            )
            for name in names
        ]
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        if source is not None and self.poll_interval > 0:
            self._poller = threading.Thread(target=self._poll, name="tailtune-client config poller", daemon=True)
            self._poller.start()

    # --- config ------------------------------------------------------------------------------------------------
    @property
    def config(self) -> MemcachedConfig:
        """The newest config: new requests start with it (a canary: on its fraction of them)."""
        cfg = self._config.current
        assert cfg is not None
        return cfg

    def refresh_config(self) -> bool:
        """Check the config source now; True when a new version was swapped in (never raises)."""
        return self._config.refresh()

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_interval):
            self._config.refresh()

    # --- operations --------------------------------------------------------------------------------------------
    def _observations(self, cfg: MemcachedConfig) -> tuple[Observation, Observation]:
        """(since start, since last report) for `cfg`; call under the recorder's lock."""
        return self._rec.observations(cfg.version, cfg.mode, cfg.params())

    def _count_query(self, tag: object, members: int, keys: int) -> None:
        if not isinstance(tag, MemcachedConfig):
            return
        with self._rec.lock:
            for obs in self._observations(tag):
                obs.queries += 1
                if members > 1:
                    obs.merged_queries += 1

    def _wait(self, req: Request, jobs: list[tuple[int, Job]], started: float) -> dict[str, str]:
        """Wait for the jobs (at most request_timeout); {server: why} for those that failed or did not answer."""
        left = self.request_timeout - (time.perf_counter() - started)
        if not req.done.wait(max(0.0, left)):
            with req.lock:
                req.abandoned = True
        failed: dict[str, str] = {}
        with req.lock:
            for lane_i, job in jobs:
                if not job.finished:
                    failed.setdefault(self.servers[lane_i], f"no answer within {self.request_timeout:g}s")
                elif job.error is not None:
                    failed.setdefault(self.servers[lane_i], job.error)
        return failed

    def _by_server(self, keys: Iterable[str]) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for k in keys:
            out.setdefault(server_index(k, self.servers), []).append(k)
        return out

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """The values of the keys that exist, {key: bytes}. Keys of a failed server: absent ("missing") or
        `ServerError` ("raise")."""
        if self._closed:
            raise ClientClosed("get_many on a closed client")
        cfg = self._config.pick(self._rng)
        wanted = [_check_key(k) for k in dict.fromkeys(keys)]
        if not wanted:
            return {}
        sampled = self.capture is not None and self.capture.sample()
        wall = time.time()
        started = time.perf_counter()
        by_server = self._by_server(wanted)
        elephant = cfg.mode == "chisel" and len(wanted) > (cfg.elephant_threshold or 0)
        plan: list[tuple[int, list[list[str]]]] = []
        for lane_i, skeys in by_server.items():
            if elephant:
                assert cfg.split_keys is not None
                plan.append((lane_i, _balanced(skeys, math.ceil(len(skeys) / cfg.split_keys))))
            else:
                plan.append((lane_i, [skeys]))
        req = Request(sum(len(pieces) for _, pieces in plan))
        jobs: list[tuple[int, Job]] = []
        for lane_i, pieces in plan:
            lane = self._lanes[lane_i]
            mine = [Job(req, piece, tag=cfg) for piece in pieces]
            jobs.extend((lane_i, j) for j in mine)
            if elephant:
                lane.submit_chunks(mine)
            elif cfg.mode == "chisel" and (cfg.merge or 1) > 1:
                lane.submit_mouse(mine[0], cfg.merge or 1)
            else:
                lane.submit_whole(mine[0])
        failed = self._wait(req, jobs, started)
        out: dict[str, bytes] = {}
        lost: list[str] = []
        with req.lock:
            for _, job in jobs:
                if job.finished and job.error is None:
                    out.update(job.result)
                else:
                    lost.extend(job.keys)
        elapsed_us = (time.perf_counter() - started) * 1e6
        raised = bool(failed) and self.on_server_error == "raise"
        with self._rec.lock:
            for obs in self._observations(cfg):
                if raised:
                    obs.failed_requests += 1
                else:
                    obs.requests += 1
                    obs.keys += len(wanted)
                    obs.missing_keys_on_error += len(lost)
                    obs.classes[size_class(len(wanted))].record(elapsed_us)
        if sampled:
            self._record(wall, "get", wanted, [len(out[k]) if k in out else None for k in wanted], elapsed_us,
                         cfg, bool(failed))
        if raised:
            raise ServerError(failed, lost, out)
        return out

    def _record(self, wall: float, op: str, keys: list[str], sizes: list[int | None], elapsed_us: float,
                cfg: MemcachedConfig | None, failed: bool) -> None:
        assert self.capture is not None
        self.capture.record(ts=wall, op=op, keys=keys, sizes=sizes, latency_us=elapsed_us,
                            config_version=cfg.version if cfg is not None else None, failed=failed,
                            servers=[server_index(k, self.servers) for k in keys])

    def set_many(self, mapping: Mapping[str, bytes], *, expire: int = 0) -> list[str]:
        """Store every key (one `set` query per server, in parallel); the keys not stored. A failed server's keys
        are in that list ("missing") or raise `ServerError` ("raise")."""
        if self._closed:
            raise ClientClosed("set_many on a closed client")
        values: dict[str, bytes] = {}
        for k, v in mapping.items():
            if not isinstance(v, bytes):
                raise TypeError(f"value of {k!r} must be bytes, got {type(v).__name__}")
            values[_check_key(k)] = v
        if not values:
            return []
        sampled = self.capture is not None and self.capture.sample()
        wall = time.time()
        started = time.perf_counter()
        by_server = self._by_server(values)
        req = Request(len(by_server))
        jobs: list[tuple[int, Job]] = []
        for lane_i, skeys in by_server.items():
            job = Job(req, skeys, values={k: values[k] for k in skeys}, expire=expire, tag=None)
            jobs.append((lane_i, job))
            self._lanes[lane_i].submit_whole(job)
        failed = self._wait(req, jobs, started)
        not_stored: list[str] = []
        with req.lock:
            for _, job in jobs:
                if job.finished and job.error is None:
                    not_stored.extend(job.stored_failed)
                else:
                    not_stored.extend(job.keys)
        if sampled:
            self._record(wall, "set", list(values), [len(v) for v in values.values()],
                         (time.perf_counter() - started) * 1e6, self._config.current, bool(failed))
        if failed and self.on_server_error == "raise":
            raise ServerError(failed, not_stored, {})
        return not_stored

    # --- stats and reports ---------------------------------------------------------------------------------------
    def _client_info(self) -> ClientInfo:
        return client_info(self._id, __version__)

    def _config_status(self) -> ConfigStatus:
        st = self._config
        with st.lock:
            cfg = st.current
            assert cfg is not None
            return {
                "version": cfg.version,
                "mode": cfg.mode,
                "params": cfg.params(),
                "deployment": self._deployment or cfg.deployment,
                "deployment_id": cfg.deployment_id,
                "source": st.description,
                "loaded_at": st.loaded_at,
                "checks": st.checks,
                "swaps": st.swaps,
                "last_check_at": st.last_check_at,
                "last_ok_at": st.last_ok_at,
                "stale": st.stale,
                "last_error": st.last_error,
                "last_error_at": st.last_error_at,
                "canary": st.canary(),
                "forged": st.source.forged_status() if isinstance(st.source, MemcachedConfigSource) else None,
            }

    def stats(self) -> Stats:
        """Config state, options, per-server counters and latency histograms per config version and size class
        (since the client started). JSON-serializable; the README shows the shape."""
        status = self._config_status()
        latency = self._rec.latency()
        reports = self._rec.reports()
        servers: dict[str, ServerStats] = {}
        for lane in self._lanes:
            s = lane.stats()
            servers[lane.name] = {
                "queries": s["queries"],
                "keys": s["keys"],
                "hits": s["hits"],
                "merged": s["merged"],
                "errors": s["errors"],
                "connects": s["connects"],
                "queued": s["queued"],
                "busy": s["busy"],
                "down": s["down"],
                "last_error": s["last_error"],
                "last_error_at": s["last_error_at"],
            }
        return {
            "client": self._client_info(),
            "config_version": status["version"],
            "mode": status["mode"],
            "last_config_error": status["last_error"],
            "config": status,
            "options": {
                "on_server_error": self.on_server_error,
                "connect_timeout": self.connect_timeout,
                "timeout": self.timeout,
                "request_timeout": self.request_timeout,
                "connections_per_server": self.connections_per_server,
                "dead_timeout": self.dead_timeout,
                "poll_interval": self.poll_interval,
            },
            "servers": servers,
            "latency": latency,
            "reports": reports,
        }

    def _payload(self, window: list[Observation], start: float, end: float) -> ReportJson:
        status = self._config_status()
        config: dict[str, Any] = {"version": status["version"], "mode": status["mode"], "params": status["params"]}
        if status["forged"] and status["forged"]["count"]:
            config["forged"] = status["forged"]  # pool documents ignored as not the publisher's
        return {
            "schema": REPORT_SCHEMA,
            "client": self._client_info(),
            "deployment": status["deployment"],
            "deployment_id": status["deployment_id"],
            "pool": {"kind": "sharded", "hashing": "rendezvous-murmur3", "servers": len(self.servers)},
            "window": {"start": start, "end": end},
            "config": config,
            "observations": [o.to_json() for o in window if not o.empty()],
        }

    def report(self) -> ReportJson:
        """The payload for the service: observations since the last report it accepted (see the README)."""
        window, start = self._rec.window()
        return self._payload(window, start, time.time())

    def report_to(self, url: str, token: str | None = None, *, timeout: float = 5.0) -> bool:
        """POST the report to `url` (the service's `/api/v1/deployments/{id}/observations`). True when accepted.
        On failure (down, timeout, non-2xx): False, the reason in `stats()["reports"]`, and the observations go
        back into the next report, whose window starts where this one did. Never raises for I/O."""
        return self._rec.send(url, token if token is not None else self.token, timeout, self._payload)

    # --- lifecycle -----------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the poller and the query threads; queued requests fail with "client closed". Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=self.poll_interval + 5.0)
        for lane in self._lanes:
            lane.close(timeout_s=self.request_timeout + 1.0)
        if self._config.source is not None:
            self._config.source.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
