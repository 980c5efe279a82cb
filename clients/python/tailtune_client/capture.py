"""A sample of the application's own requests, recorded before the client reshapes them, uploaded as a trace.

    capture = RequestCapture(rate=0.1, deployment_id=7, upload_url=TRACES_URL, token=WRITE_TOKEN)
    client = Client(servers, config_url=..., capture=capture)         # memcached
    profiles = TunedProfiles(config_url, capture=capture)               # Cassandra (Python driver)

Each logical request (a `get_many` / `set_many` as the application called it; a statement run through
`TunedProfiles.execute`) is sampled once, when it starts, with probability `rate`; a sampled request is recorded
when it ends: its start time (epoch seconds), op, keys, the server (memcached: the index in the pool) or token
range each key maps to, value sizes (a miss: null), latency, the config version it ran and whether it failed.
It is recorded *before* batching or Chisel split and merge it, so the trace of one application is the same
whichever mode runs.

Keys are kept as given, or — with `key_secret` — as keyed hashes: `h` + the first 20 hex digits of
HMAC-SHA-256(secret, key), then `~n` with the smallest n ≥ 0 that puts the hashed name on the key's own server
under the pool's rendezvous hashing (`tailtune_client.hashing`), so the placement of the trace on the same pool,
and a live replay of it, are the application's. A key hashes to the same name every time (the secret fixed):
popularity and reuse are kept.

Limits, each counted, never hidden: at most `max_bytes` of records are held (a record that would pass it is
dropped: `dropped.memory`), and an upload sends at most `upload_bytes_per_s` × the seconds since the previous
upload (at most `max_bytes`; the records past it are dropped: `dropped.bandwidth`). A sampled Cassandra
statement whose partition keys the application did not name is not recorded (`dropped.unkeyed`). The counts,
and the sample rate, travel in the upload's header line, and `stats()` shows them.

The upload is one `POST /api/v1/traces?format=tailtune-client&deployment_id=…` of the records since the last
accepted one (the `tailtune-client` format: a header line, then one JSON line per request; docs/formats.md). An
upload that fails puts its records back (as far as `max_bytes` allows). `upload()` does one; with `upload_url` a
daemon thread does one every `upload_interval_s`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Sequence
from typing import Any

import httpx

from tailtune_client import __version__
from tailtune_client.hashing import server_index
from tailtune_client.report import client_info

__all__ = ["CAPTURE_SCHEMA", "FORMAT", "KEYS_HASHED", "KEYS_PLAIN", "RequestCapture", "hashed_key"]

#: The header's `schema`: the version of the format's layout.
CAPTURE_SCHEMA = "tailtune.client.capture/1"
#: The trace format of an upload (`ingest.formats`).
FORMAT = "tailtune-client"
KEYS_PLAIN = "plain"
KEYS_HASHED = "hmac-sha256"
#: The most `~n` suffixes tried to put a hashed key on its server (with k servers one fits after k tries on
#: average; 64·k makes a miss vanishingly rare — the key is then recorded on the server it lands on, and counted).
_SUFFIX_TRIES = 64


def hashed_key(secret: bytes, key: str, servers: tuple[str, ...] | None = None) -> str:
    """The name a key is recorded under with `key_secret`: on the key's own server when `servers` is given."""
    base = "h" + hmac.new(secret, key.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:20]
    if not servers or len(servers) == 1:
        return base
    want = server_index(key, servers)
    for n in range(_SUFFIX_TRIES * len(servers)):
        name = f"{base}~{n}"
        if server_index(name, servers) == want:
            return name
    return f"{base}~x"


class RequestCapture:
    """Samples, holds and uploads the application's requests (module doc). Thread-safe.

    rate: the probability that one request is recorded (0 < rate ≤ 1).
    key_secret: record keyed hashes of the keys instead of the keys (at least 16 bytes).
    max_bytes: the most bytes of records held between uploads.
    upload_bytes_per_s: the most bytes an upload sends per second since the previous one.
    deployment_id: the deployment the uploads belong to (their traces are the deployment's).
    upload_url: the service's `/api/v1/traces`; with it a daemon thread uploads every `upload_interval_s`.
    token: the bearer token of the uploads (write scope).
    """

    def __init__(
        self,
        *,
        rate: float,
        key_secret: bytes | str | None = None,
        max_bytes: int = 16 * 1024 * 1024,
        upload_bytes_per_s: float = 1024 * 1024,
        deployment: str | None = None,
        deployment_id: int | None = None,
        upload_url: str | None = None,
        token: str | None = None,
        upload_interval_s: float = 60.0,
        timeout_s: float = 10.0,
        seed: int | None = None,
    ) -> None:
        if not 0 < rate <= 1:
            raise ValueError(f"rate must be > 0 and <= 1, got {rate}")
        if max_bytes < 1024:
            raise ValueError(f"max_bytes must be at least 1024, got {max_bytes}")
        if not upload_bytes_per_s > 0:
            raise ValueError(f"upload_bytes_per_s must be > 0, got {upload_bytes_per_s}")
        if not upload_interval_s > 0:
            raise ValueError(f"upload_interval_s must be > 0 seconds, got {upload_interval_s}")
        secret = key_secret.encode() if isinstance(key_secret, str) else key_secret
        if secret is not None and len(secret) < 16:
            raise ValueError("key_secret must be at least 16 bytes")
        self.rate = rate
        self.max_bytes = max_bytes
        self.upload_bytes_per_s = upload_bytes_per_s
        self.deployment = deployment
        self.deployment_id = deployment_id
        self.upload_url = upload_url
        self.token = token
        self.timeout_s = timeout_s
        self._secret = secret
        self._rng = random.Random(seed)
        self._id = str(uuid.uuid4())
        self._lock = threading.Lock()
        self._lines: deque[bytes] = deque()
        self._held = 0
        self._servers: tuple[str, ...] | None = None
        self._kind = "memcached"
        self._tables = False
        self._start = time.time()
        self._last_upload = self._start
        self._sampled = 0
        self._seen = 0
        self._recorded = 0
        self._dropped_memory = 0
        self._dropped_bandwidth = 0
        self._unkeyed = 0
        self._sent_memory = 0
        self._sent_bandwidth = 0
        self._sent_unkeyed = 0
        self._misplaced = 0
        self._uploads = 0
        self._upload_bytes = 0
        self._last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._send_lock = threading.Lock()
        if upload_url:
            self._thread = threading.Thread(target=self._loop, args=(upload_interval_s,), daemon=True,
                                            name="tailtune-client capture uploader")
            self._thread.start()

    # --- what the clients call ---------------------------------------------------------------------------
    def attach(self, kind: str, servers: Sequence[str] | None, *, tables: bool = False) -> None:
        """Called by the client that records into it: its kind of pool, its servers (memcached) and whether its
        requests name tables (Cassandra)."""
        with self._lock:
            if self._servers is not None and servers is not None and tuple(servers) != self._servers:
                raise ValueError("this capture already records for another pool of servers")
            self._kind = kind
            self._tables = tables
            if servers is not None:
                self._servers = tuple(servers)

    def sample(self) -> bool:
        """Whether the request starting now is recorded (decided once per request)."""
        with self._lock:
            self._seen += 1
            hit = self._rng.random() < self.rate
            self._sampled += hit
            return hit

    def unkeyed(self) -> None:
        """A sampled request whose keys the application did not name: not recorded, counted."""
        with self._lock:
            self._unkeyed += 1

    def _key(self, key: str) -> str:
        if self._secret is None:
            return key
        name = hashed_key(self._secret, key, self._servers)
        if name.endswith("~x"):
            self._misplaced += 1
        return name

    def record(
        self,
        *,
        ts: float,
        op: str,
        keys: Sequence[str],
        sizes: Sequence[int | None],
        latency_us: float,
        config_version: int | None,
        failed: bool = False,
        servers: Sequence[int] | None = None,
        table: str | None = None,
    ) -> None:
        """Keep one sampled request (dropped and counted when `max_bytes` is reached)."""
        doc: dict[str, Any] = {
            "ts": round(ts, 6),
            "op": op,
            "keys": [self._key(k) for k in keys],
            "sizes": list(sizes),
            "latency_us": round(latency_us, 1),
            "config_version": config_version,
            "failed": failed,
        }
        if servers is not None:
            doc["servers"] = list(servers)
        if table is not None:
            doc["table"] = table
        line = json.dumps(doc, separators=(",", ":")).encode() + b"\n"
        with self._lock:
            if self._held + len(line) > self.max_bytes:
                self._dropped_memory += 1
                return
            self._lines.append(line)
            self._held += len(line)
            self._recorded += 1

    # --- uploads -----------------------------------------------------------------------------------------
    def _header(self, start: float, end: float, records: int, dropped: dict[str, int]) -> bytes:
        doc: dict[str, Any] = {
            "schema": CAPTURE_SCHEMA,
            "client": client_info(self._id, __version__),
            "kind": self._kind,
            "tables": self._tables,
            "deployment": self.deployment,
            "deployment_id": self.deployment_id,
            "servers": list(self._servers) if self._servers is not None else None,
            "hashing": "rendezvous-murmur3" if self._servers is not None else None,
            "key_form": KEYS_PLAIN if self._secret is None else KEYS_HASHED,
            "sample_rate": self.rate,
            "window": {"start": round(start, 6), "end": round(end, 6)},
            "records": records,
            "dropped": dropped,
        }
        return json.dumps(doc, separators=(",", ":")).encode() + b"\n"

    def take(self) -> tuple[bytes, int]:
        """The next upload's body (header and records since the last upload, within the bandwidth budget) and
        its record count; the records are removed (`putback` returns them when the upload fails)."""
        with self._lock:
            now = time.time()
            budget = min(self.max_bytes, int(self.upload_bytes_per_s * max(0.0, now - self._last_upload)))
            out: list[bytes] = []
            used = 0
            while self._lines and used + len(self._lines[0]) <= budget:
                line = self._lines.popleft()
                used += len(line)
                out.append(line)
            over = len(self._lines)
            self._dropped_bandwidth += over
            self._lines.clear()
            self._held = 0
            dropped = {"memory": self._dropped_memory - self._sent_memory,
                       "bandwidth": self._dropped_bandwidth - self._sent_bandwidth,
                       "unkeyed": self._unkeyed - self._sent_unkeyed}
            self._sent_memory, self._sent_bandwidth = self._dropped_memory, self._dropped_bandwidth
            self._sent_unkeyed = self._unkeyed
            start, self._last_upload = self._last_upload, now
            return self._header(start, now, len(out), dropped) + b"".join(out), len(out)

    def _putback(self, body: bytes) -> None:
        header, _, records = body.partition(b"\n")
        doc = json.loads(header)
        lines = records.splitlines(keepends=True)
        with self._lock:
            self._last_upload = float(doc["window"]["start"])
            self._sent_memory -= int(doc["dropped"]["memory"])
            self._sent_bandwidth -= int(doc["dropped"]["bandwidth"])
            self._sent_unkeyed -= int(doc["dropped"]["unkeyed"])
            for line in reversed(lines):
                if self._held + len(line) > self.max_bytes:
                    self._dropped_memory += 1
                    continue
                self._lines.appendleft(line)
                self._held += len(line)

    def upload(self, url: str | None = None, token: str | None = None, *, http: httpx.Client | None = None) -> bool:
        """POST the records since the last accepted upload as a `tailtune-client` trace; True when accepted.
        Nothing recorded and nothing dropped: nothing is sent (True). Never raises for I/O: the reason is in
        `stats()["last_error"]` and the records go back."""
        target = url or self.upload_url
        if not target:
            raise ValueError("upload: no url (give url= or upload_url= to the constructor)")
        bearer = token if token is not None else self.token
        with self._send_lock:
            body, n = self.take()
            header = json.loads(body.partition(b"\n")[0])
            if n == 0 and not any(header["dropped"].values()):
                return True
            params: dict[str, str] = {"format": FORMAT, "name": f"client-{self._id[:8]}-{self._uploads + 1}"}
            if self.deployment_id is not None:
                params["deployment_id"] = str(self.deployment_id)
            headers = {"Content-Type": "application/octet-stream"}
            if bearer:
                headers["Authorization"] = f"Bearer {bearer}"
            error: str | None = None
            try:
                if http is not None:
                    resp = http.post(target, params=params, content=body, headers=headers, timeout=self.timeout_s)
                else:
                    resp = httpx.post(target, params=params, content=body, headers=headers, timeout=self.timeout_s)
                if not 200 <= resp.status_code < 300:
                    error = f"POST {target}: HTTP {resp.status_code}: {resp.text[:200].strip()}"
            except httpx.HTTPError as exc:
                error = f"POST {target}: {type(exc).__name__}: {exc}"
            with self._lock:
                self._last_error = error
                if error is None:
                    self._uploads += 1
                    self._upload_bytes += len(body)
            if error is not None:
                self._putback(body)
                return False
            return True

    def _loop(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self.upload()

    def stats(self) -> dict[str, Any]:
        """Requests seen and sampled, records kept, held and dropped (by cap), uploads."""
        with self._lock:
            return {
                "rate": self.rate,
                "key_form": KEYS_PLAIN if self._secret is None else KEYS_HASHED,
                "seen": self._seen,
                "sampled": self._sampled,
                "recorded": self._recorded,
                "held": len(self._lines),
                "held_bytes": self._held,
                "dropped": {"memory": self._dropped_memory, "bandwidth": self._dropped_bandwidth,
                            "unkeyed": self._unkeyed},
                "misplaced_keys": self._misplaced,
                "uploads": self._uploads,
                "upload_bytes": self._upload_bytes,
                "last_error": self._last_error,
            }

    def close(self, *, flush: bool = True) -> None:
        """Stop the uploader thread; with `flush` and an `upload_url`, upload what is held once more."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s + 5.0)
            self._thread = None
            if flush:
                self.upload()

    def __enter__(self) -> RequestCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

