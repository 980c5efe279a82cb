"""The bodies of a deployment: what registers (`DeploymentCreate`) and changes (`DeploymentPatch`) one, and how it
is shown (`DeploymentOut`) — by /api/v1/deployments and `tailtune deployments` alike."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from base.errors import BadInputError
from control.common import NAME_PATTERN, RequestBody, to_dt
from control.db import DeploymentRow
from control.egress import parse_server
from control.errors import Invalid
from control.kinds import operations
from control.model import INPUT_RANGES, topology_default
from simulation.kinds import kind_names

__all__ = [
    "DRIVERS",
    "KIND_FIELDS",
    "SERVERS",
    "TABLE_PATTERN",
    "Connection",
    "Constraints",
    "DeploymentCreate",
    "DeploymentOut",
    "DeploymentPatch",
    "DiscoverRequest",
    "Objective",
    "Topology",
    "check_kind",
    "check_tables",
    "check_timezone",
]

_HOSTPORT = re.compile(r"^[A-Za-z0-9.\-]+:[0-9]{1,5}$|^\[[0-9a-fA-F:]+\]:[0-9]{1,5}$")
#: IANA zone names are short (the longest is about 30 characters); timezone columns are VARCHAR(64).
TIMEZONE_MAX = 64
#: Endpoints of one deployment (memcached servers, Cassandra contact points) and names in a policy list.
MAX_ENDPOINTS = 256
HOST_MAX = 255
Host = Annotated[str, Field(min_length=1, max_length=HOST_MAX + 6)]
PolicyName = Annotated[str, Field(min_length=1, max_length=64)]

#: What a Cassandra deployment's nodes run: stock Cassandra, or a server patched with Rein's scheduler.
SERVERS = ("stock", "rein-patched")
#: The applications' driver (the same names as `simulation.stock_knobs.DRIVERS`).
DRIVERS = ("java4", "python")
#: `keyspace.table`, both unquoted CQL identifiers as Cassandra stores them (lower case; at most 48 characters,
#: Cassandra's limit for both names). Case-sensitive (quoted) names are not accepted.
TABLE_PATTERN = r"^[a-z][a-z0-9_]{0,47}\.[a-z][a-z0-9_]{0,47}$"
_TABLE = re.compile(TABLE_PATTERN)
#: Keyspaces whose tables Cassandra owns: their options are not the operator's to tune.
SYSTEM_KEYSPACES = frozenset(
    {"system", "system_schema", "system_auth", "system_distributed", "system_traces", "system_views",
     "system_virtual_schema", "system_cluster_metadata"}
)
#: Tables of one deployment.
MAX_TABLES = 256
#: The body fields only some kinds have (`DeploymentKind.body_fields`): shown for those kinds only.
KIND_FIELDS = ("server", "driver", "tables")


def check_tables(tables: list[str]) -> list[str]:
    """`keyspace.table` names: valid, not a system keyspace's, no duplicates (order kept)."""
    seen: list[str] = []
    for i, t in enumerate(tables):
        shown = t if len(t) <= 100 else t[:100] + "…"
        if not _TABLE.match(t):
            raise ValueError(
                f"tables[{i}]: {shown!r} is not keyspace.table (lower-case unquoted CQL names: a letter, then "
                "letters, digits or _, at most 48 characters each)"
            )
        if t.split(".", 1)[0] in SYSTEM_KEYSPACES:
            raise ValueError(f"tables[{i}]: {shown!r} is in a system keyspace (Cassandra owns its options)")
        if t in seen:
            raise ValueError(f"tables[{i}]: {shown!r} is listed twice")
        seen.append(t)
    return seen


def check_kind(value: object) -> str:
    """A registered deployment kind's name (`simulation.kinds.kind_names()`), refused as a `Literal` of them is:
    a `literal_error` listing them."""
    names = kind_names()
    if isinstance(value, str) and value in names:
        return value
    quoted = [repr(n) for n in names]
    expected = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    raise PydanticCustomError("literal_error", "Input should be {expected}", {"expected": expected})


def _kinds_enum(schema: dict[str, Any]) -> None:
    schema["enum"] = list(kind_names())


def check_timezone(value: str) -> str:
    shown = value if len(value) <= TIMEZONE_MAX else value[:TIMEZONE_MAX] + "…"
    problem = f"unknown time zone {shown!r} (use an IANA name such as Europe/Berlin)"
    if len(value) > TIMEZONE_MAX or not re.fullmatch(r"[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*", value):
        raise ValueError(problem)
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(problem) from exc
    return value


_R = INPUT_RANGES  # the one declaration of the model inputs' ranges (discovery and calibration check the same)
_D = topology_default  # the model's defaults (the simulator's), the one declaration of them


class Topology(RequestBody):
    """What the operator states about the cluster; every field may be left out (discovery reads the live system's,
    the model's defaults fill the rest, and the answer says which is which). A field's default is the model's
    (`topology_default`: the simulator's), shown here and never stored: only the fields given are declared."""

    servers: int | None = Field(default=_D("servers"), ge=_R["servers"].low, le=_R["servers"].high)
    slots: int = Field(
        default=_D("slots"), ge=_R["slots"].low, le=_R["slots"].high, description="Concurrent requests per server."
    )
    replication: int = Field(default=_D("replication"), ge=_R["replication"].low, le=_R["replication"].high)
    service_rate_per_s: float | None = Field(
        default=_D("service_rate_per_s"), gt=_R["service_rate_per_s"].low, description="Ops per second one slot serves."
    )
    network_ms: float = Field(default=_D("network_ms"), ge=_R["network_ms"].low, le=_R["network_ms"].high)

    @model_validator(mode="after")
    def _rf(self) -> Topology:
        given = self.model_fields_set
        if "servers" in given and "replication" in given and self.servers is not None \
                and self.replication > self.servers:
            raise ValueError("replication must not exceed servers")
        return self


class Connection(RequestBody):
    """Cassandra: contact_points + port + keyspace (+ username and password_env when the cluster authenticates).
    memcached: servers as host:port."""

    contact_points: list[Host] = Field(default_factory=list, max_length=MAX_ENDPOINTS)
    port: int = Field(default=9042, ge=1, le=65535)
    jmx_port: int | None = Field(
        default=None, ge=1, le=65535,
        description="Cassandra: the nodes' JMX port. Set, calibration measures the contact node's capacity (its "
        "CPU per request and per partition read, its cores, the host the nodes share, its GC pauses) over it, and "
        "a bound password is sent to it; a live replay whose configs differ in the dynamic snitch sets and "
        "restores the snitch on every node over it (unset: Cassandra's default 7199, without a login).",
    )
    keyspace: str = Field(default="tailtune", pattern=r"^[a-z][a-z0-9_]{0,47}$")
    servers: list[Host] = Field(default_factory=list, max_length=MAX_ENDPOINTS)
    username: str | None = Field(
        default=None, min_length=1, max_length=128, description="Cassandra: the role the publisher logs in as."
    )
    password_env: str | None = Field(
        default=None,
        pattern=r"^[A-Z_][A-Z0-9_]{0,63}$",
        description=(
            "Cassandra: the name of the environment variable, in the worker's (and API's) environment, that holds "
            "the password. The password itself is never sent to, stored or returned by tailtune."
        ),
    )

    @model_validator(mode="after")
    def _login(self) -> Connection:
        if (self.username is None) != (self.password_env is None):
            raise ValueError("username and password_env go together (a login needs both)")
        if self.servers and self.username is not None:
            raise ValueError("username, password_env: only a cassandra deployment logs in")
        if self.servers and self.jmx_port is not None:
            raise ValueError("jmx_port: only a cassandra deployment is read over JMX")
        return self

    @field_validator("servers")
    @classmethod
    def _hostports(cls, v: list[str]) -> list[str]:
        for s in v:
            if not _HOSTPORT.match(s):
                raise ValueError(f"{s!r} is not host:port")
            try:
                parse_server(s)  # the worker's own reading of it: the port in 1..65535
            except BadInputError:
                raise ValueError(f"{s!r} is not host:port with a port in 1..65535") from None
        return v


class Objective(RequestBody):
    metric: Literal["p50", "p95", "p99", "p999", "mean"] = "p99"
    min_improvement: float = Field(default=0.02, ge=0, le=1, description="Relative gain needed to accept.")


class Constraints(RequestBody):
    max_p50_ms: float | None = Field(default=None, gt=0)
    max_p99_ms: float | None = Field(default=None, gt=0)
    policies: list[PolicyName] | None = Field(
        default=None, max_length=MAX_ENDPOINTS, description="Allowed policy names (None: any)."
    )


class DeploymentCreate(RequestBody):
    name: str = Field(pattern=NAME_PATTERN)
    kind: str = Field(json_schema_extra=_kinds_enum)
    timezone: str = "UTC"
    topology: Topology = Field(
        default_factory=Topology,
        description="Optional: `tailtune deployments discover` reads servers, replication and slots from the "
        "connection; what is left out is shown as discovered or as a default.",
    )
    connection: Connection
    objective: Objective = Field(default_factory=Objective)
    constraints: Constraints = Field(default_factory=Constraints)
    current_config: dict[str, Any] | None = None
    server: Literal["stock", "rein-patched"] = Field(
        default="stock", description="Cassandra: what the nodes run (stock Cassandra, or a Rein-patched server)."
    )
    driver: Literal["java4", "python"] = Field(
        default="java4", description="Cassandra: the applications' driver (Java driver 4.x or cassandra-driver)."
    )
    tables: list[str] = Field(
        default_factory=list,
        max_length=MAX_TABLES,
        description="Cassandra: the keyspace.table names a stock config's speculative_retry is applied to.",
    )
    replay_allowed: bool = Field(
        default=False,
        description="The live replay (`tailtune replay`) may drive load at the deployment's live system (scratch "
        "tables or keys only). Admin-only: setting it needs an admin token (403 otherwise).",
    )
    confirm_on: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        description="The deployment (this one's own name, or a staging deployment of the same kind) at which a "
        "nightly replays current against recommended with the live replay before it publishes, and publishes only "
        "if the replay does not show the recommendation worse (docs/replay.md § confirm_on). That deployment must "
        "have `replay_allowed` (set by an admin); naming it needs a write token.",
    )

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, v: object) -> str:
        return check_kind(v)

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        return check_timezone(v)

    @field_validator("tables")
    @classmethod
    def _tables(cls, v: list[str]) -> list[str]:
        return check_tables(v)

    @model_validator(mode="after")
    def _connection_matches_kind(self) -> DeploymentCreate:
        """The kind's rules on its body fields and its connection (`DeploymentKind.check_body`,
        `check_connection`), each problem as `field: problem`."""
        ops = operations(self.kind)
        try:
            ops.check_body({"tables": self.tables, "server": self.server, "driver": self.driver}, creating=True)
            ops.check_connection(self.connection.model_dump())
        except Invalid as exc:
            raise ValueError(f"{exc.field}: {exc.detail}" if exc.field else exc.detail) from None
        return self


class DeploymentPatch(RequestBody):
    timezone: str | None = None
    topology: Topology | None = None
    connection: Connection | None = None
    objective: Objective | None = None
    constraints: Constraints | None = None
    current_config: dict[str, Any] | None = None
    server: Literal["stock", "rein-patched"] | None = None
    driver: Literal["java4", "python"] | None = None
    tables: list[str] | None = Field(default=None, max_length=MAX_TABLES)
    replay_allowed: bool | None = Field(default=None, description="Admin-only to set (a write token may clear it).")
    confirm_on: str | None = Field(
        default=None, pattern=NAME_PATTERN,
        description="The deployment a nightly confirms its recommendation on (docs/replay.md § confirm_on); null "
        "clears it.",
    )

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str | None) -> str | None:
        return None if v is None else check_timezone(v)

    @field_validator("tables")
    @classmethod
    def _tables(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else check_tables(v)


class DiscoverRequest(RequestBody):
    """POST /deployments/{id}/discover."""

    profile_servers: bool = Field(
        default=False,
        description="memcached: also profile the first server (multigets of 1..200 keys on scratch keys, deleted "
        "afterwards) for the client_overhead input. It writes to the server.",
    )


class DeploymentOut(BaseModel):
    id: int
    name: str
    kind: str
    timezone: str
    topology: dict[str, Any]
    connection: dict[str, Any]
    objective: dict[str, Any]
    constraints: dict[str, Any]
    current_config: dict[str, Any] | None
    publish_status: str
    publish_error: str | None
    created_at: datetime | None
    server: str
    driver: str
    tables: list[str]
    replay_allowed: bool = Field(default=False, description="The live replay may drive the deployment.")
    confirm_on: str | None = Field(
        default=None, description="The deployment a nightly confirms its recommendation on with the live replay."
    )
    sources: dict[str, str] = Field(
        default_factory=dict,
        description="Where each shown topology value (and a cassandra deployment's server and driver) comes from: "
        "declared, discovered, calibrated or default (control.model.SOURCES).",
    )
    defaults: list[str] = Field(default_factory=list, description="The fields of `sources` left at a default.")
    model: dict[str, Any] = Field(
        default_factory=dict,
        description="The deployment's model as found on the live system: inputs (value, source, time), readings, "
        "and the topology fields the operator set (docs/operations.md § The deployment's model).",
    )

    @model_serializer(mode="wrap")
    def _kind_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        kept = operations(self.kind).body_fields  # a server kind, a driver and tables: the kinds that have them
        for key in KIND_FIELDS:
            if key not in kept:
                out.pop(key, None)
        return out

    @classmethod
    def of(cls, r: DeploymentRow) -> DeploymentOut:
        from control.model import shown_topology

        topology, sources = shown_topology(r.kind, r.topology or {}, r.connection or {}, r.model or {})
        kept = operations(r.kind).body_fields
        given = set((r.model or {}).get("given") or ())
        for key, default in (("server", "stock"), ("driver", "java4")):
            if key in kept:
                value = getattr(r, key) or default
                sources[key] = "declared" if key in given or value != default else "default"
        return cls(
            id=r.id,
            name=r.name,
            kind=r.kind,
            timezone=r.timezone,
            topology=topology,
            sources=sources,
            defaults=[k for k, v in sources.items() if v == "default"],
            connection=r.connection,
            objective=r.objective,
            constraints=r.constraints,
            current_config=r.current_config,
            publish_status=r.publish_status,
            publish_error=r.publish_error,
            created_at=to_dt(r.created_at),
            server=r.server or "stock",
            driver=r.driver or "java4",
            tables=list(r.tables or []),
            replay_allowed=bool(r.replay_allowed),
            confirm_on=r.confirm_on,
            model=dict(r.model or {}),
        )
