"""Config versions: add (manual, tuning, rollback), latest, history, diff, publish jobs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from base.errors import BadInputError
from base.settings import Settings, get_settings
from control.common import now
from control.configs_cache import latest_cache
from control.db import ConfigVersionRow, DeploymentRow, JobRow
from control.errors import Invalid, Missing, PayloadTooLarge
from control.kinds import operations
from control.queue import enqueue

__all__ = [
    "ConfigDiff",
    "add_version",
    "applies_to",
    "config_bytes",
    "diff",
    "flatten",
    "get_version",
    "history",
    "latest",
    "rollback",
    "same_config",
    "schedule_publish",
    "validate_config",
    "with_rendering",
]


class ConfigDiff(BaseModel):
    from_version: int
    to_version: int
    added: dict[str, Any]
    removed: dict[str, Any]
    changed: dict[str, dict[str, Any]]


def config_bytes(config: Any) -> int:
    """The size of a config as stored and published: canonical JSON."""
    return len(json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=True).encode())


def _invalid(exc: BadInputError) -> Invalid:
    p = exc.problems[0]
    field = p.field or "config"
    return Invalid(f"{field}: {p.problem}", field=field)


def validate_config(
    config: Any, kind: str, max_bytes: int, *, driver: str | None = None, max_depth: int | None = None
) -> dict[str, Any]:
    """A config must be a tree the stores and the API can hold (no NaN or Infinity, at most `max_depth` levels,
    default the setting `config_max_depth`: checked first, without recursion), fit in `max_bytes`, and pass the
    simulation layer's one check (`simulation.config_check.check_config`): a real policy of the
    deployment's kind with parameters inside the registry's ranges, stock knobs inside their rows and valid for
    `driver`, a target the clients accept. Raises Invalid (422) / PayloadTooLarge (413) naming the field."""
    from simulation.config_check import check_config, check_tree

    depth = max_depth if max_depth is not None else get_settings().config_max_depth
    if not isinstance(config, dict):
        raise Invalid("config: must be an object", field="config")
    try:
        check_tree(config, max_depth=depth)
        size = config_bytes(config)
        if size > max_bytes:
            raise PayloadTooLarge(
                f"config is {size} bytes; the limit is {max_bytes} (config_max_bytes)", field="config"
            )
        return check_config(config, kind, max_depth=depth, driver=driver)
    except BadInputError as exc:
        raise _invalid(exc) from None


def same_config(a: dict[str, Any], b: dict[str, Any], dep: DeploymentRow) -> bool:
    """Whether two configs of `dep` are identical: equal in their kind's normal form
    (`simulation.config_check.canonical_config`: `99p` ≡ `99PERCENTILE`, `NEVER` ≡ `NONE`, case, defaults filled
    in; `canary_fraction` aside). A config that no longer passes the checks is identical to none."""
    from simulation.config_check import canonical_config

    depth = get_settings().config_max_depth
    try:
        return bool(canonical_config(a, dep.kind, max_depth=depth, driver=dep.driver)
                    == canonical_config(b, dep.kind, max_depth=depth, driver=dep.driver))
    except BadInputError:
        return False


def applies_to(dep: DeploymentRow) -> dict[str, Any] | None:
    """What a version of `dep` is made for (its kind's `applies_to`: a Cassandra deployment's server, driver and
    tables; None when nothing beyond the config)."""
    return operations(dep.kind).applies_to(dep)


def with_rendering(config: dict[str, Any], dep: DeploymentRow) -> dict[str, Any]:
    """`config` with what the deployment's clients need to apply it (its kind's `rendered`: a Cassandra config
    that sets stock knobs without the tuner's rendering gets it in `target`); other configs are unchanged."""
    return operations(dep.kind).rendered(config, dep)


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
    settings: Settings,
    source: str,
    job_id: int | None = None,
    note: str | None = None,
) -> ConfigVersionRow:
    """Append the next version (1, 2, ...). Concurrent writers of one deployment queue on its row lock
    (`SELECT ... FOR UPDATE` on PostgreSQL; SQLite has one writer at a time anyway), and the unique
    (deployment, version) key is the safety net: a writer that still collides retries with the next number.
    """
    dep = s.scalar(select(DeploymentRow).where(DeploymentRow.id == deployment_id).with_for_update())
    if dep is None:
        raise Missing(f"deployment {deployment_id} not found", field="deployment_id")
    validate_config(
        config, dep.kind, settings.config_max_bytes, driver=dep.driver, max_depth=settings.config_max_depth
    )
    config = with_rendering(config, dep)
    validate_config(
        config, dep.kind, settings.config_max_bytes, driver=dep.driver, max_depth=settings.config_max_depth
    )
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
            applies_to=applies_to(dep),
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


def history(s: Session, deployment_id: int, *, limit: int = 100, offset: int = 0) -> Sequence[ConfigVersionRow]:
    _deployment(s, deployment_id)
    return s.scalars(
        select(ConfigVersionRow)
        .where(ConfigVersionRow.deployment_id == deployment_id)
        .order_by(ConfigVersionRow.version.desc())
        .limit(limit)
        .offset(offset)
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


def _diffable(row: ConfigVersionRow) -> dict[str, Any]:
    out = flatten(row.config)
    if row.applies_to:
        out.update(flatten({"applies_to": row.applies_to}))
    return out


def diff(s: Session, deployment_id: int, a: int, b: int) -> ConfigDiff:
    """Flat keys of the two configs, and `applies_to.server`, `.driver`, `.tables` (the deployment's settings
    each version was made for) where the versions record them."""
    old, new = _diffable(get_version(s, deployment_id, a)), _diffable(get_version(s, deployment_id, b))
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


def rollback(
    s: Session, settings: Settings, deployment_id: int, version: int, note: str | None
) -> ConfigVersionRow:
    """Rolling back = a new latest version carrying an earlier version's config (targets only move forward), with
    what the deployment's kind adds so that publishing it restores what was in force at `version`
    (`DeploymentKind.rollback_config`: Cassandra names, in `target.table_options`, the value each of the
    deployment's tables had then, from what the publisher recorded).

    A rollback runs on every request: the earlier config's `canary_fraction`, if any, is not copied.
    """
    old = get_version(s, deployment_id, version)
    dep = _deployment(s, deployment_id)
    config = {k: v for k, v in old.config.items() if k != "canary_fraction"}

    def published() -> list[tuple[int, Any]]:
        """(version, the publisher's record of it) of every version of the deployment."""
        records = s.execute(
            select(ConfigVersionRow.version, ConfigVersionRow.published).where(
                ConfigVersionRow.deployment_id == deployment_id
            )
        ).all()
        return [(int(v), (p or {}).get(dep.kind, {})) for v, p in records]

    config = operations(dep.kind).rollback_config(config, version, dep, published)
    return add_version(
        s,
        deployment_id,
        config,
        settings=settings,
        source="rollback",
        note=note or f"rollback to version {version}",
    )
