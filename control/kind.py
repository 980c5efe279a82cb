"""A deployment kind's operations: what differs between Cassandra, memcached, … on the control plane's side,
behind one abstract base, `DeploymentKind`, and the values its methods take and return.

A kind has two halves. Its *model* (the deployment options the simulator replays, its policies) is its
`simulation.kinds.ModelKind` row. Its *operations* are a `DeploymentKind` subclass in its own package,
`kinds/<name>/`, which `ModelKind.operations` names as `module:Class`; `control.kinds.operations(name)` imports
it (the control plane imports no kind statically: `kinds` sits above it in the layers) and hands out one instance.
The API, the worker's jobs and the CLI ask `operations(kind)` what to do and never compare a kind with a kind's
name.

The methods, grouped by what they are for:

* **the body** — `body_fields` (the body fields only some kinds have), `check_body`, `check_connection`,
  `endpoints` (what the egress check and readiness connect to);
* **the live system** — `discover`, `calibrate`, and the optional `capture` (flag `captures`, its source
  `capture_source`); `client_captures` (the kind's application clients record the `tailtune-client` trace) and
  `reshapes` (what a config changes in what the kind's own capture sees);
* **the model** — `model_inputs`, `model_options` (from declared, discovered and calibrated inputs),
  `shown_topology`;
* **config versions** — `applies_to`, `rendered`, `rollback_config`, `published_record`;
* **publish** — `publisher` (a `control.publishers.base.Publisher`: publish, read back, ping; a deleted
  same-name deployment's entry is fenced: replaced by the next deployment of that name);
* **verify** — `server_figures` (what the target itself reports beside the clients' histograms) and the optional
  `reference_figures` (flag `references`: a trivial request's round trips, the environment's reference);
* **replay** — `replay_driver`: the kind's live replay (`control.replay_trace.ReplayDriver`; None: it has none).

An optional capability is a class flag and one method: a kind without it inherits the base method, which
raises `Unsupported` (a 422 naming the kind and the kinds that have it). Every method is called with what the
control plane read of the deployment inside its session (`Target`, a `DeploymentRow` or plain mappings) and
holds no session of its own.
"""

from __future__ import annotations

import importlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from base.errors import TailtuneError
from base.settings import Settings
from control.db import DeploymentRow
from control.egress import Egress
from control.errors import Invalid
from control.publishers.base import Publisher
from control.storage import free_bytes
from simulation.kinds import kind_names, model_kind

__all__ = [
    "CAPABILITIES",
    "Calibrated",
    "CaptureDiskFull",
    "CaptureFailed",
    "Captured",
    "DeploymentKind",
    "Discovered",
    "DiscoveryFailed",
    "Endpoint",
    "Log",
    "ModelInputs",
    "Target",
    "Unsupported",
    "kind_class",
]

#: Where a kind's progress lines go (the job's log, the CLI's console, nowhere).
Log = Callable[[str], None]

#: The optional capabilities: name → (the class flag that says a kind has it, what a deployment of it can do).
CAPABILITIES: dict[str, tuple[str, str]] = {"capture": ("captures", "be captured")}


# --- what the methods take --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Endpoint:
    """One address a deployment's connection names: the body field it is at (`connection.servers[0]`), the host
    and port to connect to, and the host as the body writes it (`named`: what the API's egress check shows)."""

    field: str
    host: str
    port: int
    named: str


@dataclass(frozen=True)
class Target:
    """One deployment as its kind's operations reach it — read inside the deployment's session, used after it: its
    name, connection, the egress rules it is reached under (bound to its password grant where a password may be
    sent), and the body fields only some kinds have (`tables`, `server`, `driver`: their defaults otherwise)."""

    name: str
    connection: Mapping[str, Any]
    egress: Egress = field(default_factory=Egress)
    tables: tuple[str, ...] = ()
    server: str = "stock"
    driver: str = "java4"

    @classmethod
    def of(cls, row: DeploymentRow, egress: Egress) -> Target:
        """The deployment of `row` (inside its session), reached under `egress`."""
        return cls(row.name, dict(row.connection or {}), egress, tuple(row.tables or ()), row.server or "stock",
                   row.driver or "java4")


class ModelInputs(Protocol):
    """What a kind's model half may read and record while its model is built (`control.model.ModelBuilder`).

    Every input's value comes from one source, in this order: declared (a topology field the deployment states
    explicitly), calibrated, discovered, the default; each recorded input becomes a row of the recommendation's
    `tuned_for.model_sources`."""

    topology: Mapping[str, Any]
    notes: list[str]

    def pick(self, name: str, topo_field: str | None, default: Any, how_default: str) -> Any:
        """The value of input `name`: topology field `topo_field` when declared, else calibrated, else discovered,
        else `default` (recorded with `how_default`); its source recorded."""
        ...

    def found(self, name: str, source: str) -> dict[str, Any] | None:
        """The stored entry of input `name` (`{"value", "source", "at", "how"}`) when it came from `source`."""
        ...

    def use(self, name: str, entry: Mapping[str, Any]) -> None:
        """Record a stored entry (`found`) as input `name`'s, with its own source."""
        ...

    def set(self, name: str, value: Any, source: str, *, how: str, at: float | None = None) -> None:
        """Record input `name` as `value` from `source` (`control.model.SOURCES`), found `how`, at `at`."""
        ...

    def source(self, name: str) -> str | None:
        """The source recorded for input `name` so far (None: not recorded yet)."""
        ...


# --- what the methods return ------------------------------------------------------------------------------------
@dataclass
class Discovered:
    """What one discovery read: model inputs (each `{"value", "source": "discovered", "at", "how"}`), the raw
    readings, the inputs it looked for and could not find (a stale discovered value of theirs is dropped), and
    the config the live system runs when it can tell (`current_config`; None: it cannot)."""

    kind: str
    at: float
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    readings: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    current_config: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def put(self, name: str, value: Any, how: str) -> None:
        self.inputs[name] = {"value": value, "source": "discovered", "at": self.at, "how": how}


@dataclass
class Calibrated:
    """What one calibration measured: model inputs (each `{"value", "source": "calibrated", "at", "how", ...}`:
    an uncertainty, a fit), the raw readings and notes."""

    kind: str
    at: float
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    readings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def put(self, name: str, value: Any, how: str, **extra: Any) -> None:
        self.inputs[name] = {"value": value, "source": "calibrated", "at": self.at, "how": how, **extra}


@dataclass(frozen=True)
class Captured:
    """What one capture wrote: the trace file's `format` (an ingest format name) and size, what the capture saw
    (`seen`: the nightly job's record of it), the lines to log about it, and why the file holds nothing to tune
    on (`nothing`; None: it holds requests)."""

    format: str
    bytes: int
    seen: dict[str, Any]
    report: tuple[str, ...] = ()
    nothing: str | None = None


class DiscoveryFailed(TailtuneError):
    """Discovery or calibration could not read what it needs: one line naming the node and what to do.
    `permanent`: trying again cannot help before the operator acts (a refused login, a missing permission, a
    rule, a version)."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class CaptureFailed(TailtuneError):
    """The capture could not start or found nothing it can keep: a server cannot be reached (`permanent` False:
    worth another try), refuses the capture or the deployment names nothing to capture (`permanent` True)."""

    def __init__(self, message: str, *, permanent: bool, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.permanent = permanent


class CaptureDiskFull(CaptureFailed):
    """The capture's file found its filesystem full: the path and the bytes free there; nothing is kept."""

    def __init__(self, path: Path, cause: OSError) -> None:
        try:
            free: int | None = free_bytes(path)
        except OSError:
            free = None
        left = f"{free} bytes free" if free is not None else "free space unknown"
        super().__init__(f"cannot write the capture {path}: no space left on its filesystem ({left})",
                         permanent=True)
        self.path = path
        self.free_bytes = free
        self.cause = cause


class Unsupported(Invalid):
    """A kind was asked for an optional capability it does not have (`CAPABILITIES`): a 422 naming the field
    (the capability's, unless given), the kind, and the kinds that have it."""

    def __init__(self, kind: str, capability: str, *, field: str | None = None) -> None:
        flag, can = CAPABILITIES[capability]
        able = [name for name in kind_names() if getattr(kind_class(name), flag, False)]
        detail = (f"only a {' or '.join(able)} deployment can {can}, not a {kind} one" if able
                  else f"no deployment kind can {can}, not a {kind} one either")
        super().__init__(detail, field=field or capability)
        self.kind = kind
        self.capability = capability


# --- the contract -----------------------------------------------------------------------------------------------
class DeploymentKind(ABC):
    """The operations of one deployment kind (module doc). Subclasses set `name` (the kind's registered name) and
    `model_inputs`, implement the abstract methods and override the others where the kind differs. Instances
    hold no state: `control.kinds.operations` makes one per kind and shares it between threads."""

    #: The kind's name, as registered in `simulation.kinds.KINDS`.
    name: ClassVar[str]
    #: The fields of a deployment's body only some kinds have that this kind has (of `server`, `driver`,
    #: `tables`): they are shown in its answers, their sources stated and a tune replays them.
    body_fields: ClassVar[frozenset[str]] = frozenset()
    #: The inputs of its model in the order `tuned_for.model_sources` lists them.
    model_inputs: ClassVar[tuple[str, ...]]
    #: Whether its live system can be captured as a trace (`capture`).
    captures: ClassVar[bool] = False
    #: What its `capture` reads, as a nightly's `capture.source` names it (`watch`: memcached's watch log; `fql`:
    #: a full query log); None without `captures`.
    capture_source: ClassVar[str | None] = None
    #: Whether its application clients (tailtune-client) record the application's requests as a `tailtune-client`
    #: trace, which a nightly takes with `capture.source: clients`.
    client_captures: ClassVar[bool] = False
    #: Whether its publisher times a trivial request (`Publisher.round_trips`): the environment's reference the
    #: verify step compares windows that are not concurrent by (`reference_figures`).
    references: ClassVar[bool] = False

    # --- the body -------------------------------------------------------------------------------------------
    @abstractmethod
    def check_connection(self, connection: Mapping[str, Any]) -> None:
        """What a connection of this kind must hold. `connection` is the body's `connection` as a mapping (its
        fields' own checks passed). Raises `Invalid` naming the field at fault (`connection.servers`) — an empty
        connection is always refused. No side effects."""

    def check_body(self, fields: Mapping[str, Any], *, creating: bool) -> None:
        """The kind's rules on the body fields only some kinds have (`body_fields`). `fields`: the body's fields
        — when `creating` every field with the defaults filled in, else those a patch gives (none null). Raises
        `Invalid` naming the field at fault (when `creating`, several names may share one field: `server, driver`).
        The default accepts any. No side effects."""
        return None

    @abstractmethod
    def endpoints(self, connection: Mapping[str, Any]) -> list[Endpoint]:
        """The addresses the worker and the service connect to for a deployment of this kind, in the body's
        order: the egress check of a body (`control.deployments`) and readiness (`service.health`) go through
        them. `connection` is one `check_connection` accepted; an endpoint it cannot read raises ValueError. No
        side effects (no name is resolved)."""

    # --- the live system ------------------------------------------------------------------------------------
    @abstractmethod
    def discover(self, target: Target, settings: Settings, *, profile_servers: bool = False,
                 log: Log = lambda _: None) -> Discovered:
        """Read the deployment's live system with its own connection, under `target.egress`, and return what it
        found as model inputs and readings (nothing is stored: `control.discovery.discover_deployment` does).
        `profile_servers`: also measure what needs writing scratch keys, where the kind can. Raises
        `DiscoveryFailed` naming the node and what to do (`permanent` when trying again cannot help). Side
        effects: connections to the deployment's endpoints only; scratch keys it writes are removed."""

    @abstractmethod
    def calibrate(self, target: Target, settings: Settings, *, log: Log = lambda _: None) -> Calibrated:
        """Measure the model inputs discovery cannot read (service times, network, client overhead) on the live
        system, under `target.egress`; nothing is stored (`control.calibration.calibrate_deployment` does).
        Raises `DiscoveryFailed` like `discover`; side effects as `discover`'s."""

    def capture(self, target: Target, out: Path, *, duration_s: float, stop: threading.Event, settings: Settings,
                log: Log = lambda _: None) -> Captured:
        """Record what the live system serves for `duration_s` seconds (or until `stop` is set) into the trace
        file `out` (written under a hidden name and renamed into place; nothing is left at `out` when it
        raises). Only a kind with `captures`: the default raises `Unsupported` naming the kind. Raises
        `CaptureFailed` (`permanent` or worth another try), `CaptureDiskFull`. Side effects: connections to the
        deployment's endpoints, the file."""
        raise Unsupported(self.name, "capture")

    def reshapes(self, config: Mapping[str, Any] | None) -> str | None:
        """Why the requests the kind's own `capture` records under `config` (a stored config version's `config`,
        or None) are not the application's — the client reshapes them (memcached: Chisel splits and merges) —
        or None when they are. The drift step does not count a reshaped capture as workload drift. The default:
        None. No side effects."""
        return None

    # --- the model ------------------------------------------------------------------------------------------
    @abstractmethod
    def model_options(self, inputs: ModelInputs, connection: Mapping[str, Any], *, timestamps: bool,
                      load: float | None) -> dict[str, Any]:
        """The options of the kind's model deployment (`ModelKind.deployment`'s `from_dict` takes them) that a
        tune of the deployment replays, each input taken through `inputs` (which records its source; no input
        left unrecorded). `timestamps`: the trace has arrival times; `load`: a what-if offered load replacing
        them (where the kind models one). Raises nothing for stored inputs it cannot replay: it notes why
        (`inputs.notes`) and falls back to the default."""

    @abstractmethod
    def shown_topology(self, options: Mapping[str, Any], sources: Mapping[str, str]
                       ) -> tuple[dict[str, Any], dict[str, str]]:
        """The topology a deployment's answer shows — from the options and sources `model_options` made with
        no trace — and the source of each shown value (`topology.<field>` → source)."""

    # --- config versions ------------------------------------------------------------------------------------
    def applies_to(self, row: DeploymentRow) -> dict[str, Any] | None:
        """What a config version of the deployment is made for (its body fields a version depends on), stored
        with the version and shown in its diff; None (the default): nothing beyond the config."""
        return None

    def rendered(self, config: dict[str, Any], row: DeploymentRow) -> dict[str, Any]:
        """`config` with what the kind's clients need to apply it added (checked again after), or `config` itself
        (the default). Raises `Invalid` naming the field when it cannot be rendered."""
        return config

    def rollback_config(self, config: dict[str, Any], version: int, row: DeploymentRow,
                        published: Callable[[], Iterable[tuple[int, Mapping[str, Any]]]]) -> dict[str, Any]:
        """The config of a rollback to `version` whose config is `config`: what the kind must add so that
        publishing it restores what was in force then. `published()` reads, when needed, (version, the
        publisher's record of it) of every version of the deployment. The default: `config`."""
        return config

    def published_record(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
        """The record a version keeps of its publish (`ConfigVersionRow.published[kind]`) when it is published
        again (`old`: the earlier record, None the first time). The default keeps the new one."""
        return dict(new)

    # --- publish --------------------------------------------------------------------------------------------
    @abstractmethod
    def publisher(self, target: Target, settings: Settings) -> Publisher:
        """The publisher of the deployment's target (`control.publishers.base.Publisher`: publish, read back,
        ping), connecting under `target.egress` with the settings' timeouts and limits. Its publish fences a
        deleted same-name deployment's entry: replaced by this deployment's, whatever its version. No side
        effects until a method of the publisher is called."""

    # --- verify ---------------------------------------------------------------------------------------------
    def server_figures(self, target: Target, settings: Settings, *, log: Log = lambda _: None
                       ) -> dict[str, Any] | None:
        """What the target itself reports now that the verify step compares with the publish's snapshot
        (`control.verify`: `{"nodes": ...}` as the publisher records under `latency`), or None (the default):
        the kind judges a version on its clients' reports alone. Never raises: a target that cannot be read is
        `{"error": why}` (redacted), and `log` says so."""
        return None

    def reference_figures(self, target: Target, settings: Settings, *, log: Log = lambda _: None
                          ) -> dict[str, Any] | None:
        """The environment's reference now: `verify_reference_probes` round trips of the kind's trivial request
        (its publisher's `round_trips`, under `target.egress`) as `{"request", "probes", "histogram", "p99_ms",
        "at"}` (the histogram in the clients' report form, so the verify step tests it as it tests theirs). None
        for a kind without `references` or with the setting 0. Never raises: a target that cannot be timed is
        `{"error": why}` (redacted), and `log` says so."""
        if not self.references or settings.verify_reference_probes <= 0:
            return None
        from tailtune_client.histogram import LogHistogram

        from control.common import now
        from control.redact import public

        publisher = self.publisher(target, settings)
        try:
            samples = publisher.round_trips(settings.verify_reference_probes)
        except TailtuneError as exc:
            log(f"the reference round trips could not be measured: {exc}")
            return {"error": public(str(exc), settings)}
        hist = LogHistogram()
        for us in samples:
            hist.record(us)
        p99 = hist.quantile_us(0.99)
        return {"request": publisher.reference_request, "probes": len(samples), "histogram": dict(hist.to_json()),
                "p99_ms": p99 / 1000.0 if p99 is not None else None, "at": now()}

    # --- replay ---------------------------------------------------------------------------------------------
    def replay_driver(self, target: Target) -> object | None:
        """The live replay of the deployment: a `control.replay_trace.ReplayDriver` (`control.replay.run_replay`
        checks it is one and drives it; typed `object` here so that the control plane's modules but the replay's
        import no tuner), reaching it under `target.egress`; None (the default): the kind has none. No side
        effects until its `run`."""
        return None


def kind_class(name: str) -> type[DeploymentKind]:
    """The class kind `name`'s `ModelKind.operations` names (`module:Class`), imported. Raises BadInputError for
    an unregistered name, TypeError when it names no `DeploymentKind` of that name."""
    spec = model_kind(name).operations
    module, _, attr = spec.partition(":")
    cls = getattr(importlib.import_module(module), attr, None)
    if not (isinstance(cls, type) and issubclass(cls, DeploymentKind)) or getattr(cls, "name", None) != name:
        raise TypeError(f"deployment kind {name!r}: {spec} is not a DeploymentKind named {name!r}")
    return cls
