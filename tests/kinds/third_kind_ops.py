"""The operations half of `filekv`, the deployment kind that exists only in the tests (its model half:
`tests.kinds.third_kind_model`): a `control.kind.DeploymentKind` written against the contract alone, which every
contract test (`tests/kinds/test_contract.py`) runs over like the shipped kinds.

Its "cluster" is a directory (`connection.path`): discovery reads `cluster.json` there (`{"servers": N,
"worker_threads": T}`); the publisher keeps one config file per deployment, `<name>.json` (the canonical document
with the deployment's id), written atomically (a temporary file renamed into place) and moved forward only; a
file of a deleted deployment of the same name (an id the metadata DB no longer holds, smaller than this one's) is
fenced: replaced whatever its version. It connects to no address and cannot be captured. One writer at a time:
nothing serialises two publishers of one directory (the shipped kinds' targets do, by LWT and CAS).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from base.settings import Settings
from control.discovery import checked
from control.errors import Invalid
from control.kind import Calibrated, DeploymentKind, Discovered, DiscoveryFailed, Endpoint, Log, ModelInputs, Target
from control.publishers.base import (
    Head,
    Known,
    PublishConflict,
    Publisher,
    PublishOutcome,
    TargetUnavailable,
    document,
)
from tests.kinds.third_kind_model import NAME, FileKvDeployment

__all__ = ["CLUSTER_FILE", "FileKv", "FileKvPublisher"]

#: What discovery reads in the deployment's directory.
CLUSTER_FILE = "cluster.json"


def _directory(connection: Mapping[str, Any]) -> Path:
    return Path(str(connection["path"]))


class FileKvPublisher(Publisher):
    """`<path>/<deployment>.json`: the current document, replaced atomically."""

    kind = NAME

    def _file(self) -> Path:
        return _directory(self.connection) / f"{self.deployment}.json"

    def _held(self) -> dict[str, Any] | None:
        try:
            doc = json.loads(self._file().read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise TargetUnavailable(f"{NAME} {self._file()}: {exc}") from None
        return doc if isinstance(doc, dict) else None

    def _write(self, text: str) -> None:
        folder = self._file().parent
        fd, tmp = tempfile.mkstemp(prefix=".publish-", dir=folder)
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self._file())
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def publish(
        self, version: int, config: dict[str, Any], *, head: Head | None = None, known: Known | None = None
    ) -> PublishOutcome:
        if known is None:
            raise ValueError(f"{NAME}: a publish needs what the metadata DB knows of the deployment (known)")
        self.ping()
        target_v, target_config = (head[0], head[1]) if head is not None and head[0] > version else (version, config)
        held = self._held()
        applied: dict[str, Any] | None = None
        if held is not None:
            owner, held_v = held.get("deployment_id"), int(held.get("version") or 0)
            if owner == known.deployment_id:
                if held_v >= target_v:
                    return PublishOutcome(version, False, held_v)
            elif isinstance(owner, int) and owner < known.deployment_id and owner not in known.live_ids:
                applied = {"replaced_deleted_deployment": {"deployment_id": owner, "version": held_v}}
            else:
                raise PublishConflict(f"{NAME} {self._file()}: holds version {held_v} of deployment id {owner!r}, "
                                      f"not of {known.deployment_id}")
        self._write(document(self.deployment, target_v, target_config, deployment_id=known.deployment_id))
        return PublishOutcome(version, True, target_v, applied)

    def read_current(self) -> tuple[int, dict[str, Any]] | None:
        held = self._held()
        return None if held is None else (int(held["version"]), dict(held["config"]))

    def ping(self) -> None:
        if not _directory(self.connection).is_dir():
            raise TargetUnavailable(f"{NAME} {_directory(self.connection)}: no such directory")


class FileKv(DeploymentKind):
    name = NAME
    model_inputs = ("servers", "worker_threads", "arrivals")
    body_fields: ClassVar[frozenset[str]] = frozenset()

    def check_connection(self, connection: Mapping[str, Any]) -> None:
        if not isinstance(connection.get("path"), str) or not connection["path"]:
            raise Invalid(f"a {NAME} deployment needs a directory", field="connection.path")

    def check_body(self, fields: Mapping[str, Any], *, creating: bool) -> None:
        if fields.get("tables"):
            raise Invalid(f"a {NAME} deployment has no tables", field="tables")

    def endpoints(self, connection: Mapping[str, Any]) -> list[Endpoint]:
        return []  # a directory: no address to check or reach

    def discover(self, target: Target, settings: Settings, *, profile_servers: bool = False,
                 log: Log = lambda _: None) -> Discovered:
        found = Discovered(NAME, time.time())
        where = f"{NAME} {_directory(target.connection) / CLUSTER_FILE}"
        try:
            cluster = json.loads((_directory(target.connection) / CLUSTER_FILE).read_text())
        except FileNotFoundError:
            raise DiscoveryFailed(f"{where}: no such file: write the cluster's shape there", permanent=True) from None
        except (OSError, ValueError) as exc:
            raise DiscoveryFailed(f"{where}: {exc}") from None
        for name in ("servers", "worker_threads"):
            if name in cluster:
                found.put(name, checked(name, cluster[name], where), f"{CLUSTER_FILE} {name}")
            else:
                found.missing.append(name)
        found.readings["cluster"] = cluster
        log(f"{where}: {cluster}")
        return found

    def calibrate(self, target: Target, settings: Settings, *, log: Log = lambda _: None) -> Calibrated:
        out = Calibrated(NAME, time.time())
        out.notes.append("a directory has no service time to measure: nothing calibrated")
        return out

    def model_options(self, inputs: ModelInputs, connection: Mapping[str, Any], *, timestamps: bool,
                      load: float | None) -> dict[str, Any]:
        d = FileKvDeployment()
        opts = {
            "servers": int(inputs.pick("servers", None, d.servers, f"{d.servers} servers")),
            "worker_threads": int(inputs.pick("worker_threads", None, d.worker_threads, f"{d.worker_threads} threads")),
        }
        inputs.set("arrivals", "the trace's own arrival times" if timestamps else "back to back",
                   "trace" if timestamps else "default", how="the trace's ts column")
        return opts

    def shown_topology(self, options: Mapping[str, Any], sources: Mapping[str, str]
                       ) -> tuple[dict[str, Any], dict[str, str]]:
        return {"servers": options["servers"]}, {"topology.servers": sources["servers"]}

    def publisher(self, target: Target, settings: Settings) -> FileKvPublisher:
        return FileKvPublisher(target.name, dict(target.connection), settings.publish_timeout_s, egress=target.egress)
