"""Config versions: add (manual, tuning, rollback), latest, history, diff, publish jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tailtune.base.settings import Settings
from tailtune.control.common import now
from tailtune.control.configs_cache import latest_cache
from tailtune.control.db import ConfigVersionRow, DeploymentRow, JobRow
from tailtune.control.errors import Invalid, Missing
from tailtune.control.queue import enqueue

__all__ = [
    "ConfigDiff",
    "add_version",
    "diff",
    "flatten",
    "get_version",
    "history",
    "latest",
    "rollback",
    "schedule_publish",
    "validate_config",
]


class ConfigDiff(BaseModel):
    from_version: int
    to_version: int
    added: dict[str, Any]
    removed: dict[str, Any]
    changed: dict[str, dict[str, Any]]


def validate_config(config: dict[str, Any]) -> None:
    policy = config.get("policy")
    if not isinstance(policy, str) or not policy:
        raise Invalid("a config needs a 'policy' name", field="config.policy")
    if not isinstance(config.get("params", {}), dict):
        raise Invalid("must be an object", field="config.params")


def _deployment(s: Session, deployment_id: int) -> DeploymentRow:
    row = s.get(DeploymentRow, deployment_id)
    if row is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    return row


def add_version(
    s: Session,
    deployment_id: int,
    config: dict[str, Any],
    *,
    source: str,
    job_id: int | None = None,
    note: str | None = None,
) -> ConfigVersionRow:
    """Append the next version (1, 2, ...). Concurrent writers of one deployment queue on its row lock
    (`SELECT ... FOR UPDATE` on PostgreSQL; SQLite has one writer at a time anyway), and the unique
    (deployment, version) key is the safety net: a writer that still collides retries with the next number.
    """
    locked = s.scalar(select(DeploymentRow.id).where(DeploymentRow.id == deployment_id).with_for_update())
    if locked is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    validate_config(config)
    for _ in range(10):
        version = (
            s.scalar(
                select(func.max(ConfigVersionRow.version)).where(
                    ConfigVersionRow.deployment_id == deployment_id
                )
            )
            or 0
        ) + 1
        row = ConfigVersionRow(
            deployment_id=deployment_id,
            version=version,
            config=config,
            source=source,
            job_id=job_id,
            note=note,
            published={},
            created_at=now(),
        )
        try:
            with s.begin_nested():
                s.add(row)
                s.flush()
        except IntegrityError:
            continue
        latest_cache.drop(deployment_id)
        return row
    raise Invalid("too many concurrent config writes; retry", field="version")


def latest(s: Session, deployment_id: int) -> ConfigVersionRow:
    row = s.scalar(
        select(ConfigVersionRow)
        .where(ConfigVersionRow.deployment_id == deployment_id)
        .order_by(ConfigVersionRow.version.desc())
        .limit(1)
    )
    if row is None:
        _deployment(s, deployment_id)
        raise Missing(f"deployment {deployment_id} has no accepted config yet", field="deployment_id")
    return row


def get_version(s: Session, deployment_id: int, version: int) -> ConfigVersionRow:
    row = s.scalar(
        select(ConfigVersionRow).where(
            ConfigVersionRow.deployment_id == deployment_id, ConfigVersionRow.version == version
        )
    )
    if row is None:
        raise Missing(f"deployment {deployment_id} has no config version {version}", field="version")
    return row


def history(s: Session, deployment_id: int) -> Sequence[ConfigVersionRow]:
    _deployment(s, deployment_id)
    return s.scalars(
        select(ConfigVersionRow)
        .where(ConfigVersionRow.deployment_id == deployment_id)
        .order_by(ConfigVersionRow.version.desc())
    ).all()


def flatten(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} → {'a.b': 1}; lists and scalars are leaves."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, path + "."))
        else:
            out[path] = value
    return out


def diff(s: Session, deployment_id: int, a: int, b: int) -> ConfigDiff:
    old, new = (
        flatten(get_version(s, deployment_id, a).config),
        flatten(get_version(s, deployment_id, b).config),
    )
    return ConfigDiff(
        from_version=a,
        to_version=b,
        added={k: new[k] for k in sorted(new.keys() - old.keys())},
        removed={k: old[k] for k in sorted(old.keys() - new.keys())},
        changed={
            k: {"from": old[k], "to": new[k]} for k in sorted(old.keys() & new.keys()) if old[k] != new[k]
        },
    )


def schedule_publish(s: Session, settings: Settings, deployment_id: int, version: int) -> JobRow:
    get_version(s, deployment_id, version)
    return enqueue(s, settings, "publish", {"version": version}, deployment_id=deployment_id)


def rollback(s: Session, deployment_id: int, version: int, note: str | None) -> ConfigVersionRow:
    """Rolling back = a new latest version carrying an earlier version's config (targets only move forward).
    """
    old = get_version(s, deployment_id, version)
    return add_version(
        s, deployment_id, dict(old.config), source="rollback", note=note or f"rollback to version {version}"
    )
