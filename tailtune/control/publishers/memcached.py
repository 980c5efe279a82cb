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

from tailtune.control.publishers.base import PublishConflict, Publisher, PublishOutcome, TargetUnavailable, document

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

    def _client(self, server: str) -> Any:
        from pymemcache.client.base import Client

        return Client(
            _hostport(server), connect_timeout=self.timeout_s, timeout=self.timeout_s, default_noreply=False
        )

    def _servers(self) -> list[str]:
        return list(self.connection.get("servers", []))

    def publish(self, version: int, config: dict[str, Any]) -> PublishOutcome:
        doc = document(self.deployment, version, config).encode()
        currents: list[int] = []
        advanced = False
        for server in self._servers():
            try:
                cur, adv = self._publish_one(server, version, doc)
            except OSError as exc:
                raise TargetUnavailable(f"memcached {server}: {exc}") from exc
            currents.append(cur)
            advanced = advanced or adv
        return PublishOutcome(version, advanced, min(currents, default=version))

    def _publish_one(self, server: str, version: int, doc: bytes) -> tuple[int, bool]:
        from pymemcache.exceptions import MemcacheError

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
                    if client.add(ckey, doc, noreply=False):
                        return version, True
                    continue
                have = int(json.loads(value)["version"])
                if have >= version:
                    return have, False
                if client.cas(ckey, doc, token, noreply=False):
                    return version, True
            raise TargetUnavailable(f"memcached {server}: {ckey} kept changing (100 CAS races lost)")
        except MemcacheError as exc:
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
                with socket.create_connection(_hostport(server), timeout=self.timeout_s) as sock:
                    sock.sendall(b"version\r\n")
                    if not sock.recv(64).startswith(b"VERSION"):
                        raise TargetUnavailable(f"memcached {server}: unexpected answer")
            except OSError as exc:
                raise TargetUnavailable(f"memcached {server}: {exc}") from exc
