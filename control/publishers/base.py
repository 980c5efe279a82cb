"""What every publish target does, and the retry loop around one publish.

A publish writes one config version as one JSON document (`document()`: deployment, version, config, and for
memcached the deployment's id — the same bytes for the same version, so a repeated publish is a no-op). The
metadata DB is the source of truth: the caller hands the publisher what the DB knows of the deployment (`Known`:
its id and every version it made), and for memcached a server holding anything else under the deployment's name
holds either a deleted same-name deployment's keys (replaced) or a conflict (reported, never overwritten, never
copied). Targets keep an immutable entry per version and a "current" entry that only moves forward (LWT in
Cassandra, CAS in memcached). The current entry is moved to the newest version known anywhere — the one being
published, the newest the control plane has published before (`head`), and for memcached the newest any server
of the pool holds that the DB made for this deployment — so republishing an older version (or publishing to a
target that lost its data) restores the newest one instead of regressing it. Transient failures raise
`TargetUnavailable` (`PartialPublish` when some servers of a pool took the version and others did not, naming
both) and are retried with exponential backoff; `PublishConflict` (an existing entry with content the metadata DB
never made for this deployment, naming the servers that hold it) and `PublishRejected` (the target will never
take this document, e.g. too large for memcached) are not retried.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tailtune_client.config import canonical

from base.errors import TailtuneError
from control.egress import Egress

__all__ = [
    "Head",
    "Known",
    "PartialPublish",
    "PublishConflict",
    "PublishFailed",
    "PublishOutcome",
    "PublishRejected",
    "Publisher",
    "TargetUnavailable",
    "document",
    "publish_with_retry",
]

#: The newest version the control plane has published to this target before, and its config.
Head = tuple[int, dict[str, Any]]


class TargetUnavailable(TailtuneError):
    """The target did not answer (down, timeout, refused): worth retrying."""


class PartialPublish(TargetUnavailable):
    """Some servers of a pool took the version, others did not (retried; reported with both lists)."""

    def __init__(self, message: str, *, updated: list[str], failed: dict[str, str]) -> None:
        super().__init__(message)
        self.updated = updated
        self.failed = failed


class PublishConflict(TailtuneError):
    """The target holds content the metadata DB never made for this deployment (another config under a version,
    a version tailtune never made): never retried, that content never overwritten nor copied. A pool names the
    servers in conflict (`servers`: server → what it holds) and the ones that took the version (`updated`)."""

    def __init__(
        self, message: str, *, servers: Mapping[str, str] | None = None, updated: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.servers = dict(servers or {})
        self.updated = list(updated)


class PublishRejected(TailtuneError):
    """The target will never accept this document (too large for it): not retried."""


class PublishFailed(TailtuneError):
    """Every attempt failed; carries the last error (`partial` when the last attempt was a PartialPublish)."""

    def __init__(self, message: str, *, partial: PartialPublish | None = None) -> None:
        super().__init__(message)
        self.partial = partial


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    version: int
    #: False when the target already had this or a newer version as current (idempotent no-op).
    advanced: bool
    current_version: int
    #: What the publisher changed or read on the target besides the document (Cassandra: each table's
    #: speculative_retry before and after, the snitch settings it found); recorded with the version.
    applied: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Known:
    """What the metadata DB knows of the deployment being published: what a target's content is checked against.

    Deployment ids are never reused and names are unique among live deployments, so a document under this
    deployment's name that carries another id no deployment has any more, smaller than this one's, was written
    for a deleted deployment of the same name."""

    deployment_id: int
    #: Every version the DB holds for this deployment → the config tailtune made for it.
    versions: Mapping[int, Mapping[str, Any]]
    #: The ids of every deployment the DB holds (a document of one of them under this name is not a leftover).
    live_ids: frozenset[int] = field(default_factory=frozenset)
    #: The deployment's identity (`DeploymentRow.identity`: id + creation nonce); Cassandra keys its rows by it.
    identity: str = ""
    #: The identities of every deployment the DB holds (rows of any other identity are a deleted deployment's).
    live_identities: frozenset[str] = field(default_factory=frozenset)

    def config(self, version: int) -> dict[str, Any]:
        """The config the DB holds for `version`; ValueError if it made none (a caller's mistake)."""
        if version not in self.versions:
            raise ValueError(f"deployment {self.deployment_id} has no version {version} in the metadata DB")
        return dict(self.versions[version])


def document(deployment: str, version: int, config: Mapping[str, Any], *, deployment_id: int | None = None) -> str:
    """The exact text stored for a version: canonical JSON, so the same version is always the same bytes. With
    `deployment_id` (memcached) the document names the deployment it was made for."""
    doc: dict[str, Any] = {"deployment": deployment, "version": version, "config": config}
    if deployment_id is not None:
        doc["deployment_id"] = deployment_id
    return canonical(doc).decode()


class Publisher(ABC):
    """One target (a Cassandra cluster or a memcached pool) of one deployment."""

    kind: ClassVar[str]

    def __init__(
        self,
        deployment: str,
        connection: dict[str, Any],
        timeout_s: float,
        *,
        tables: Sequence[str] = (),
        driver: str = "java4",
        server: str = "stock",
        egress: Egress | None = None,
    ) -> None:
        self.deployment = deployment
        self.connection = connection
        self.timeout_s = timeout_s
        #: Which password variable the publisher may read and which hosts it may reach (control.egress).
        self.egress = egress or Egress()
        #: The deployment's `keyspace.table` names (Cassandra: where a stock config's table options go).
        self.tables = list(tables)
        self.driver = driver
        self.server = server

    @abstractmethod
    def publish(
        self, version: int, config: dict[str, Any], *, head: Head | None = None, known: Known | None = None
    ) -> PublishOutcome:
        """One attempt: write `version`'s entry and move the current entry forward to the newest of `version`,
        `head` and what the target holds (memcached: of what it holds, only versions `known` says the DB made
        for this deployment). Raises TargetUnavailable (retry), PublishConflict or PublishRejected (stop)."""

    @abstractmethod
    def read_current(self) -> tuple[int, dict[str, Any]] | None:
        """(version, config) as clients see it, or None when nothing was published yet."""

    @abstractmethod
    def ping(self) -> None:
        """Raise TargetUnavailable unless the target answers."""

    #: The trivial request `round_trips` times (None: the target has none; shown with the verify's reference).
    reference_request: ClassVar[str | None] = None

    def round_trips(self, probes: int) -> list[float]:
        """`probes` round trips of `reference_request` (µs each, spread over the target's servers), through the
        same connection rules as a publish: the environment's reference the verify step compares windows by.
        Raises TargetUnavailable when the target does not answer; the default: NotImplementedError."""
        raise NotImplementedError(f"{self.kind}: no reference request")


def publish_with_retry(
    publisher: Publisher,
    version: int,
    config: dict[str, Any],
    *,
    attempts: int,
    backoff_s: float,
    log: Callable[[str], None] = lambda _: None,
    sleep: Callable[[float], None] = time.sleep,
    head: Head | None = None,
    known: Known | None = None,
) -> PublishOutcome:
    """Publish with up to `attempts` tries, sleeping backoff_s * 2**(n-1) between them."""
    last: Exception | None = None
    for n in range(1, attempts + 1):
        try:
            outcome = publisher.publish(version, config, head=head, known=known)
        except TargetUnavailable as exc:
            last = exc
            if n < attempts:
                delay = backoff_s * 2 ** (n - 1)
                log(f"{publisher.kind}: attempt {n}/{attempts} failed ({exc}); retrying in {delay:.2f}s")
                sleep(delay)
            else:
                log(f"{publisher.kind}: attempt {n}/{attempts} failed ({exc}); giving up")
            continue
        log(
            f"{publisher.kind}: version {version} published (attempt {n}; current {outcome.current_version}"
            f"{'' if outcome.advanced else ', already current or newer'})"
        )
        return outcome
    raise PublishFailed(
        f"{publisher.kind}: publish of version {version} failed after {attempts} attempts: {last}",
        partial=last if isinstance(last, PartialPublish) else None,
    )
