"""Applies the driver side of a published stock Cassandra config in a Python application: a cassandra-driver
`ExecutionProfile` built from it.

Two lines (the `cassandra` extra: `pip install "tailtune-client[cassandra]"`):

    from tailtune_client.cassandra import execution_profile
    cluster = Cluster(hosts, execution_profiles={EXEC_PROFILE_DEFAULT: execution_profile(CONFIG_URL, token=TOKEN)})

`CONFIG_URL` is the service's `GET /api/v1/configs/{deployment_id}`; the config is fetched with `If-None-Match`
(`tailtune_client.config.HttpConfigSource`). The profile has:

- `load_balancing_policy = TokenAwarePolicy(child, shuffle_replicas=<published>)` (child: the application's
  policy, default `DCAwareRoundRobinPolicy()`);
- `speculative_execution_policy = ConstantSpeculativeExecutionPolicy(delay, max_attempts)` when the config
  speculates (`delay` in seconds; `max_attempts` counts only the extra executions), else
  `NoSpeculativeExecutionPolicy()`.

The driver speculates only on statements marked idempotent, and statements default to non-idempotent: mark the
reads (`SimpleStatement(..., is_idempotent=True)`, `prepared.is_idempotent = True`), or the speculative execution
setting has no effect.

Where the settings come from in a published config: `config.target.driver.python` (what the service renders:
tuned when the deployment's driver is `python`; otherwise the same speculative execution at the Python driver's
defaults for the rest); a config without it is read from its params (`driver.shuffle_replicas`,
`driver.speculative_execution.delay` in ms, `driver.speculative_execution.max_executions` counting the first),
unset ones at the Python driver's defaults (no shuffling, no speculative execution).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tailtune_client.config import ConfigError, ConfigSourceError, HttpConfigSource, json_object

__all__ = [
    "DriverSettings",
    "build_profile",
    "execution_profile",
    "fetch_settings",
    "parse_driver_settings",
    "update_profile",
]


@dataclass(frozen=True, slots=True)
class DriverSettings:
    """The Python driver settings of one published config version."""

    shuffle_replicas: bool
    #: Seconds before each speculative execution (None: no speculative execution).
    delay_s: float | None
    #: Extra executions (the Python driver's `max_attempts`; 0 with `delay_s` None).
    max_attempts: int
    version: int | None = None
    deployment_id: int | None = None

    @property
    def speculates(self) -> bool:
        return self.delay_s is not None and self.max_attempts > 0


def _number(value: Any, what: str, where: str, *, integer: bool = False, low: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < low:
        raise ConfigError(f"{where}: {what} must be a number >= {low:g}, got {value!r}")
    if integer and int(value) != value:
        raise ConfigError(f"{where}: {what} must be an integer, got {value!r}")
    return float(value)


def _from_block(block: Mapping[str, Any], where: str) -> tuple[bool, float | None, int]:
    lb = block.get("load_balancing") or {}
    if not isinstance(lb, Mapping):
        raise ConfigError(f"{where}: driver.python.load_balancing must be an object")
    shuffle = lb.get("shuffle_replicas", False)
    if not isinstance(shuffle, bool):
        raise ConfigError(f"{where}: driver.python.load_balancing.shuffle_replicas must be true/false")
    spec = block.get("speculative_execution")
    if spec is None:
        return shuffle, None, 0
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where}: driver.python.speculative_execution must be an object or null")
    delay = _number(spec.get("delay"), "speculative_execution.delay", where)
    attempts = int(_number(spec.get("max_attempts"), "speculative_execution.max_attempts", where, integer=True))
    return shuffle, (delay if attempts > 0 else None), attempts


def _from_params(params: Mapping[str, Any], where: str) -> tuple[bool, float | None, int]:
    shuffle = params.get("driver.shuffle_replicas", 0)
    if shuffle not in (0, 1, True, False):
        raise ConfigError(f"{where}: params.driver.shuffle_replicas must be 0 or 1, got {shuffle!r}")
    execs = int(
        _number(params.get("driver.speculative_execution.max_executions", 1), "max_executions", where, integer=True,
                low=1)
    )
    delay_ms = _number(params.get("driver.speculative_execution.delay", 0.0), "delay", where)
    if execs <= 1:
        return bool(shuffle), None, 0
    return bool(shuffle), round(delay_ms / 1000.0, 9), execs - 1


def parse_driver_settings(doc: Mapping[str, Any] | str | bytes) -> DriverSettings:
    """The driver settings of a published config: the service's answer (`{"deployment_id", "version",
    "config"}`), the Cassandra publisher's document (`{"deployment", "version", "config"}`) or a bare config.
    `ConfigError` names what is wrong (for example a rendering with Java settings only)."""
    doc = json_object(doc)
    version = doc.get("version") if isinstance(doc.get("version"), int) else None
    dep_id = doc.get("deployment_id") if isinstance(doc.get("deployment_id"), int) else None
    body: Mapping[str, Any] = doc["config"] if isinstance(doc.get("config"), Mapping) else doc
    where = "config" if version is None else f"config version {version}"
    raw_target = body.get("target")
    target: Mapping[str, Any] = raw_target if isinstance(raw_target, Mapping) else {}
    raw_driver = target.get("driver")
    driver: Mapping[str, Any] | None = raw_driver if isinstance(raw_driver, Mapping) else None
    if driver is not None and driver.get("python") is None and driver.get("java") is not None:
        raise ConfigError(
            f"{where}: rendered for the Java driver 4 only (target.driver.python is null)"
        )
    if driver is not None and isinstance(driver.get("python"), Mapping):
        shuffle, delay, attempts = _from_block(driver["python"], where)
    else:
        raw_params = body.get("params")
        params: Mapping[str, Any] = raw_params if isinstance(raw_params, Mapping) else {}
        shuffle, delay, attempts = _from_params(params, where)
    return DriverSettings(shuffle, delay, attempts, version=version, deployment_id=dep_id)


def _driver() -> Any:
    try:
        import cassandra.policies as policies
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            'tailtune_client.cassandra needs the Cassandra driver: pip install "tailtune-client[cassandra]"'
        ) from exc
    return policies


def _policies(settings: DriverSettings, child_policy: Any | None) -> tuple[Any, Any]:
    p = _driver()
    child = child_policy if child_policy is not None else p.DCAwareRoundRobinPolicy()
    lb = p.TokenAwarePolicy(child, shuffle_replicas=settings.shuffle_replicas)
    if settings.speculates:
        assert settings.delay_s is not None
        spec = p.ConstantSpeculativeExecutionPolicy(settings.delay_s, settings.max_attempts)
    else:
        spec = p.NoSpeculativeExecutionPolicy()
    return lb, spec


def build_profile(settings: DriverSettings, *, child_policy: Any | None = None, **profile_kwargs: Any) -> Any:
    """A cassandra-driver `ExecutionProfile` with the settings' load balancing and speculative execution;
    `profile_kwargs` (consistency_level, request_timeout, ...) are passed through."""
    from cassandra.cluster import ExecutionProfile

    lb, spec = _policies(settings, child_policy)
    return ExecutionProfile(load_balancing_policy=lb, speculative_execution_policy=spec, **profile_kwargs)


def update_profile(profile: Any, settings: DriverSettings) -> None:
    """Apply newer settings to a profile a running Cluster already uses: the speculative execution policy is
    replaced (the driver reads it per request) and the token-aware policy's shuffling is switched in place."""
    _, spec = _policies(settings, None)
    profile.speculative_execution_policy = spec
    lb = profile.load_balancing_policy
    if isinstance(lb, _driver().TokenAwarePolicy):
        lb.shuffle_replicas = settings.shuffle_replicas


def fetch_settings(source: HttpConfigSource) -> DriverSettings | None:
    """The settings of the published config, or None when it did not change since the last fetch (ETag)."""
    return source.fetch_parsed(parse_driver_settings)


def execution_profile(
    config_url: str,
    *,
    token: str | None = None,
    timeout_s: float = 5.0,
    child_policy: Any | None = None,
    **profile_kwargs: Any,
) -> Any:
    """Fetch the published config from the service (`GET /api/v1/configs/{id}`) and build its
    `ExecutionProfile`. Raises ConfigSourceError when the service does not answer with a config."""
    source = HttpConfigSource(config_url, token, timeout_s)
    try:
        settings = fetch_settings(source)
    finally:
        source.close()
    if settings is None:  # pragma: no cover - a first GET sends no If-None-Match
        raise ConfigSourceError(f"GET {config_url}: no config")
    return build_profile(settings, child_policy=child_policy, **profile_kwargs)
