"""memcached target: `tailtune:cfg:<deployment>:current` (moves forward by CAS) +
`tailtune:cfg:<deployment>:v<N>`.

Every server of the pool gets both keys (the config is replicated, not sharded, so a client finds it whichever
server its hashing picks). The version key is written with `add` (immutable); the current key is read with
`gets` and replaced with `cas` only when its version is older, so concurrent publishers cannot move it
backwards and a client never sees half a config (one item holds the whole document).
"""

from __future__ import annotations

import json
import socket
from typing import Any

from tailtune.control.egress import Egress, EgressRefused
from tailtune.control.publishers.base import (
    Head,
    PartialPublish,
    PublishConflict,
    Publisher,
    PublishOutcome,
    PublishRejected,
    TargetUnavailable,
    document,
)

__all__ = ["MemcachedPublisher", "current_key", "version_key"]


def current_key(deployment: str) -> str:
    return f"tailtune:cfg:{deployment}:current"


def version_key(deployment: str, version: int) -> str:
    return f"tailtune:cfg:{deployment}:v{version}"


def _hostport(server: str) -> tuple[str, int]:
    host, _, port = server.rpartition(":")
    return host.strip("[]"), int(port)


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
        egress: Egress | None = None,
    ) -> None:
        super().__init__(deployment, connection, timeout_s, egress=egress)
        self.item_max_bytes = item_max_bytes

    def _address(self, server: str) -> tuple[str, int]:
        """Where the publisher connects for `server`: its first address, checked against the egress rules."""
        host, port = _hostport(server)
        try:
            return self.egress.resolve(host, port)[0], port
        except EgressRefused as exc:
            raise PublishRejected(f"memcached {server}: {exc}") from None

    def _client(self, server: str) -> Any:
        from pymemcache.client.base import Client

        return Client(
            self._address(server), connect_timeout=self.timeout_s, timeout=self.timeout_s, default_noreply=False
        )

    def _servers(self) -> list[str]:
        return list(self.connection.get("servers", []))

    def publish(self, version: int, config: dict[str, Any], *, head: Head | None = None) -> PublishOutcome:
        """Two passes over the pool. First read every server's current version; the target is the newest of
        `version`, `head` and those (a server that restarted empty gets the newest, never an older republished
        one). Then write the version key and move each server's current key forward to the target. A server
        that fails in either pass is named in a PartialPublish (or TargetUnavailable when none answered)."""
        doc = document(self.deployment, version, config).encode()
        limit = self.item_max_bytes - self.ITEM_OVERHEAD
        if len(doc) > limit:
            raise PublishRejected(
                f"memcached: the document of version {version} is {len(doc)} bytes; an item holds at most "
                f"{limit} (memcached_item_max_bytes {self.item_max_bytes} less overhead)"
            )
        failed: dict[str, str] = {}
        held: dict[str, tuple[int | None, bytes | None]] = {}
        for server in self._servers():
            try:
                held[server] = self._read(server)
            except (OSError, TargetUnavailable) as exc:
                failed[server] = str(exc)
        target_v, target_doc = version, doc
        if head is not None and head[0] > target_v:
            target_v, target_doc = head[0], document(self.deployment, head[0], head[1]).encode()
        for v, raw in held.values():
            if v is not None and raw is not None and v > target_v:
                target_v, target_doc = v, raw
        currents: list[int] = []
        advanced = False
        updated: list[str] = []
        for server in held:
            try:
                cur, adv = self._publish_one(server, version, doc, target_v, target_doc)
            except (OSError, TargetUnavailable) as exc:
                failed[server] = str(exc)
                continue
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
        return PublishOutcome(version, advanced, min(currents, default=target_v))

    def _read(self, server: str) -> tuple[int | None, bytes | None]:
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
        if raw is None:
            return None, None
        return int(json.loads(raw)["version"]), bytes(raw)

    def _publish_one(
        self, server: str, version: int, doc: bytes, target_v: int, target_doc: bytes
    ) -> tuple[int, bool]:
        from pymemcache.exceptions import MemcacheError, MemcacheServerError

        client = self._client(server)
        try:
            vkey = version_key(self.deployment, version)
            if not client.add(vkey, doc, noreply=False):
                existing = client.get(vkey)
                if existing is not None and existing != doc:
                    raise PublishConflict(f"memcached {server}: {vkey} holds a different config")
                if existing is None and not client.add(vkey, doc, noreply=False):
                    raise TargetUnavailable(f"memcached {server}: could not write {vkey}")
            ckey = current_key(self.deployment)
            for _ in range(100):
                value, token = client.gets(ckey)
                if value is None:
                    if client.add(ckey, target_doc, noreply=False):
                        return target_v, True
                    continue
                have = int(json.loads(value)["version"])
                if have >= target_v:
                    return have, False
                if client.cas(ckey, target_doc, token, noreply=False):
                    return target_v, True
            raise TargetUnavailable(f"memcached {server}: {ckey} kept changing (100 CAS races lost)")
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

    def ping(self) -> None:
        for server in self._servers():
            try:
                with socket.create_connection(self._address(server), timeout=self.timeout_s) as sock:
                    sock.sendall(b"version\r\n")
                    if not sock.recv(64).startswith(b"VERSION"):
                        raise TargetUnavailable(f"memcached {server}: unexpected answer")
            except OSError as exc:
                raise TargetUnavailable(f"memcached {server}: {exc}") from exc
