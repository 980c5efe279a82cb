"""memcached target: `tailtune:cfg:<deployment>:current` (moves forward by CAS) +
`tailtune:cfg:<deployment>:v<N>`.

Every server of the pool gets both keys (the config is replicated, not sharded, so a client finds it whichever
server its hashing picks). The version key is written with `add` (immutable); the current key is read with
`gets` and replaced with `cas` only when its version is older, so concurrent publishers cannot move it
backwards and a client never sees half a config (one item holds the whole document).

The metadata DB is the source of truth, not what a server shows. A document is
`{"config", "deployment", "deployment_id", "version"}`, and a publish is given what the DB knows of the
deployment (`Known`: its id, every version it made and their configs, the ids of live deployments). Each
server's current document (and a version key that is already there) is one of:

* **ours** — this deployment's id, a version the DB holds, that version's config: moved forward by CAS as above;
  only such versions (and `version`, `head`, both checked against the DB) can become the target, and the
  document written is always made from the DB, never copied from a server;
* **ours, written before documents carried the id** — no `deployment_id`, this name, a version and config the
  DB holds: taken as ours and rewritten with the id when the key is next written;
* **stale** — the id of a deployment the DB no longer holds (smaller than this one's: ids are never reused and a
  name is unique among live deployments, so it is a deleted deployment of the same name): replaced by ours,
  and that deployment's version keys v1..vN (N its current version, at most `stale_versions_max`) whose
  documents carry its id are deleted from that server. Deleting a deployment leaves its keys in place (running
  applications keep their last config); a new deployment of the same name takes them over on its first publish;
* **ours, without the MAC** — ours but with no MAC, or another key's: rewritten with the MAC when next written;
* **foreign** — anything else (a version or config the DB never made under this deployment's id, a document
  without the id that is not ours, another live or unknown deployment's id, not a document at all): forged, since
  memcached has no authentication and any cache client can write these keys. It is replaced by ours (never
  copied to another server, never taken as a version), and what it held is returned in
  `PublishOutcome.applied["replaced_forged"]` (server → what), which the publish job records and logs.

With `config_key_env` naming a variable, every document carries `mac`: HMAC-SHA256 with that variable's value over
its canonical encoding (`tailtune_client.config.signed`), which a client reading the pool verifies.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, TypeGuard

from tailtune_client.config import KEY_MIN_BYTES, MAC_FIELD, canonical, signed

from control.egress import Egress, EgressRefused, EgressUnresolved
from control.publishers.base import (
    Head,
    Known,
    PartialPublish,
    Publisher,
    PublishOutcome,
    PublishRejected,
    TargetUnavailable,
    document,
)

__all__ = ["MemcachedPublisher", "current_key", "version_key"]

#: Version keys of a deleted deployment looked up per request when removing them.
_SCAN_CHUNK = 100
#: CAS rounds on one key before the server counts as unavailable (the publish is retried).
_CAS_ROUNDS = 100
#: The most of a forged document's description recorded (it is written by whoever forged it).
_WHY_MAX = 300


def current_key(deployment: str) -> str:
    return f"tailtune:cfg:{deployment}:current"


def version_key(deployment: str, version: int) -> str:
    return f"tailtune:cfg:{deployment}:v{version}"


def _hostport(server: str) -> tuple[str, int]:
    host, _, port = server.rpartition(":")
    return host.strip("[]"), int(port)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class _Held:
    """What one key of one server holds, judged against the metadata DB."""

    kind: str  # empty | ours | legacy | stale | foreign
    version: int = 0
    #: stale: the id of the deleted deployment the document was made for.
    owner: int = 0
    #: foreign: what the key holds, for the conflict message.
    why: str = ""


class MemcachedPublisher(Publisher):
    kind = "memcached"

    #: What memcached adds to a value inside its item limit (item header, key, flags, CAS): kept as headroom.
    ITEM_OVERHEAD = 256

    def __init__(
        self,
        deployment: str,
        connection: dict[str, Any],
        timeout_s: float,
        *,
        item_max_bytes: int = 1024**2,
        stale_versions_max: int = 10_000,
        config_key_env: str = "",
        egress: Egress | None = None,
    ) -> None:
        super().__init__(deployment, connection, timeout_s, egress=egress)
        self.item_max_bytes = item_max_bytes
        self.stale_versions_max = stale_versions_max
        #: The environment variable holding the key documents are MACed with ("" : documents carry no MAC).
        self.config_key_env = config_key_env
        self._key: bytes | None = None

    def _address(self, server: str) -> tuple[str, int]:
        """Where the publisher connects for `server`: its first address, checked against the egress rules."""
        host, port = _hostport(server)
        try:
            return self.egress.resolve(host, port)[0], port
        except EgressUnresolved as exc:  # it may resolve later: worth retrying
            raise TargetUnavailable(f"memcached {server}: {exc}") from None
        except EgressRefused as exc:
            raise PublishRejected(f"memcached {server}: {exc}") from None

    def _client(self, server: str) -> Any:
        from pymemcache.client.base import Client

        return Client(
            self._address(server), connect_timeout=self.timeout_s, timeout=self.timeout_s, default_noreply=False
        )

    def _servers(self) -> list[str]:
        return list(self.connection.get("servers", []))

    # --- what a key holds ---------------------------------------------------------------------------------
    def _config_key(self) -> bytes | None:
        """The MAC key from `config_key_env` (None when no variable is named); its value is never shown."""
        if not self.config_key_env:
            return None
        value = os.environ.get(self.config_key_env, "")
        if len(value.encode()) < KEY_MIN_BYTES:
            what = "is not set" if not value else f"is shorter than {KEY_MIN_BYTES} bytes"
            raise PublishRejected(
                f"memcached: the config key variable {self.config_key_env} (TAILTUNE_MEMCACHED_CONFIG_KEY_ENV) {what}"
            )
        return value.encode()

    def _unsigned(self, known: Known, version: int) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(
            document(self.deployment, version, known.config(version), deployment_id=known.deployment_id)
        )
        return doc

    def _doc(self, known: Known, version: int) -> bytes:
        doc = self._unsigned(known, version)
        return canonical(doc) if self._key is None else signed(doc, self._key)

    def _judge(self, raw: bytes | None, known: Known, *, key_version: int | None = None) -> _Held:
        """Classify a stored document (see the module doc). `key_version`: the key is that version's key."""
        if raw is None:
            return _Held("empty")
        try:
            doc = json.loads(raw)
        except ValueError:
            return _Held("foreign", why="holds something that is not a JSON document")
        if not isinstance(doc, dict) or not _is_int(doc.get("version")):
            return _Held("foreign", why="holds a document without an integer version")
        version: int = doc["version"]
        if key_version is not None and version != key_version:
            return _Held("foreign", why=f"holds version {version}")
        ours = f"deployment {self.deployment!r} (id {known.deployment_id})"
        owner = doc.get("deployment_id")
        made = version in known.versions
        if "deployment_id" not in doc:
            if made and doc == json.loads(document(self.deployment, version, known.config(version))):
                return _Held("legacy", version)
            return _Held(
                "foreign", version, why=f"holds version {version} without a deployment id, not one {ours} has"
            )
        if _is_int(owner) and owner == known.deployment_id:
            if made and doc == json.loads(self._doc(known, version)):
                return _Held("ours", version)
            if made and {k: v for k, v in doc.items() if k != MAC_FIELD} == self._unsigned(known, version):
                return _Held("legacy", version)  # ours, with no MAC or another key's: rewritten
            what = "with a config tailtune did not make for" if made else "which tailtune never made for"
            return _Held("foreign", version, why=f"holds version {version} {what} {ours}")
        if (
            _is_int(owner)
            and owner < known.deployment_id
            and owner not in known.live_ids
            and doc.get("deployment") == self.deployment
        ):
            return _Held("stale", version, owner=owner)
        return _Held(
            "foreign", version, why=f"holds version {version} of deployment id {owner!r}, not {ours} nor a deleted one"
        )

    # --- publish ------------------------------------------------------------------------------------------
    def publish(
        self, version: int, config: dict[str, Any], *, head: Head | None = None, known: Known | None = None
    ) -> PublishOutcome:
        """Two passes over the pool. First read every server's current document and judge it against `known`;
        the target is the newest of `version`, `head` and the versions held that are ours (a server that
        restarted empty gets the newest, never an older republished one). Then, on every server not in
        conflict, remove a deleted same-name deployment's keys, write the version key and move the current key
        forward to the target. A server in conflict is named in a PublishConflict (the others are still
        written); one that fails is named in a PartialPublish (or TargetUnavailable when none answered)."""
        if known is None:
            raise ValueError("memcached: a publish needs what the metadata DB knows of the deployment (known)")
        if dict(known.config(version)) != config:
            raise ValueError(f"memcached: version {version} is not the config the metadata DB holds for it")
        self._key = self._config_key()
        doc = self._doc(known, version)
        limit = self.item_max_bytes - self.ITEM_OVERHEAD
        if len(doc) > limit:
            raise PublishRejected(
                f"memcached: the document of version {version} is {len(doc)} bytes; an item holds at most "
                f"{limit} (memcached_item_max_bytes {self.item_max_bytes} less overhead)"
            )
        failed: dict[str, str] = {}
        forged: dict[str, str] = {}
        held: dict[str, _Held] = {}
        for server in self._servers():
            try:
                seen = self._judge(self._read(server), known)
            except (OSError, TargetUnavailable) as exc:
                failed[server] = str(exc)
                continue
            held[server] = seen
        target_v = version
        if head is not None:
            known.config(head[0])  # the DB made it, or this is a caller's mistake
            target_v = max(target_v, head[0])
        for seen in held.values():
            if seen.kind in ("ours", "legacy"):
                target_v = max(target_v, seen.version)
        currents: list[int] = []
        advanced = False
        updated: list[str] = []
        for server, seen in held.items():
            replaced: list[str] = []
            try:
                cur, adv = self._publish_one(server, version, doc, target_v, known, seen, replaced)
            except (OSError, TargetUnavailable) as exc:
                failed[server] = str(exc)
                continue
            finally:
                if replaced:
                    forged[server] = "; ".join(replaced)
            currents.append(cur)
            advanced = advanced or adv
            updated.append(server)
        if failed:
            bad = ", ".join(f"{s} ({why})" for s, why in failed.items())
            if not updated:
                raise TargetUnavailable(f"memcached: no server took version {version}: {bad}")
            raise PartialPublish(
                f"memcached: partial publish of version {version}: updated {', '.join(updated)}; failed {bad}",
                updated=updated,
                failed=failed,
            )
        applied = {"replaced_forged": forged} if forged else None
        return PublishOutcome(version, advanced, min(currents, default=target_v), applied)

    def _read(self, server: str) -> bytes | None:
        from pymemcache.exceptions import MemcacheError

        client = self._client(server)
        try:
            raw = client.get(current_key(self.deployment))
        except MemcacheError as exc:
            raise TargetUnavailable(f"memcached {server}: {exc}") from exc
        except OSError as exc:
            raise TargetUnavailable(f"memcached {server}: {exc}") from exc
        finally:
            client.close()
        return None if raw is None else bytes(raw)

    def _publish_one(
        self, server: str, version: int, doc: bytes, target_v: int, known: Known, seen: _Held, replaced: list[str]
    ) -> tuple[int, bool]:
        """Write one server; what a forged key held before it was replaced is appended to `replaced`."""
        from pymemcache.exceptions import MemcacheError, MemcacheServerError

        client = self._client(server)
        try:
            if seen.kind == "stale":
                self._drop_stale(client, known, seen)
            self._write_version(client, server, version, doc, known, replaced)
            return self._move_current(client, server, target_v, known, replaced)
        except MemcacheServerError as exc:
            if "too large" in str(exc).lower():
                raise PublishRejected(f"memcached {server}: the config is too large for this server ({exc})") from exc
            raise TargetUnavailable(f"memcached {server}: {exc}") from exc
        except MemcacheError as exc:
            raise TargetUnavailable(f"memcached {server}: {exc}") from exc
        except OSError as exc:
            raise TargetUnavailable(f"memcached {server}: {exc}") from exc
        finally:
            client.close()

    def _drop_stale(self, client: Any, known: Known, seen: _Held) -> None:
        """Delete the version keys v1..vN (N = the stale current version, at most `stale_versions_max`) that
        hold documents of the deleted deployment `seen.owner`; keys holding anything else are left alone."""
        last = min(seen.version, self.stale_versions_max)
        for start in range(1, last + 1, _SCAN_CHUNK):
            keys = [version_key(self.deployment, v) for v in range(start, min(start + _SCAN_CHUNK, last + 1))]
            for key, raw in client.get_many(keys).items():
                judged = self._judge(bytes(raw), known)
                if judged.kind == "stale" and judged.owner == seen.owner:
                    client.delete(key, noreply=False)

    def _write_version(
        self, client: Any, server: str, version: int, doc: bytes, known: Known, replaced: list[str]
    ) -> None:
        """`add` the version key; one that is there already and is not ours (a deleted deployment's, ours
        without the id or the MAC, a forged one) is replaced by CAS."""
        vkey = version_key(self.deployment, version)
        for _ in range(_CAS_ROUNDS):
            if client.add(vkey, doc, noreply=False):
                return
            existing, token = client.gets(vkey)
            if existing is None:
                continue  # evicted or deleted meanwhile: add again
            there = self._judge(bytes(existing), known, key_version=version)
            if there.kind == "ours":
                return
            if client.cas(vkey, doc, token, noreply=False):
                if there.kind == "foreign":
                    replaced.append(f"{vkey} {there.why}"[:_WHY_MAX])
                return
        raise TargetUnavailable(f"memcached {server}: {vkey} kept changing ({_CAS_ROUNDS} CAS races lost)")

    def _move_current(
        self, client: Any, server: str, target_v: int, known: Known, replaced: list[str]
    ) -> tuple[int, bool]:
        """Move the current key forward to `target_v` (a deleted deployment's or a forged document is replaced
        whatever its version; ours written without the id or the MAC is rewritten with them). Returns (version
        now current, advanced)."""
        ckey = current_key(self.deployment)
        for _ in range(_CAS_ROUNDS):
            value, token = client.gets(ckey)
            if value is None:
                if client.add(ckey, self._doc(known, target_v), noreply=False):
                    return target_v, True
                continue
            there = self._judge(bytes(value), known)
            if there.kind == "ours" and there.version >= target_v:
                return there.version, False
            new_v = max(there.version, target_v) if there.kind == "legacy" else target_v
            if client.cas(ckey, self._doc(known, new_v), token, noreply=False):
                if there.kind == "foreign":
                    replaced.append(f"{ckey} {there.why}"[:_WHY_MAX])
                return new_v, there.kind in ("stale", "foreign") or there.version < new_v
        raise TargetUnavailable(f"memcached {server}: {ckey} kept changing ({_CAS_ROUNDS} CAS races lost)")

    def read_current(self) -> tuple[int, dict[str, Any]] | None:
        from pymemcache.exceptions import MemcacheError

        client = self._client(self._servers()[0])
        try:
            value = client.get(current_key(self.deployment))
        except (OSError, MemcacheError) as exc:
            raise TargetUnavailable(f"memcached: {exc}") from exc
        finally:
            client.close()
        if value is None:
            return None
        doc = json.loads(value)
        return int(doc["version"]), dict(doc["config"])

    reference_request = "version"

    def round_trips(self, probes: int) -> list[float]:
        """`version` round trips, one connection per server, the probes dealt round-robin over the servers."""
        servers = self._servers()
        out: list[float] = []
        if not servers:
            return out
        socks: list[tuple[str, socket.socket]] = []
        try:
            for server in servers:
                try:
                    socks.append((server, socket.create_connection(self._address(server), timeout=self.timeout_s)))
                except OSError as exc:
                    raise TargetUnavailable(f"memcached {server}: {exc}") from exc
            for i in range(probes):
                server, sock = socks[i % len(socks)]
                try:
                    start = time.perf_counter()
                    sock.sendall(b"version\r\n")
                    answer = b""
                    while not answer.endswith(b"\r\n") and len(answer) < 256:
                        chunk = sock.recv(256)
                        if not chunk:
                            break
                        answer += chunk
                    took = (time.perf_counter() - start) * 1e6
                except OSError as exc:
                    raise TargetUnavailable(f"memcached {server}: {exc}") from exc
                if not answer.startswith(b"VERSION"):
                    raise TargetUnavailable(f"memcached {server}: unexpected answer to 'version'")
                out.append(took)
        finally:
            for _, sock in socks:
                sock.close()
        return out

    def ping(self) -> None:
        for server in self._servers():
            try:
                with socket.create_connection(self._address(server), timeout=self.timeout_s) as sock:
                    sock.sendall(b"version\r\n")
                    if not sock.recv(64).startswith(b"VERSION"):
                        raise TargetUnavailable(f"memcached {server}: unexpected answer")
            except OSError as exc:
                raise TargetUnavailable(f"memcached {server}: {exc}") from exc
