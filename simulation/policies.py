"""The one vocabulary of Cassandra policy and parameter names, shared by `simulate`, `tune`, the
recommendation, the API and the docs, and how a (policy, params) pair maps onto a kvsim replay: a server queue
discipline with its parameters and a replica selector with its parameters.

- **Queue policies** (kvsim's core: `fifo`, `rein`, `rein-sbf`, `rein-sds`, `brb-equalmax`, `brb-unifincr`,
  `oracle`, `tailx`, `duplicate`, `speculative`): numeric params go to the queue discipline; the string param
  `replica` picks the replica selector (default `round-robin`; `ds` for `tailx`, as TailX §3.1).
- **Selector policies** `c3`, `ds`, `heron`: fifo queues with that replica selector; numeric params go to the
  selector; the string param `queue` picks another queue discipline (the tuner's `heron` with `queue=rein`).
- **`replica`**: the selector named by the string param `replica` over the queue named by `queue` (default fifo);
  numeric params go to the selector.
- **`stock`** (stock Cassandra and its drivers): the knobs named as Cassandra and the drivers spell them
  (`simulation.stock_knobs`) → kvsim's `stock` params; replicas read through the `dynamic-snitch`
  selector (Cassandra's DynamicEndpointSnitch) unless `replica` names another.
- **Coordinator knobs** (`simulation.stock.COORDINATOR_KNOBS`: `speculative_retry`, the driver's and
  the multiget shape's, and the `dynamic_snitch_*` settings) on every queue policy but `duplicate` and
  `speculative` (their own client-side copies stand in for them; a name the policy has itself — the
  selector's, for the selector policies — is its own, as `speculative`'s and `ds`'s `window`): a patched
  server still has a coordinator, a snitch and a driver. Unset, the machinery is off for them
  (`speculative_retry` NEVER, one driver execution, the whole multiget in one `IN` query: the policy's replay
  as without the knobs); `stock` starts from Cassandra's defaults instead (`99p`). The selector policies take
  them too (for their queue discipline). The snitch knobs need a snitch selector (`dynamic-snitch` or `ds`).
- `size_aware_cost` (0 or 1) on any policy: opset cost = Σ estimated op demand instead of the op count.

Aliases kept for the CLI: `--replica NAME` = `--param replica=NAME` (on a selector policy it must name that
selector); `--size-aware-cost` = `--param size_aware_cost=1`; `--replica-param K=V` = a selector parameter of a
queue policy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from base.errors import BadInputError
from simulation.stock import (
    COORDINATOR_KNOBS,
    SNITCH_SELECTOR,
    STOCK_POLICY,
    STOCK_STRING_PARAMS,
    snitch_refusal,
    snitch_selector_params,
    stock_params,
)

__all__ = [
    "DEFAULT_SELECTOR",
    "REPLICA_POLICY",
    "SELECTOR_POLICIES",
    "STRING_PARAMS",
    "ParamValue",
    "ResolvedPolicy",
    "parse_params",
    "resolve",
]

ParamValue = int | float | str

#: `--policy NAME` that mean fifo server queues with replica selector NAME.
SELECTOR_POLICIES = ("c3", "ds", "heron")
#: A named selector (param `replica`) over a named queue discipline (param `queue`).
REPLICA_POLICY = "replica"
#: Parameters whose values are names (or Cassandra option text), not numbers.
STRING_PARAMS = ("replica", "queue", *STOCK_STRING_PARAMS)
#: Queue policies whose default selector is not round-robin.
DEFAULT_SELECTOR = {"tailx": "ds"}
#: Queue policies that take no coordinator knobs, with the reason.
NO_COORDINATOR = {
    name: "its own client-side copies stand in for the coordinator's speculative retry and the driver's executions"
    for name in ("duplicate", "speculative")
}


@dataclass(frozen=True)
class ResolvedPolicy:
    """What a (policy, params) pair replays: the queue discipline and the replica selector with their params."""

    policy: str
    queue: str
    queue_params: dict[str, float]
    replica: str
    replica_params: dict[str, float]
    size_aware_cost: bool = False

    @property
    def thr_l_bytes(self) -> float | None:
        """THR_L asked for explicitly (tailx's or heron's `thr_l_bytes` > 0); None = the derived default."""
        if self.queue == "tailx" and self.queue_params.get("thr_l_bytes", 0.0) > 0.0:
            return self.queue_params["thr_l_bytes"]
        if self.replica == "heron" and self.replica_params.get("thr_l_bytes", 0.0) > 0.0:
            return self.replica_params["thr_l_bytes"]
        return None

    @property
    def uses_large_flags(self) -> bool:
        """The replay may read the per-op large-value flags: TailX's queues, and every selector fed back by
        the servers (they see which resident ops are large); round-robin and random never do."""
        return self.queue == "tailx" or self.replica not in ("round-robin", "random")


def parse_params(items: list[str], source: str = "--param") -> dict[str, ParamValue]:
    """`k=v` strings → {k: float(v)} (names for `replica` and `queue`); malformed items are a BadInputError."""
    out: dict[str, ParamValue] = {}
    for i, item in enumerate(items, start=1):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise BadInputError.single(source, f"expected NAME=VALUE, got {item!r}", line=i, field=name or item)
        if name in STRING_PARAMS:
            out[name] = value.strip()
            continue
        try:
            out[name] = float(value)
        except ValueError:
            raise BadInputError.single(source, f"value {value!r} is not a number", line=i, field=name) from None
    return out


def _numbers(policy: str, params: Mapping[str, ParamValue], where: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in params.items():
        if k in STRING_PARAMS:
            continue
        if isinstance(v, str):
            raise BadInputError.single(where, f"{v!r} is not a number", field=k)
        out[k] = float(v)
    return out


def _unknown_params(given: Mapping[str, float], valid: Mapping[str, float], what: str, where: str) -> None:
    unknown = sorted(set(given) - set(valid))
    if unknown:
        listed = ", ".join(f"{k} (default {v:g})" for k, v in valid.items()) or "none"
        raise BadInputError.single(
            where, f"unknown parameter {unknown[0]!r} for {what}: valid are {listed}", field=unknown[0]
        )


def _check_names(resolved: ResolvedPolicy, where: str, names_where: str) -> ResolvedPolicy:
    import kvsim

    queues, selectors = kvsim.policy_names(), kvsim.replica_names()
    if resolved.queue not in queues:
        field = "policy" if resolved.queue == resolved.policy else "queue"
        raise BadInputError.single(
            names_where, f"unknown queue discipline {resolved.queue!r} (one of {', '.join(queues)})", field=field
        )
    if resolved.replica not in selectors:
        raise BadInputError.single(
            names_where,
            f"unknown replica selector {resolved.replica!r} (one of {', '.join(selectors)})",
            field="replica",
        )
    valid = {**kvsim.policy_defaults(resolved.queue), **kvsim.coordinator_defaults(resolved.queue)}
    _unknown_params(resolved.queue_params, valid, f"policy {resolved.queue!r}", where)
    _unknown_params(
        resolved.replica_params,
        kvsim.replica_defaults(resolved.replica),
        f"replica selector {resolved.replica!r}",
        where,
    )
    return resolved


def resolve(
    policy: str,
    params: Mapping[str, ParamValue],
    *,
    replica_params: Mapping[str, float] | None = None,
    where: str = "--param",
    names_where: str | None = None,
) -> ResolvedPolicy:
    """Maps a policy and its params onto (queue discipline, selector), checking both names and every parameter
    name; errors name `where` (`names_where` for an unknown policy or selector name; default `where`)."""
    return _check_names(_resolve(policy, params, replica_params, where), where, names_where or where)


def _resolve(
    policy: str, params: Mapping[str, ParamValue], replica_params: Mapping[str, float] | None, where: str
) -> ResolvedPolicy:
    extra = {str(k): float(v) for k, v in (replica_params or {}).items()}
    if policy == STOCK_POLICY:
        return _resolve_stock(params, extra, where)
    # as the core's build_policy: a name the policy has itself (the selector's, for the selector policies) is its
    # own (speculative's and ds's `window`), else the coordinator section's
    mine = _own_params(policy, params.get("replica"))
    knobs = {k: v for k, v in params.items() if k in COORDINATOR_KNOBS and k not in mine}
    own = {k: v for k, v in params.items() if k not in knobs}
    nums = _numbers(policy, own, where)
    cost = bool(nums.pop("size_aware_cost", 0.0))
    replica = own.get("replica")
    queue = own.get("queue")
    for name, v in (("replica", replica), ("queue", queue)):
        if v is not None and (not isinstance(v, str) or not v):
            raise BadInputError.single(where, f"{name} must be a name, got {v!r}", field=name)
    if policy in SELECTOR_POLICIES:
        if replica is not None and replica != policy:
            raise BadInputError.single(
                "--replica", f"--policy {policy} already selects replicas with {policy}", field="replica"
            )
        resolved = ResolvedPolicy(policy, str(queue or "fifo"), {}, policy, {**nums, **extra}, cost)
    elif policy == REPLICA_POLICY:
        if replica is None:
            raise BadInputError.single(where, "policy 'replica' needs --param replica=SELECTOR", field="replica")
        resolved = ResolvedPolicy(policy, str(queue or "fifo"), {}, str(replica), {**nums, **extra}, cost)
    else:
        if queue is not None:
            raise BadInputError.single(
                where,
                f"'queue' is a parameter of {', '.join((*SELECTOR_POLICIES, REPLICA_POLICY))}, not of {policy}",
                field="queue",
            )
        selector = str(replica or DEFAULT_SELECTOR.get(policy, "round-robin"))
        resolved = ResolvedPolicy(policy, policy, nums, selector, extra, cost)
    return _with_knobs(resolved, knobs, where) if knobs else resolved


def _own_params(policy: str, replica: ParamValue | None) -> frozenset[str]:
    """The parameters `policy` has itself: a queue policy's own, or the selector's of a selector policy (of
    `replica` for the `replica` policy); none for unknown names."""
    import kvsim

    selector = policy if policy in SELECTOR_POLICIES else replica if policy == REPLICA_POLICY else None
    if selector is not None:
        known = isinstance(selector, str) and selector in kvsim.replica_names()
        return frozenset(kvsim.replica_defaults(str(selector))) if known else frozenset()
    if policy == STOCK_POLICY or policy not in kvsim.policy_names():
        return frozenset()
    return frozenset(kvsim.policy_defaults(policy))


def _with_knobs(resolved: ResolvedPolicy, knobs: Mapping[str, ParamValue], where: str) -> ResolvedPolicy:
    """`resolved` with the coordinator knobs: kvsim's coordinator params next to the queue's, the snitch knobs
    as the selector's (refused, with the reason, where the queue or the selector takes none)."""
    k = next(iter(knobs))
    if resolved.queue in NO_COORDINATOR:
        raise BadInputError.single(
            where, f"{k}: policy {resolved.queue!r} takes no coordinator knobs ({NO_COORDINATOR[resolved.queue]})",
            field=k,
        )
    for name in knobs:
        why = snitch_refusal(name, resolved.replica)
        if why is not None:
            raise BadInputError.single(where, why, field=name)
    core, snitch = stock_params(dict(knobs), where, policy=resolved.queue)
    # the selector's own params (`--replica-param`, a selector policy's) win over the snitch knobs' mapping
    replica_params = {**snitch_selector_params(snitch, resolved.replica), **resolved.replica_params}
    return dataclasses.replace(
        resolved, queue_params={**resolved.queue_params, **core}, replica_params=replica_params
    )


def _resolve_stock(params: Mapping[str, ParamValue], extra: dict[str, float], where: str) -> ResolvedPolicy:
    """`stock`: Cassandra's and the drivers' knob names (simulation.stock) → kvsim's `stock` queue
    params and the `dynamic-snitch` selector (Cassandra's DynamicEndpointSnitch with the snitch knobs) unless
    `replica` names another selector (`ds` takes the snitch knobs too)."""
    given = dict(params)
    cost = bool(float(given.pop("size_aware_cost", 0.0)))
    core, snitch = stock_params(given, where)
    replica = given.get("replica", SNITCH_SELECTOR)
    if not isinstance(replica, str) or not replica:
        raise BadInputError.single(where, f"replica must be a name, got {replica!r}", field="replica")
    selector_params = {**snitch_selector_params(snitch, replica), **extra}
    return ResolvedPolicy(STOCK_POLICY, STOCK_POLICY, core, replica, selector_params, cost)
