"""The published memcached client config: parsing, validation, and where it comes from.

A config is the `memcached_client` block of a published document: `{"mode": "batching"}` or
`{"mode": "chisel", "elephant_threshold": T, "split_keys": L, "merge": B}`. The publisher publishes the complete
effective config, so the client has no defaults for these: a chisel config without one of its three keys is a
`ConfigError` that names the key.

`parse_config` accepts every shape the block travels in:

* `{"memcached_client": {...}}` — the rendered target (`tuner.recommend.render_memcached`'s `json`);
* `{"json": {"memcached_client": {...}}}` — a whole rendered target;
* `{"policy": P, "params": {...}, "target": {"json": {"memcached_client": {...}}}}` — a stored config version
  (the `target` wins; without it the block is `{"mode": P, **params}`, which is what `render_memcached` makes);
* any of those under `"config"` in an envelope that carries the version: the memcached publisher's document
  (`{"deployment": NAME, "deployment_id": ID, "version": N, "config": ...}`) or the service's
  `GET /api/v1/configs/{id}` answer (`{"deployment_id": ID, "version": N, "config": ..., ...}`).

A config may carry `canary_fraction` (0 < f <= 1) beside its block (`{"policy", "params", "target",
"canary_fraction"}`, or next to `memcached_client`): the client then runs the new version on that fraction of its
requests and keeps the version it ran before on the rest, until a version without it arrives (the service's verify
step promotes or rolls back the canary with one).

Sources: `HttpConfigSource` (the service, `Authorization: Bearer`, ETag / If-None-Match polling) and
`MemcachedConfigSource` (the `tailtune:cfg:<deployment>:current` key the memcached publisher writes to every
server of the pool; only documents carrying the publisher's MAC, made with the config key both are given, that
name this deployment are adopted; of those the highest version wins; the others are ignored and reported).

Every value is range-checked: a chisel key within `CHISEL_MAX`, a version and a deployment id within
[0, `VERSION_MAX`].
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, TypeVar

import httpx

__all__ = [
    "CHISEL_KEYS",
    "CHISEL_MAX",
    "KEY_MIN_BYTES",
    "MAC_FIELD",
    "MODES",
    "VERSION_MAX",
    "ConfigError",
    "ConfigSource",
    "ConfigSourceError",
    "ForgedStatus",
    "HttpConfigSource",
    "MemcachedConfig",
    "MemcachedConfigSource",
    "canary_fraction",
    "canonical",
    "current_key",
    "document_mac",
    "json_object",
    "parse_config",
    "signed",
]

MODES = ("batching", "chisel")
#: The keys a chisel config must carry (no defaults in the client).
CHISEL_KEYS = ("elephant_threshold", "merge", "split_keys")
#: The largest value the client runs for each chisel key (keys per request, keys per chunk, mice per query);
#: `split_keys` 2^32 - 1 is the simulator's "no split" (its default: a chunk no request reaches).
CHISEL_MAX = {"elephant_threshold": 1_000_000, "merge": 1024, "split_keys": 2**32 - 1}
#: The largest config version and deployment id a document may carry (the metadata DB's integer columns).
VERSION_MAX = 2**31 - 1
#: The field of a memcached publisher's document that holds its MAC (`document_mac`).
MAC_FIELD = "mac"
_MAC_SCHEME = "hmac-sha256:"
#: The shortest key a memcached config source (and the publisher) accepts.
KEY_MIN_BYTES = 16

_log = logging.getLogger("tailtune_client.config")


_T = TypeVar("_T")


class ConfigError(ValueError):
    """A config document that the client cannot run: names the missing or bad key."""


class ConfigSourceError(RuntimeError):
    """The config source did not answer with a usable document (unreachable, HTTP error, nothing published)."""


@dataclass(frozen=True, slots=True)
class MemcachedConfig:
    """One immutable config version. Requests take a reference at their start and keep it to their end."""

    mode: str
    #: Requests with more keys than this are elephants (chisel only).
    elephant_threshold: int | None = None
    #: Chunk size L: an elephant's batch for one server goes out as ceil(k / L) balanced chunks (chisel only).
    split_keys: int | None = None
    #: Merge level B: up to B mice share one query per server (chisel only; 1 = no merging).
    merge: int | None = None
    #: The published version (None for a local config that carries none).
    version: int | None = None
    #: The deployment's name, when the document carries it (the memcached publisher's document does).
    deployment: str | None = None
    #: The deployment's id in the service, when the document carries it (the service's answer does).
    deployment_id: int | None = None
    #: The `memcached_client` block as published (unknown keys kept here, and otherwise ignored).
    block: Mapping[str, Any] = field(default_factory=dict)
    #: Run this version on this fraction of the requests first (0 < f <= 1; None: on all of them).
    canary_fraction: float | None = None

    @property
    def canary(self) -> bool:
        """A canary: the version before it keeps the requests it does not take."""
        return self.canary_fraction is not None and self.canary_fraction < 1

    def params(self) -> dict[str, int]:
        """The mode's parameters (empty for batching)."""
        if self.mode != "chisel":
            return {}
        assert self.elephant_threshold is not None and self.split_keys is not None and self.merge is not None
        return {"elephant_threshold": self.elephant_threshold, "merge": self.merge, "split_keys": self.split_keys}


def canonical(doc: Mapping[str, Any]) -> bytes:
    """The canonical encoding of a document: JSON, keys sorted, no spaces, ASCII. What the publisher stores and
    what a MAC is computed over."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def document_mac(doc: Mapping[str, Any], key: bytes) -> str:
    """`hmac-sha256:<hex>`: HMAC-SHA256 with `key` over the canonical encoding of `doc` without its MAC field."""
    body = {k: v for k, v in doc.items() if k != MAC_FIELD}
    return _MAC_SCHEME + hmac.new(key, canonical(body), hashlib.sha256).hexdigest()


def signed(doc: Mapping[str, Any], key: bytes) -> bytes:
    """`doc` with its MAC, canonically encoded: what the memcached publisher stores."""
    return canonical({**doc, MAC_FIELD: document_mac(doc, key)})


def _check_key(key: bytes | str) -> bytes:
    raw = key.encode() if isinstance(key, str) else bytes(key)
    if len(raw) < KEY_MIN_BYTES:
        raise ConfigError(f"config_key must be at least {KEY_MIN_BYTES} bytes, got {len(raw)}")
    return raw


def current_key(deployment: str) -> str:
    """The key the memcached publisher keeps the current version under (on every server of the pool)."""
    return f"tailtune:cfg:{deployment}:current"


def _find_block(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    block = doc.get("memcached_client")
    if isinstance(block, Mapping):
        return block
    for outer in ("target", None):
        holder = doc.get(outer) if outer else doc
        if isinstance(holder, Mapping):
            inner = holder.get("json")
            if isinstance(inner, Mapping) and isinstance(inner.get("memcached_client"), Mapping):
                found: Mapping[str, Any] = inner["memcached_client"]
                return found
    policy = doc.get("policy")
    if isinstance(policy, str):
        params = doc.get("params") or {}
        if not isinstance(params, Mapping):
            raise ConfigError(f"config.params must be an object, got {type(params).__name__}")
        return {"mode": policy, **params}
    return None


def canary_fraction(body: Mapping[str, Any], where: str) -> float | None:
    """The config's `canary_fraction` (None when it has none); `ConfigError` when it is not in (0, 1]."""
    if "canary_fraction" not in body or body["canary_fraction"] is None:
        return None
    f = body["canary_fraction"]
    if isinstance(f, bool) or not isinstance(f, int | float) or not 0 < f <= 1:
        raise ConfigError(f"{where}: canary_fraction must be a number in (0, 1], got {f!r}")
    return float(f)


def _positive_int(block: Mapping[str, Any], name: str, where: str) -> int:
    if name not in block:
        need = ", ".join(CHISEL_KEYS)
        raise ConfigError(
            f"{where}: memcached_client.{name} is missing (mode 'chisel' needs {need}; the client has no defaults)"
        )
    value = block[name]
    top = CHISEL_MAX[name]
    if (
        isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value <= top
        or int(value) != value
    ):
        raise ConfigError(f"{where}: memcached_client.{name} must be an integer in [1, {top}], got {value!r}")
    return int(value)


def _id_field(doc: Mapping[str, Any], name: str) -> int | None:
    """An envelope's `version` / `deployment_id`: None when absent, else an integer in [0, VERSION_MAX]."""
    value = doc.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= VERSION_MAX:
        raise ConfigError(f"config {name} must be an integer in [0, {VERSION_MAX}], got {value!r}")
    return value


def json_object(doc: Mapping[str, Any] | str | bytes) -> Mapping[str, Any]:
    """A published document (text or parsed) as a JSON object; `ConfigError` says what it is instead."""
    if isinstance(doc, str | bytes):
        try:
            doc = json.loads(doc)
        except ValueError as exc:
            raise ConfigError(f"config is not JSON: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise ConfigError(f"config must be a JSON object, got {type(doc).__name__}")
    return doc


def parse_config(doc: Mapping[str, Any] | str | bytes) -> MemcachedConfig:
    """A `MemcachedConfig` from any published shape (see the module doc); `ConfigError` names what is wrong."""
    doc = json_object(doc)
    version: int | None = None
    deployment: str | None = None
    deployment_id: int | None = None
    body: Mapping[str, Any] = doc
    if "memcached_client" not in doc and isinstance(doc.get("config"), Mapping):
        body = doc["config"]
        version = _id_field(doc, "version")
        if isinstance(doc.get("deployment"), str):
            deployment = doc["deployment"]
        deployment_id = _id_field(doc, "deployment_id")
    elif isinstance(doc.get("version"), int) and not isinstance(doc.get("version"), bool):
        version = _id_field(doc, "version")
    where = "config" if version is None else f"config version {version}"
    block = _find_block(body)
    if block is None:
        keys = ", ".join(sorted(map(str, body))) or "none"
        raise ConfigError(f"{where}: no memcached_client block (keys: {keys})")
    mode = block.get("mode")
    if mode not in MODES:
        raise ConfigError(f"{where}: memcached_client.mode must be one of {', '.join(MODES)}, got {mode!r}")
    fraction = canary_fraction(body, where)
    if mode == "batching":
        return MemcachedConfig(
            "batching", version=version, deployment=deployment, deployment_id=deployment_id, block=dict(block),
            canary_fraction=fraction,
        )
    threshold, merge, split = (_positive_int(block, k, where) for k in CHISEL_KEYS)
    return MemcachedConfig(
        "chisel",
        elephant_threshold=threshold,
        split_keys=split,
        merge=merge,
        version=version,
        deployment=deployment,
        deployment_id=deployment_id,
        block=dict(block),
        canary_fraction=fraction,
    )


class ConfigSource:
    """Where a client's config comes from. `fetch()` returns a new config, or None when nothing changed."""

    description: str

    def fetch(self) -> MemcachedConfig | None:
        raise NotImplementedError

    def close(self) -> None:
        """Release connections (idempotent)."""


class HttpConfigSource(ConfigSource):
    """`GET url` with `Authorization: Bearer token`; remembers the ETag and sends `If-None-Match` (304 → None).

    The ETag is remembered only once its body parsed, so a bad document is reported again on every poll.
    """

    def __init__(self, url: str, token: str | None, timeout_s: float) -> None:
        self.url = url
        self.description = url
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(timeout=timeout_s, headers=headers, follow_redirects=True)
        self._etag: str | None = None

    def fetch(self) -> MemcachedConfig | None:
        return self.fetch_parsed(parse_config)

    def fetch_parsed(self, parse: Callable[[bytes], _T]) -> _T | None:
        """`GET` with `If-None-Match`; None on 304, else `parse(body)` (the ETag is kept once it parsed).
        `tailtune_client.cassandra` fetches its driver settings through this."""
        headers = {"If-None-Match": self._etag} if self._etag else {}
        try:
            resp = self._http.get(self.url, headers=headers)
        except httpx.HTTPError as exc:
            raise ConfigSourceError(f"GET {self.url}: {type(exc).__name__}: {exc}") from exc
        if resp.status_code == 304:
            return None
        if resp.status_code != 200:
            detail = resp.text[:200].strip()
            raise ConfigSourceError(f"GET {self.url}: HTTP {resp.status_code}{': ' + detail if detail else ''}")
        parsed = parse(resp.content)
        self._etag = resp.headers.get("etag")
        return parsed

    def close(self) -> None:
        self._http.close()


class ForgedStatus(TypedDict):
    """What a `MemcachedConfigSource` ignored: documents that failed verification (see its doc)."""

    #: Documents ignored since the client started (each distinct document on each server counted once).
    count: int
    #: server → why its current document was ignored, as of the last check (empty: none).
    servers: dict[str, str]


class MemcachedConfigSource(ConfigSource):
    """The publisher's `tailtune:cfg:<deployment>:current` key, read from every server of the pool.

    memcached has no authentication, so any cache client can write that key: a document is adopted only once it
    is verified. It must carry the MAC the publisher computes with the key this source is configured with
    (`document_mac`, HMAC-SHA256 over the canonical encoding), name this deployment (and `deployment_id`, when
    the source is given one) and hold a config the client runs (every value in range, `parse_config`). Any other
    document is ignored and reported: counted once per distinct document and server, logged once (warning,
    logger `tailtune_client.config`), and named in `forged` (server → why), which the client's stats and reports
    carry. Of the verified documents the newest deployment's (the highest `deployment_id`: a deleted same-name
    deployment's leftovers lose) highest version wins (a restarted server that lost the key, or one a publish has
    not reached yet, does not hold the client back).
    """

    def __init__(
        self,
        deployment: str,
        servers: Sequence[tuple[str, int]],
        timeout_s: float,
        *,
        key: bytes | str,
        deployment_id: int | None = None,
    ) -> None:
        self.deployment = deployment
        self.key = current_key(deployment)
        self.servers = list(servers)
        self.timeout_s = timeout_s
        self.deployment_id = deployment_id
        self.description = f"memcached key {self.key}"
        self._mac_key = _check_key(key)
        self._last: bytes | None = None
        self._seen_forged: set[tuple[str, str]] = set()
        self.forged: ForgedStatus = {"count": 0, "servers": {}}

    def _read(self, server: tuple[str, int]) -> bytes | None:
        from pymemcache.client.base import Client as PmClient

        client = PmClient(server, connect_timeout=self.timeout_s, timeout=self.timeout_s, default_noreply=False)
        try:
            value = client.get(self.key)
        finally:
            client.close()
        return value if isinstance(value, bytes) else None

    def verify(self, raw: bytes) -> MemcachedConfig:
        """The config of a document read from the pool; `ConfigError` says why it is not the publisher's."""
        doc = json_object(raw)
        mac = doc.get(MAC_FIELD)
        if not isinstance(mac, str):
            raise ConfigError("no MAC (not written by the publisher, or by one without the config key)")
        if not hmac.compare_digest(mac, document_mac(doc, self._mac_key)):
            raise ConfigError("bad MAC (not written by the publisher with this config key)")
        if doc.get("deployment") != self.deployment:
            raise ConfigError(f"names deployment {doc.get('deployment')!r}, not {self.deployment!r}")
        cfg = parse_config(doc)
        if cfg.version is None or cfg.deployment_id is None:
            raise ConfigError("no version or deployment_id")
        if self.deployment_id is not None and cfg.deployment_id != self.deployment_id:
            raise ConfigError(f"names deployment id {cfg.deployment_id}, not {self.deployment_id}")
        return cfg

    def forged_status(self) -> ForgedStatus:
        """A copy of `forged`, for stats and reports."""
        return {"count": self.forged["count"], "servers": dict(self.forged["servers"])}

    def _forged(self, where: str, raw: bytes, why: str) -> None:
        self.forged["servers"][where] = why
        seen = (where, hashlib.sha256(raw).hexdigest())
        if seen not in self._seen_forged:
            self._seen_forged.add(seen)
            self.forged["count"] += 1
            _log.warning("%s on %s: ignored a document that is not the publisher's: %s", self.key, where, why)

    def fetch(self) -> MemcachedConfig | None:
        from pymemcache.exceptions import MemcacheError

        best: tuple[tuple[int, int], bytes, MemcachedConfig] | None = None
        errors: list[str] = []
        answered = 0
        self.forged["servers"] = {}
        for server in self.servers:
            where = f"{server[0]}:{server[1]}"
            try:
                raw = self._read(server)
            except (OSError, MemcacheError) as exc:
                errors.append(f"{where}: {type(exc).__name__}: {exc}")
                continue
            answered += 1
            if raw is None:
                continue
            try:
                cfg = self.verify(raw)
            except ConfigError as exc:
                self._forged(where, raw, str(exc))
                continue
            assert cfg.deployment_id is not None and cfg.version is not None
            rank = (cfg.deployment_id, cfg.version)
            if best is None or rank > best[0]:
                best = (rank, raw, cfg)
        if best is None:
            if not answered:
                raise ConfigSourceError(f"{self.description}: no server answered ({'; '.join(errors)})")
            if self.forged["servers"]:
                what = "; ".join(f"{s}: {why}" for s, why in self.forged["servers"].items())
                raise ConfigSourceError(f"{self.description}: no verified document (ignored: {what})")
            raise ConfigSourceError(f"{self.description}: nothing published yet")
        if best[1] == self._last:
            return None
        self._last = best[1]
        return best[2]
