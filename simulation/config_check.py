"""One check of a scheduler config and of a policy's parameters, shared by everything that accepts them: the API
and the worker (`control.configs.validate_config`: config versions, a deployment's `current_config`),
the CLI (`simulate --param` / `--replica-param` before the trace is read; `deployments create`), so the replays of
a stored config (the nightly's baseline) and the clients that run it meet only values they accept.

- **The tree** (`check_tree`): no NaN or Infinity anywhere (Python's JSON parser takes them; PostgreSQL's JSONB
  refuses them, SQLite stores them as null), and nesting at most `config_max_depth` levels (objects and lists;
  the config itself is level 1) — checked without recursion, before anything else walks the config.
- **Parameters** (`check_params`) against the registry's own declarations (`simulation.registry`: kvsim's
  policies, replica selectors, coordinator section and memcached policies): every number finite and within the
  declared valid range, whole where the parameter is an integer; unknown names refused (`policies.resolve`). The
  stock knobs are checked against their rows (`stock_knobs`: kind, the driver's or Cassandra's own bounds, the
  deployment's driver), then the kvsim parameter each one sets against kvsim's range.
- **The target** (`check_config`). memcached: the `memcached_client` block the client runs — the target's, else
  `{"mode": policy, **params}`, as `tailtune_client.config.parse_config` finds it — must be complete and valid
  (the client has no defaults); the client's own parser runs last, so what it refuses is refused here. Cassandra:
  `target.table_options` (each table option's row: `speculative_retry`'s grammar) and `target.driver.python` as
  `tailtune_client.cassandra` reads it.

What differs per deployment kind is that kind's `KindChecks` (its parameters, its target), found through the
registry (`simulation.kinds`: the kind's `checks`); the policy names a config may give are the kind's `policies`.

Errors are `BadInputError`s naming the field: `config.params.k` for a config (file `config`), the parameter for
the CLI (file `--param`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from base.errors import BadInputError
from simulation.kinds import ModelKind, find_kind, resolve_ref
from simulation.memcached import MEMCACHED_POLICIES
from simulation.policies import NO_COORDINATOR, STRING_PARAMS, resolve
from simulation.stock import STOCK_POLICY
from simulation.stock_appliers import SNITCH, TABLE, applier
from simulation.stock_knobs import DRIVER_DEFAULT, DRIVERS, STOCK_KNOBS, driver_refusal, knob

if TYPE_CHECKING:
    from kvsim import ParamSpec, PolicySpec

__all__ = [
    "CASSANDRA_CHECKS",
    "CONFIG_KEYS",
    "MEMCACHED_CHECKS",
    "NAME_MAX",
    "TABLE_OPTIONS",
    "KindChecks",
    "Where",
    "canonical_config",
    "check_config",
    "check_params",
    "check_tree",
    "kind_checks",
]

#: The keys of a config: the policy, its parameters, and the tuner's rendering for the target (`target`).
#: The keys of a config: the policy, its parameters, the tuner's rendering for the target (`target`), and the
#: fraction of requests the clients run it on first while the version before keeps the rest (`canary_fraction`).
CONFIG_KEYS = ("policy", "params", "target", "canary_fraction")
#: The longest name (policy, replica, queue, driver, speculative_retry text).
NAME_MAX = 64
#: The key under a Cassandra config's `target` that names per-table options explicitly.
TABLE_OPTIONS = "table_options"
#: The longest key of a path in an error (the rest is cut).
_KEY_SHOWN = 64


@dataclass(frozen=True)
class Where:
    """How errors name things: a config's `config.params.k` (file `config`), or the CLI's `--param` with field
    `k` (a kind's checks raise through `param` and `policy`)."""

    file: str
    prefix: str
    policy_file: str
    policy_field: str
    replica_file: str

    def param(self, name: str, problem: str, *, replica: bool = False) -> BadInputError:
        return BadInputError.single(self.replica_file if replica else self.file, problem, field=self.prefix + name)

    def policy(self, problem: str) -> BadInputError:
        return BadInputError.single(self.policy_file, problem, field=self.policy_field)


_CONFIG = Where("config", "config.params.", "config", "config.policy", "config")
_CLI = Where("--param", "", "--policy", "policy", "--replica-param")


def _shown(value: object) -> str:
    whole = isinstance(value, float) and value.is_integer() and abs(value) < 1e16
    text = str(int(value)) if isinstance(value, float) and whole else repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _num(x: float) -> str:
    """A bound as the messages state it: whole numbers in full (4294967295), others as `%g`."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def _number(value: object) -> bool:
    """A JSON number that is finite (true/false are not numbers; nor is an int beyond every float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _not_a_number(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"out of range: larger than any float, got {_shown(value)}"
    return f"must be a finite number, got {_shown(value)}"


def _child(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    return f"{path}.{text if len(text) <= _KEY_SHOWN else text[:_KEY_SHOWN] + '…'}"


def check_tree(value: object, *, max_depth: int, root: str = "config") -> None:
    """No NaN or Infinity anywhere in `value`, and no object or list nested deeper than `max_depth` levels (`value`
    itself is level 1). Iterative, so it is safe on any depth the JSON parser produced; raises a BadInputError
    naming the path (`config.target.a[0].b`)."""
    stack: list[tuple[object, str, int]] = [(value, root, 1)]
    while stack:
        v, path, depth = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise BadInputError.single(
                root, f"must be a finite number, got {v!r} (NaN and Infinity are not JSON)", field=path
            )
        if isinstance(v, dict | list):
            if depth > max_depth:
                raise BadInputError.single(
                    root, f"nested deeper than {max_depth} levels (config_max_depth)", field=path
                )
            items = v.items() if isinstance(v, dict) else enumerate(v)
            stack.extend((child, _child(path, k), depth + 1) for k, child in items)


def _expected(p: ParamSpec) -> str:
    """What parameter `p` takes, as an error states it: `an integer in [1, 64]`."""
    if p.domain == "integer":
        return f"an integer in [{_num(p.low)}, {_num(p.high)}]"
    if p.domain == "rounded":
        return f"a number in [{_num(p.low)}, {_num(p.high)}] (rounded to a whole number)"
    valid = p.valid if p.valid[:1] in "[(" else f"[{_num(p.low)}, {_num(p.high)}]"
    return f"a finite number in {valid}"


def _spec_refusal(p: ParamSpec, value: object) -> str | None:
    """Why `value` is not a valid value of registry parameter `p` (None: it is)."""
    ok = _number(value) and p.low <= value <= p.high  # type: ignore[operator]
    if ok and p.domain == "integer" and isinstance(value, float):
        ok = value.is_integer()
    return None if ok else f"must be {_expected(p)}, got {_shown(value)}"


# ---------------------------------------------------------------------------------------------------- memcached


def _memcached_spec(policy: str, where: Where) -> PolicySpec:
    from simulation.registry import memcached_policy_specs

    specs = {s.name: s for s in memcached_policy_specs()}
    if policy not in specs or policy not in MEMCACHED_POLICIES:
        raise where.policy(f"unknown memcached policy {_shown(policy)} (one of {', '.join(MEMCACHED_POLICIES)})")
    return specs[policy]


def _memcached_params(policy: str, params: Mapping[str, Any], where: Where) -> None:
    spec = _memcached_spec(policy, where)
    allowed = {p.name: p for p in spec.params}
    for name, value in params.items():
        p = allowed.get(name)
        if p is None:
            valid = ", ".join(allowed) or "none"
            raise where.param(name, f"unknown parameter {name!r} of memcached policy {policy!r} (valid: {valid})")
        why = _spec_refusal(p, value)
        if why is not None:
            raise where.param(name, why)
    if "split_keys" in params and "split_chunks" in params:
        raise where.param("split_chunks", "give split_keys or split_chunks, not both")


def _memcached_target(config: Mapping[str, Any], policy: str, params: Mapping[str, Any]) -> None:
    """The `memcached_client` block the client will run (as `parse_config` finds it) is complete and valid."""
    from tailtune_client.config import CHISEL_KEYS, MODES, ConfigError, parse_config

    target = config.get("target") or {}
    holder = target.get("json")
    if "json" in target and not isinstance(holder, dict):
        raise BadInputError.single("config", "must be an object", field="config.target.json")
    if isinstance(holder, dict) and "memcached_client" in holder:
        path = "config.target.json.memcached_client"
        block = holder["memcached_client"]
        if not isinstance(block, dict):
            raise BadInputError.single("config", "must be an object", field=path)
        mode_field = f"{path}.mode"
    else:  # no rendering: the client runs {"mode": policy, **params}
        path, block, mode_field = "config.params", {"mode": policy, **params}, "config.policy"
    mode = block.get("mode")
    if mode not in MODES:
        raise BadInputError.single(
            "config", f"must be a mode the client runs ({', '.join(MODES)}), got {_shown(mode)}", field=mode_field
        )
    if mode == "chisel":
        specs = {p.name: p for p in _memcached_spec("chisel", _CONFIG).params}
        for key in CHISEL_KEYS:
            if key not in block:
                hint = ""
                if key == "split_keys" and "split_chunks" in block:
                    hint = "; the client splits by chunk size only (split_keys), it has no split_chunks"
                raise BadInputError.single(
                    "config",
                    f"missing: mode 'chisel' needs {', '.join(CHISEL_KEYS)} (the client has no defaults{hint})",
                    field=f"{path}.{key}",
                )
            why = _spec_refusal(specs[key], block[key])
            if why is not None:
                raise BadInputError.single("config", why, field=f"{path}.{key}")
    try:  # the client's own parser, last: whatever it refuses is refused here too
        parse_config(dict(config))
    except ConfigError as exc:
        raise BadInputError.single("config", f"the client refuses it: {exc}", field=path) from None


# ---------------------------------------------------------------------------------------------------- Cassandra


def _effective_driver(params: Mapping[str, Any], driver: str | None) -> str:
    given = params.get("driver")
    return driver or (given if isinstance(given, str) and given in DRIVERS else DRIVER_DEFAULT)


def _cassandra_values(
    params: Mapping[str, Any], replica_params: Mapping[str, Any], driver: str | None, where: Where
) -> None:
    """Each value's type (names are text, the rest finite numbers), each stock knob against its row and the
    driver, before `resolve` reads them."""
    drv = _effective_driver(params, driver)
    if driver is not None and "driver" in params and params["driver"] != driver:
        raise where.param(
            "driver", f"the deployment's driver is {driver}; a config for it cannot say {_shown(params['driver'])}"
        )
    for name, value in params.items():
        if name in STRING_PARAMS:
            if not isinstance(value, str) or not 0 < len(value) <= NAME_MAX:
                raise where.param(name, f"must be a name (1..{NAME_MAX} characters), got {_shown(value)}")
        elif not _number(value):
            raise where.param(name, _not_a_number(value))
        row = knob(name)
        if row is not None:
            why = row.refusal(value)
            if why is not None:
                raise where.param(name, why)
            lacks = driver_refusal(name, drv)
            if lacks is not None:
                raise where.param(name, f"refused for the driver {drv}: {lacks}")
    if "size_aware_cost" in params and params["size_aware_cost"] not in (0, 1):
        raise where.param("size_aware_cost", f"must be 0 or 1, got {_shown(params['size_aware_cost'])}")
    for name, value in replica_params.items():
        if not _number(value):
            raise where.param(name, _not_a_number(value), replica=True)


def _origins(params: Mapping[str, Any], replica_params: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """kvsim parameter → the name the user gave that sets it, for the queue's (coordinator's) and the selector's
    parameters (names the user gave directly are their own)."""
    queue: dict[str, str] = {}
    for kn in STOCK_KNOBS:
        if kn.name in params and applier(kn) is not SNITCH:
            queue.update(dict.fromkeys(applier(kn).kvsim_names(kn), kn.name))
    selector = {core: name for core, name in SNITCH.origins().items() if name in params}
    for name in params:
        queue[name] = selector[name] = name
    selector.update({name: name for name in replica_params})
    return queue, selector


def _in_range(
    values: Mapping[str, float],
    specs: list[PolicySpec],
    origin: Mapping[str, str],
    given: Mapping[str, Any],
    where: Where,
    replica_names: frozenset[str] = frozenset(),
) -> None:
    """Every kvsim parameter of a resolved replay within its declared range (the first spec having the name
    owns it, as the core sends a name to the policy before the coordinator section)."""
    owner: dict[str, tuple[PolicySpec, ParamSpec]] = {}
    for spec in reversed(specs):
        owner.update({p.name: (spec, p) for p in spec.params})
    for name, value in values.items():
        if name not in owner:
            continue  # resolve refused unknown names already; what is left is the replay's own bookkeeping
        spec, p = owner[name]
        why = _spec_refusal(p, value)
        if why is None:
            continue
        user = origin.get(name, name)
        shown = _shown(given.get(user, value))
        if user == name:
            problem = f"must be {_expected(p)}, got {shown}"
        else:
            problem = (
                f"must be within the simulator's range [{_num(p.low)}, {_num(p.high)}] "
                f"({spec.kind} parameter {name}: {p.valid}), got {shown}"
            )
        raise where.param(user, problem, replica=user in replica_names and user not in given)


def _cassandra_params(
    policy: str,
    params: Mapping[str, Any],
    replica_params: Mapping[str, Any],
    driver: str | None,
    where: Where,
) -> None:
    from simulation.registry import coordinator_spec, policy_specs, selector_spec

    _cassandra_values(params, replica_params, driver, where)
    given = dict(params)
    if driver is not None and (policy == STOCK_POLICY or any(knob(k) is not None for k in given)):
        given.setdefault("driver", driver)  # the knobs apply to the deployment's driver
    rparams = {k: float(v) for k, v in replica_params.items()}
    try:
        resolved = resolve(policy, given, replica_params=rparams, where=where.file, names_where=where.policy_file)
    except BadInputError as exc:
        if where is _CLI:
            raise
        p = exc.problems[0]
        field = where.policy_field if p.field == "policy" else where.prefix + p.field if p.field else "config.params"
        raise BadInputError.single(where.file, p.problem, field=field) from None
    queue_origin, selector_origin = _origins(params, replica_params)
    queue_specs = [s for s in policy_specs() if s.name == resolved.queue]
    if resolved.queue not in NO_COORDINATOR:
        queue_specs.append(coordinator_spec())
    values = {**params, **replica_params}
    _in_range(resolved.queue_params, queue_specs, queue_origin, values, where)
    _in_range(
        resolved.replica_params,
        [selector_spec(resolved.replica)],
        selector_origin,
        params,
        where,
        frozenset(replica_params),
    )


def _cassandra_target(config: Mapping[str, Any], driver: str | None) -> None:
    target = config.get("target") or {}
    options = target.get(TABLE_OPTIONS)
    field = f"config.target.{TABLE_OPTIONS}"
    if options is not None:
        rows = {k.name: k for k in TABLE.knobs()}
        if not isinstance(options, dict) or not all(
            isinstance(v, dict) and set(v) <= set(rows) for v in options.values()
        ):
            shape = ", ".join(f'"{name}": {row.kind.upper()}' for name, row in rows.items())
            raise BadInputError.single("config", f'must be {{"keyspace.table": {{{shape}}}}}', field=field)
        for table, opts in options.items():
            for name, value in opts.items():
                here = f"{_child(field, table)}.{name}"
                if rows[name].kind == "text" and (not isinstance(value, str) or not 0 < len(value) <= NAME_MAX):
                    raise BadInputError.single("config", f"must be text (1..{NAME_MAX} characters)", field=here)
                try:
                    TABLE.parse(rows[name], value, where="config")
                except BadInputError as exc:
                    raise BadInputError.single("config", exc.problems[0].problem, field=here) from None
    drv = _effective_driver(config.get("params") or {}, driver)
    rendered = target.get("driver")
    if "driver" in target and not isinstance(rendered, dict):
        raise BadInputError.single("config", "must be an object", field="config.target.driver")
    python = rendered.get("python") if isinstance(rendered, dict) else None
    if python is not None and not isinstance(python, dict):
        raise BadInputError.single("config", "must be an object or null", field="config.target.driver.python")
    if python is None and drv != "python":
        return  # only an application on the Python driver runs tailtune_client.cassandra
    from tailtune_client.cassandra import parse_driver_settings
    from tailtune_client.config import ConfigError

    try:
        parse_driver_settings(dict(config))
    except ConfigError as exc:
        where = "config.target.driver.python" if isinstance(rendered, dict) else "config.params"
        raise BadInputError.single("config", f"the client refuses it: {exc}", field=where) from None


# ---------------------------------------------------------------------------------------------------- entry points


def check_params(
    kind: str,
    policy: str,
    params: Mapping[str, Any],
    *,
    replica_params: Mapping[str, Any] | None = None,
    driver: str | None = None,
    config: bool = False,
) -> None:
    """`params` of `policy` (a `kind` deployment's: a registered kind, `simulation.kinds`) against the registry and
    the kind's own rules (`KindChecks.params`; Cassandra: the stock knob rows; `replica_params`: a queue policy's
    selector parameters, the CLI's `--replica-param`; `driver`: the deployment's, else the params' or java4).
    Errors name `config.params.NAME` when `config`, else `--param` and the parameter."""
    where = _CONFIG if config else _CLI
    found = find_kind(kind)
    if found is None:
        raise BadInputError.single(where.policy_file, f"unknown deployment kind {kind!r}", field="kind")
    kind_checks(found).params(policy, params, replica_params or {}, driver, where)


def check_config(config: object, kind: str, *, max_depth: int, driver: str | None = None) -> dict[str, Any]:
    """A config (`{"policy", "params", "target", "canary_fraction"}`) for a `kind` deployment on `driver`: its tree
    (`check_tree`), its shape, its policy and parameters (`check_params`) and its target (module doc). Returns it
    unchanged; raises a BadInputError naming the field (`config.params.k`)."""
    if not isinstance(config, dict):
        raise BadInputError.single("config", "must be an object", field="config")
    check_tree(config, max_depth=max_depth)
    for key in config:
        if key not in CONFIG_KEYS:
            problem = f"unknown key {_shown(key)} (a config has {', '.join(CONFIG_KEYS)})"
            raise BadInputError.single("config", problem, field=_child("config", key))
    policy = config.get("policy")
    if not isinstance(policy, str) or not policy:
        raise BadInputError.single("config", "a config needs a 'policy' name", field="config.policy")
    params = config.get("params", {})
    if not isinstance(params, dict):
        raise BadInputError.single("config", "must be an object", field="config.params")
    if not isinstance(config.get("target", {}), dict):
        raise BadInputError.single("config", "must be an object", field="config.target")
    if "canary_fraction" in config:
        f = config["canary_fraction"]
        if not _number(f) or not 0 < f <= 1:
            raise BadInputError.single("config", f"must be a number in (0, 1], got {_shown(f)}",
                                       field="config.canary_fraction")
    found = find_kind(kind)
    if found is None:
        raise BadInputError.single("config", f"unknown deployment kind {kind!r}", field="kind")
    policies = found.policy_names()
    if policy not in policies:
        shown = policy if len(policy) <= NAME_MAX else policy[:NAME_MAX] + "…"
        raise _CONFIG.policy(f"unknown {kind} policy {shown!r} (one of {', '.join(policies)})")
    check_params(kind, policy, params, driver=driver, config=True)
    kind_checks(found).target(config, policy, params, driver)
    return config


# ---------------------------------------------------------------------------------------------------- the kinds'


@dataclass(frozen=True)
class KindChecks:
    """What a deployment kind checks of a config (a kind's `checks`, `simulation.kinds`): `params(policy, params,
    replica_params, driver, where)` — the parameters of one of its policies (`where` names the fields; the policy is
    one of the kind's, or the check refuses it naming `where.policy_field`); `target(config, policy, params,
    driver)` — the config's `target` (its rendering for the kind's clients and servers), after its parameters
    passed. Both raise a BadInputError naming the field and return nothing."""

    params: Callable[[str, Mapping[str, Any], Mapping[str, Any], str | None, Where], None]
    target: Callable[[Mapping[str, Any], str, Mapping[str, Any], str | None], None]
    #: `canonical(config, policy, params, driver)`: what the config makes the kind's clients and servers run, in
    #: one normal form with the defaults filled in (`canonical_config`), for a config these checks accepted.
    #: The default: the policy, its parameters and its target as given (numbers compared as numbers).
    canonical: Callable[[Mapping[str, Any], str, Mapping[str, Any], str | None], dict[str, Any]] = (
        lambda config, policy, params, driver: {"policy": policy, "params": dict(params),
                                                "target": dict(config.get("target") or {})})


def kind_checks(kind: ModelKind) -> KindChecks:
    """The checks `kind.checks` names."""
    found = resolve_ref(kind.checks)
    if not isinstance(found, KindChecks):
        raise TypeError(f"deployment kind {kind.name!r}: {kind.checks} is not a KindChecks")
    return found


def _memcached_kind_params(
    policy: str, params: Mapping[str, Any], replica_params: Mapping[str, Any], driver: str | None, where: Where
) -> None:
    if replica_params:
        raise where.param(next(iter(replica_params)), "a memcached policy has no replica selector", replica=True)
    _memcached_params(policy, params, where)


def _memcached_kind_target(
    config: Mapping[str, Any], policy: str, params: Mapping[str, Any], driver: str | None
) -> None:
    _memcached_target(config, policy, params)


def _cassandra_kind_target(
    config: Mapping[str, Any], policy: str, params: Mapping[str, Any], driver: str | None
) -> None:
    _cassandra_target(config, driver)


def _memcached_canonical(
    config: Mapping[str, Any], policy: str, params: Mapping[str, Any], driver: str | None
) -> dict[str, Any]:
    """What the client runs: its mode and the mode's parameters as `parse_config` reads them (the rendering
    or `{"mode": policy, **params}`), integers as integers."""
    from tailtune_client.config import parse_config

    parsed = parse_config(dict(config))
    return {"mode": parsed.mode, **parsed.params()}


def _spelled(option: Any, value: object, where: str) -> Any:
    """A table option's value in one spelling (a text option's grammar renders its normal form: `99p` for
    `99PERCENTILE`, `NEVER` for `NONE`, case ignored)."""
    parsed = TABLE.parse(option, value, where=where)
    return parsed.render() if option.grammar is not None else float(parsed)


def _cassandra_canonical(
    config: Mapping[str, Any], policy: str, params: Mapping[str, Any], driver: str | None
) -> dict[str, Any]:
    """What the coordinator, the driver and the tables run: the policy resolved as the replay resolves it (queue
    discipline and replica selector with every parameter, defaults filled in, the stock knobs as kvsim reads
    them), the table options the config sets on every table (a stock config: at their defaults when unset),
    and the per-table options of `target.table_options` that differ from those."""
    given = dict(params)
    if driver is not None and (policy == STOCK_POLICY or any(knob(k) is not None for k in given)):
        given.setdefault("driver", driver)
    resolved = resolve(policy, given, where="config", names_where="config")
    base: dict[str, Any] = {}
    for option in TABLE.knobs():
        value = params.get(option.name)
        if value is None and policy == STOCK_POLICY:
            value = option.default
        if value is not None:
            base[option.name] = _spelled(option, value, "config")
    explicit = (config.get("target") or {}).get(TABLE_OPTIONS) or {}
    rows = {k.name: k for k in TABLE.knobs()}
    per_table: dict[str, dict[str, Any]] = {}
    for table, opts in sorted(explicit.items()):
        differs = {name: v for name, raw in sorted(opts.items())
                   if (v := _spelled(rows[name], raw, "config")) != base.get(name)}
        if differs:
            per_table[table] = differs
    return {"policy": resolved.policy, "queue": resolved.queue, "queue_params": resolved.queue_params,
            "replica": resolved.replica, "replica_params": resolved.replica_params,
            "size_aware_cost": resolved.size_aware_cost,
            "table_options": base, "per_table": per_table}


def canonical_config(config: object, kind: str, *, max_depth: int, driver: str | None = None) -> dict[str, Any]:
    """`config` (checked as `check_config` checks it) in its kind's normal form (`KindChecks.canonical`): two
    configs are identical when their normal forms are equal — `99p` ≡ `99PERCENTILE`, `NEVER` ≡ `NONE`, case,
    defaults filled in. `canary_fraction` is not part of it: it says who runs the config, not what it is.
    Raises the BadInputError `check_config` raises."""
    checked = check_config(config, kind, max_depth=max_depth, driver=driver)
    found = find_kind(kind)
    assert found is not None  # check_config refused any other
    policy = str(checked["policy"])
    return kind_checks(found).canonical(checked, policy, checked.get("params") or {}, driver)


#: memcached: the client's policies and parameters (kvsim's memcached registry); the `memcached_client` block.
MEMCACHED_CHECKS = KindChecks(_memcached_kind_params, _memcached_kind_target, _memcached_canonical)
#: Cassandra: kvsim's queue policies, selectors and coordinator section, the stock knob rows; the table options
#: and the Python driver's settings.
CASSANDRA_CHECKS = KindChecks(_cassandra_params, _cassandra_kind_target, _cassandra_canonical)
