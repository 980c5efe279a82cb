"""SQLAlchemy 2 models of the metadata DB. Times are UNIX epoch seconds (float): portable and easy to compare.

The schema itself is created by the alembic migrations in `control/db/migrations` (kept in step with these
models; `tests/control/test_db.py` checks they agree).
"""

from __future__ import annotations

import secrets
from typing import Any, ClassVar

from sqlalchemy import JSON, BigInteger, Boolean, Float, ForeignKey, Integer, String, Text, UniqueConstraint, false
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "AnalysisRow",
    "ApiTokenRow",
    "Base",
    "ConfigVersionRow",
    "DeploymentGrantRow",
    "DeploymentRow",
    "FidelityRecordRow",
    "JobRow",
    "ScheduleRow",
    "TraceRow",
    "WorkerRow",
]


#: SQLite reuses the highest id after its row is deleted unless the table is AUTOINCREMENT: ids here are
#: never reused (a job keeps pointing at its own trace). PostgreSQL's sequences never reuse anyway.
_AUTOINCREMENT: dict[str, Any] = {"sqlite_autoincrement": True}


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class DeploymentRow(Base):
    __tablename__ = "deployments"
    __table_args__ = _AUTOINCREMENT

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    timezone: Mapped[str] = mapped_column(String(64))
    topology: Mapped[dict[str, Any]] = mapped_column(JSON)
    connection: Mapped[dict[str, Any]] = mapped_column(JSON)
    objective: Mapped[dict[str, Any]] = mapped_column(JSON)
    constraints: Mapped[dict[str, Any]] = mapped_column(JSON)
    current_config: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    publish_status: Mapped[str] = mapped_column(String(16), default="none")
    publish_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    #: What the cluster runs: `stock` Cassandra (the default) or a `rein-patched` server (cassandra only).
    server: Mapped[str] = mapped_column(String(16), default="stock", server_default="stock")
    #: The applications' driver: `java4` (the default) or `python` (cassandra only).
    driver: Mapped[str] = mapped_column(String(16), default="java4", server_default="java4")
    #: The tables a stock config's per-table options (speculative_retry) are applied to, as `keyspace.table`.
    tables: Mapped[list[Any]] = mapped_column(JSON, default=list, server_default="[]")
    #: The deployment's model as found on the live system (`control.model`): `inputs` (name → value,
    #: source, time), `readings` (what discovery read), `declared` (the topology fields the deployment declares).
    model: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, server_default="{}")
    #: Drawn at creation; with the id, the deployment's identity (what its published Cassandra rows are keyed by).
    nonce: Mapped[str] = mapped_column(String(32), default=lambda: secrets.token_hex(8), server_default="")
    #: The live replay may drive this deployment's live system (`control.replay`): an admin-only attribute
    #: (`control.grants.REPLAY_ALLOWED`), acted on only while its record in `deployment_grants` agrees.
    replay_allowed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    #: The deployment (this one, or a staging deployment of the same kind) at which a nightly confirms its
    #: recommendation with the live replay before publishing it (`jobs/confirm.py`); None: no confirmation.
    confirm_on: Mapped[str | None] = mapped_column(String(64), nullable=True)

    @property
    def identity(self) -> str:
        """`<id>.<nonce>`: never the same for two deployments, even of the same name or id (see `nonce`)."""
        return self.identity_of(self.id, self.nonce)

    @staticmethod
    def identity_of(deployment_id: int, nonce: str) -> str:
        return f"{deployment_id}.{nonce}"


class TraceRow(Base):
    __tablename__ = "traces"
    __table_args__ = _AUTOINCREMENT

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    deployment_id: Mapped[int | None] = mapped_column(
        ForeignKey("deployments.id", ondelete="SET NULL"), nullable=True, index=True
    )
    format: Mapped[str] = mapped_column(String(32))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))  # uploaded | ingesting | ready | failed
    upload_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    dataset_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    job_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)


class AnalysisRow(Base):
    __tablename__ = "analyses"
    __table_args__ = _AUTOINCREMENT

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trace_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    dataset_id: Mapped[str] = mapped_column(String(64))
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))  # queued | running | succeeded | failed
    out_dir: Mapped[str] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    job_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)


class JobRow(Base):
    """One unit of work in the durable queue. `dedupe_key` is unique: a cron slot enqueues at most one job."""

    __tablename__ = "jobs"
    __table_args__ = _AUTOINCREMENT

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    deployment_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), index=True)  # queued|running|succeeded|failed|cancelled
    dedupe_key: Mapped[str | None] = mapped_column(String(200), unique=True, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    run_after: Mapped[float] = mapped_column(Float)
    lease_owner: Mapped[str | None] = mapped_column(String(100), nullable=True)
    lease_expires: Mapped[float | None] = mapped_column(Float, nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    steps: Mapped[list[Any]] = mapped_column(JSON)
    logs: Mapped[str] = mapped_column(Text, default="")
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    mlflow_run_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class ScheduleRow(Base):
    __tablename__ = "schedules"
    __table_args__ = _AUTOINCREMENT

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    deployment_id: Mapped[int] = mapped_column(ForeignKey("deployments.id", ondelete="CASCADE"), index=True)
    cron: Mapped[str] = mapped_column(String(100))
    timezone: Mapped[str] = mapped_column(String(64))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    traces: Mapped[int] = mapped_column(Integer, default=1)
    #: None: the nightly job ingests the newest uploaded trace(s); {"duration_s": N}: it captures memcached for N s.
    capture: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    last_slot: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)


class ConfigVersionRow(Base):
    """An accepted config of a deployment. Versions are 1, 2, ... per deployment and their configs never change
    once written (`published` and `verification` record what happened to them).
    """

    __tablename__ = "config_versions"
    __table_args__ = (
        UniqueConstraint("deployment_id", "version", name="uq_config_version"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    deployment_id: Mapped[int] = mapped_column(ForeignKey("deployments.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    source: Mapped[str] = mapped_column(String(32))  # tuning | manual | rollback | promotion
    job_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    published: Mapped[dict[str, Any]] = mapped_column(JSON)  # {"cassandra": epoch} per successful target
    created_at: Mapped[float] = mapped_column(Float)
    #: The deployment's server, driver and tables when this version was added (what it was made for; None for
    #: versions written before deployments had them).
    applies_to: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: What the verify step found after the version was published (`control.verify`): status, test,
    #: figures before/after/expected, reason, time; None until the version is checked or given an expectation.
    verification: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: The figures the version was published on: `{"confirm": ...}`, the headline of the live replay a nightly
    #: ran at the deployment's `confirm_on` (`jobs/confirm.py`); None when nothing but the model stood behind it.
    evidence: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class ObservationRow(Base):
    """What one client observed for one config version in one report window (its histograms, as sent). A
    resent window (same client, same start) replaces the earlier row: reports are idempotent."""

    __tablename__ = "observations"
    __table_args__ = (
        UniqueConstraint("deployment_id", "client_id", "window_start", "config_version", name="uq_observation"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    deployment_id: Mapped[int] = mapped_column(ForeignKey("deployments.id", ondelete="CASCADE"), index=True)
    client_id: Mapped[str] = mapped_column(String(64))
    window_start: Mapped[float] = mapped_column(Float)
    window_end: Mapped[float] = mapped_column(Float)
    config_version: Mapped[int] = mapped_column(Integer)
    observation: Mapped[dict[str, Any]] = mapped_column(JSON)
    received_at: Mapped[float] = mapped_column(Float)


class FidelityRecordRow(Base):
    """One live replay's report (`control.replay.ReplayReport.as_dict()`) of a deployment, kept for the model's
    fidelity on it (`control.fidelity_store`); the columns beside `report` are read off it when it is stored."""

    __tablename__ = "fidelity_records"
    __table_args__ = _AUTOINCREMENT

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    deployment_id: Mapped[int] = mapped_column(ForeignKey("deployments.id", ondelete="CASCADE"), index=True)
    #: The job that ran the replay (a `replay` job, a nightly's confirm step); None from the CLI.
    job_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    source: Mapped[str] = mapped_column(String(16))  # replay | confirm | cli
    #: When the replay ran (the report's `at`, epoch seconds).
    at: Mapped[float] = mapped_column(Float, index=True)
    report: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: Why the report is kept but not pooled into the fidelity (`lag_too_high`); None: pooled.
    flag: Mapped[str | None] = mapped_column(String(32), nullable=True)
    arms: Mapped[int] = mapped_column(Integer)
    duration_s: Mapped[float] = mapped_column(Float)
    blocks: Mapped[int] = mapped_column(Integer)
    #: This replay's sign agreement on p99: k of the m pairs whose interval resolved a difference.
    agree_k: Mapped[int] = mapped_column(Integer)
    agree_m: Mapped[int] = mapped_column(Integer)
    #: A resolved pair on which the model's predicted difference had the other sign (a finding, not an error).
    contradicts: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)


class ApiTokenRow(Base):
    __tablename__ = "api_tokens"
    __table_args__ = _AUTOINCREMENT

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    scope: Mapped[str] = mapped_column(String(8))  # read | write | report | admin
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    #: A report token's deployments (names) it may report for; None: any (tokens of the other scopes).
    deployments: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)


class DeploymentGrantRow(Base):
    """An admin-only attribute of a deployment as an admin token set it (`control.grants`): what the
    worker checks the deployment's row against before it acts on the attribute."""

    __tablename__ = "deployment_grants"
    __table_args__ = (UniqueConstraint("deployment_id", "attribute"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    deployment_id: Mapped[int] = mapped_column(ForeignKey("deployments.id", ondelete="CASCADE"), index=True)
    attribute: Mapped[str] = mapped_column(String(64))
    value: Mapped[Any] = mapped_column(JSON)
    granted_by: Mapped[str] = mapped_column(String(100))
    granted_at: Mapped[float] = mapped_column(Float)


class WorkerRow(Base):
    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    heartbeat_at: Mapped[float] = mapped_column(Float)
    current_job_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
