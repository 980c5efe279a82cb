"""Search spaces per deployment kind, with conditional parameters and ranges derived from `summary.json`.

A `SearchSpace` is a list of `PolicySpace`s (one per policy: the parameters it searches and the ones it fixes).
With more than one policy the trial first picks `policy`, then only that policy's parameters, named
`<policy>.<param>` in Optuna (conditional parameters: K is asked only when the policy has queues). With a single
policy the parameters keep their plain names (so a rein-only study has `k`, `range_factor`, ...).

Parameter names are the simulator's (`k`, `range_factor`, `r_q1`, `rate_step`, `tau_1`, `boost_after_ms` for
Cassandra; `split_keys`, `merge`, `elephant_threshold` for memcached). Ranges come from the dataset summary
(see docs/tuner.md, "Ranges from the summary"); every missing or null part of the summary falls back to a
documented default, and `apply_overrides` narrows, widens or fixes any parameter. A kind's default space is
found through the kinds' registry (`tuner.kinds.space_for`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from base.errors import BadInputError, InputProblem
from simulation.speculative_retry import speculative_retry_choices

__all__ = [
    "QUEUE_DISCIPLINES",
    "REPLICA_SELECTORS",
    "Candidate",
    "Param",
    "ParamValue",
    "PolicySpace",
    "SearchSpace",
    "apply_overrides",
    "cassandra_space",
    "memcached_space",
    "parse_override",
    "patched_space",
    "speculative_retry_choices",
    "stock_space",
]

ParamValue = int | float | str
Kind = Literal["int", "float", "cat"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One configuration to replay: a policy and every parameter value passed to it."""

    policy: str
    params: Mapping[str, ParamValue] = field(default_factory=dict)

    def key(self) -> tuple[str, tuple[tuple[str, ParamValue], ...]]:
        """Hashable identity (two trials with the same key replay the same thing)."""
        return self.policy, tuple(sorted(self.params.items()))

    def label(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.policy}({inner})" if inner else self.policy

    def as_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Candidate:
        return cls(str(d["policy"]), dict(d.get("params") or {}))


@dataclass(frozen=True, slots=True)
class Param:
    """One searched parameter: an int or float range (optional step, optional log scale) or categorical choices."""

    name: str
    kind: Kind
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: tuple[ParamValue, ...] | None = None
    #: Asked only when every named parameter has that value (e.g. `multiget.chunk` only with shape `in`).
    when: tuple[tuple[str, ParamValue], ...] = ()

    def applies(self, values: Mapping[str, ParamValue]) -> bool:
        """Whether this parameter exists for a candidate with `values` (its `when` conditions hold)."""
        return all(values.get(n) == v for n, v in self.when)

    def __post_init__(self) -> None:
        if self.kind == "cat":
            if not self.choices:
                raise ValueError(f"param {self.name}: categorical needs choices")
            return
        if self.low is None or self.high is None or not self.low <= self.high:
            raise ValueError(f"param {self.name}: needs low <= high, got {self.low}..{self.high}")
        if self.log and self.low <= 0:
            raise ValueError(f"param {self.name}: log scale needs low > 0")

    def suggest(self, trial: Any, key: str) -> ParamValue:
        """Ask an Optuna trial for this parameter under the name `key`."""
        if self.kind == "cat":
            assert self.choices is not None
            return trial.suggest_categorical(key, list(self.choices))  # type: ignore[no-any-return]
        assert self.low is not None and self.high is not None
        if self.kind == "int":
            step = int(self.step or 1)
            return int(trial.suggest_int(key, int(self.low), int(self.high), step=step, log=self.log))
        return float(trial.suggest_float(key, self.low, self.high, step=self.step, log=self.log))

    def grid(self) -> list[ParamValue]:
        """Every value of a discrete parameter (a float range needs a step)."""
        if self.kind == "cat":
            assert self.choices is not None
            return list(self.choices)
        assert self.low is not None and self.high is not None
        if self.kind == "int":
            return list(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        if self.step is None:
            raise ValueError(f"param {self.name}: a float range needs a step to be gridded")
        n = math.floor((self.high - self.low) / self.step + 1e-9)
        return [round(self.low + i * self.step, 10) for i in range(n + 1)]

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.kind == "cat":
            d["choices"] = list(self.choices or ())
        else:
            d.update(low=self.low, high=self.high, step=self.step, log=self.log)
        if self.when:
            d["when"] = [list(w) for w in self.when]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Param:
        choices = d.get("choices")
        return cls(
            name=str(d["name"]),
            kind=d["kind"],
            low=d.get("low"),
            high=d.get("high"),
            step=d.get("step"),
            log=bool(d.get("log", False)),
            choices=tuple(choices) if choices is not None else None,
            when=tuple((str(n), v) for n, v in d.get("when") or ()),
        )


def _rein_feasible(params: Mapping[str, ParamValue]) -> str | None:
    """Rein's DRR rates w_i = r_q1 - (i-1)·rate_step must all stay > 0."""
    k, r_q1, step = float(params.get("k", 4)), float(params.get("r_q1", 5.0)), float(params.get("rate_step", 1.0))
    if r_q1 - (k - 1.0) * step <= 0.0:
        return f"rate_step={step} leaves queue {int(k)} without rate (needs r_q1 - (k-1)*rate_step > 0)"
    return None


#: Cross-parameter checks by policy: a reason when the combination cannot run, else None.
FEASIBILITY: dict[str, Callable[[Mapping[str, ParamValue]], str | None]] = {"rein": _rein_feasible}


@dataclass(frozen=True, slots=True)
class PolicySpace:
    """The parameters searched for one policy and the ones held fixed (passed on every replay)."""

    policy: str
    params: tuple[Param, ...] = ()
    fixed: Mapping[str, ParamValue] = field(default_factory=dict)

    def infeasible(self, params: Mapping[str, ParamValue]) -> str | None:
        check = FEASIBILITY.get(self.policy)
        return check(params) if check is not None else None

    def as_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "params": [p.as_dict() for p in self.params], "fixed": dict(self.fixed)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PolicySpace:
        return cls(
            str(d["policy"]), tuple(Param.from_dict(p) for p in d.get("params", ())), dict(d.get("fixed") or {})
        )


@dataclass(frozen=True, slots=True)
class SearchSpace:
    """The whole space of one study: the deployment kind and one `PolicySpace` per candidate policy."""

    deployment: str
    policies: tuple[PolicySpace, ...]

    def __post_init__(self) -> None:
        if not self.policies:
            raise ValueError("a search space needs at least one policy")

    @property
    def conditional(self) -> bool:
        return len(self.policies) > 1

    def policy_space(self, policy: str) -> PolicySpace:
        for ps in self.policies:
            if ps.policy == policy:
                return ps
        raise KeyError(policy)

    def _key(self, policy: str, name: str) -> str:
        return f"{policy}.{name}" if self.conditional else name

    def suggest(self, trial: Any) -> Candidate:
        """Ask an Optuna trial for a candidate: the policy first (if several), then only its parameters."""
        if self.conditional:
            policy = str(trial.suggest_categorical("policy", [p.policy for p in self.policies]))
        else:
            policy = self.policies[0].policy
        ps = self.policy_space(policy)
        values: dict[str, ParamValue] = dict(ps.fixed)
        for p in ps.params:
            if p.applies(values):
                values[p.name] = p.suggest(trial, self._key(policy, p.name))
        return Candidate(policy, values)

    def candidate_from_params(self, optuna_params: Mapping[str, Any]) -> Candidate:
        """The candidate of a finished trial, from its Optuna params."""
        policy = str(optuna_params["policy"]) if self.conditional else self.policies[0].policy
        ps = self.policy_space(policy)
        values: dict[str, ParamValue] = dict(ps.fixed)
        for p in ps.params:
            if p.applies(values):
                values[p.name] = optuna_params[self._key(policy, p.name)]
        return Candidate(policy, values)

    def optuna_params(self, cand: Candidate) -> dict[str, ParamValue]:
        """The Optuna params of a candidate (for `study.enqueue_trial`)."""
        ps = self.policy_space(cand.policy)
        out: dict[str, ParamValue] = {"policy": cand.policy} if self.conditional else {}
        for p in ps.params:
            if p.name in cand.params:
                out[self._key(cand.policy, p.name)] = cand.params[p.name]
        return out

    def infeasible(self, cand: Candidate) -> str | None:
        return self.policy_space(cand.policy).infeasible(cand.params)

    def contains(self, cand: Candidate) -> bool:
        """Whether the candidate is a point of this space (policy present, every value in range/choices)."""
        try:
            ps = self.policy_space(cand.policy)
        except KeyError:
            return False
        asked = [p for p in ps.params if p.applies(cand.params)]
        names = {p.name for p in asked} | set(ps.fixed)
        if set(cand.params) != names or any(cand.params[k] != v for k, v in ps.fixed.items()):
            return False
        for p in asked:
            v = cand.params[p.name]
            if p.kind == "cat":
                if v not in (p.choices or ()):
                    return False
                continue
            assert p.low is not None and p.high is not None
            if isinstance(v, str) or not p.low <= v <= p.high:
                return False
            if p.step is not None:
                steps = (float(v) - p.low) / p.step
                if abs(steps - round(steps)) > 1e-9:
                    return False
        return self.infeasible(cand) is None

    def grid(self, *, feasible_only: bool = True) -> Iterator[Candidate]:
        """Every point of the (discrete) space, policy by policy, in a fixed order."""
        for ps in self.policies:
            seen: set[Any] = set()
            for combo in itertools.product(*(p.grid() for p in ps.params)):
                values: dict[str, ParamValue] = dict(ps.fixed)
                for p, v in zip(ps.params, combo, strict=True):
                    if p.applies(values):
                        values[p.name] = v
                cand = Candidate(ps.policy, values)
                if cand.key() in seen or (feasible_only and ps.infeasible(cand.params) is not None):
                    continue
                seen.add(cand.key())
                yield cand


    def as_dict(self) -> dict[str, Any]:
        return {"deployment": self.deployment, "policies": [p.as_dict() for p in self.policies]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SearchSpace:
        return cls(str(d["deployment"]), tuple(PolicySpace.from_dict(p) for p in d["policies"]))


# ------------------------------------------------------------------------------------------------ summary access
def _num(summary: Mapping[str, Any] | None, section: str, name: str) -> float | None:
    """A finite positive-or-zero number from `summary[section][name]`, else None (missing, null, wrong type)."""
    if not summary:
        return None
    sec = summary.get(section)
    if not isinstance(sec, Mapping):
        return None
    v = sec.get(name)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(float(v)) or v < 0:
        return None
    return float(v)


def _clamp(x: float, lo: float, hi: float) -> float:
    return max(lo, min(hi, x))


# ------------------------------------------------------------------------------------------------ cassandra
#: Defaults used when the summary says nothing (documented in docs/tuner.md).
CASSANDRA_DEFAULTS: dict[str, float] = {"k_max": 8, "r_max": 8.0, "boost_max_ms": 20.0}
#: Queue disciplines a replica selector (heron, `replica`) combines with; their parameters are kvsim's defaults.
QUEUE_DISCIPLINES: tuple[str, ...] = ("fifo", "rein", "brb-equalmax", "brb-unifincr")
#: kvsim's replica selectors offered by the tuner (tailx's `replica` knob; the default first: TailX uses ds).
REPLICA_SELECTORS: tuple[str, ...] = ("ds", "round-robin", "least-outstanding", "c3", "heron")
#: Policies whose opset cost may be the estimated demand (`size_aware_cost`) when value sizes vary.
SIZE_COST_POLICIES: tuple[str, ...] = ("rein", "rein-sbf", "rein-sds")
#: Parameters held fixed where a policy is searched (only the rate ratios matter: r_q1 at the paper's 5).
FIXED: dict[str, dict[str, ParamValue]] = {"rein": {"r_q1": 5.0}}


def _registry_param(spec: Any) -> Param:
    """A tuner `Param` from a kvsim registry parameter's declared search range."""
    s = spec.search
    return Param(spec.name, s.kind, s.low, s.high, step=s.step, log=s.log,
                 choices=tuple(s.choices) if s.choices is not None else None)


def _sizes_vary(vs: Any) -> bool:
    """summary.value_size says the values differ in size (p99 or max above the median)."""
    if not isinstance(vs, Mapping):
        return False
    p50 = vs.get("p50")
    top = [vs.get(k) for k in ("p99", "max")]
    return isinstance(p50, int | float) and any(isinstance(t, int | float) and t > p50 for t in top)


def cassandra_space(summary: Mapping[str, Any] | None = None) -> SearchSpace:
    """Cassandra: policy ∈ {fifo, rein, rein-sbf, rein-sds, brb-*, tailx, heron} and their knobs.

    - K (`k`): 2 .. 1 + ceil(log2(fanout.bottleneck_p99)), clamped to [3, 8] (a queue per doubling of the
      bottleneck cost); default 8.
    - R (`range_factor`): 1.5 .. clamp(bottleneck_p99, 4, 8) in steps of 0.5; default max 8.
    - `rate_step` 0 .. 2 in steps of 0.5 with `r_q1` fixed at the paper's 5 (only the rate ratios matter);
      `tau_1` ∈ {1, 2} (ops).
    - `boost_after_ms` (rein-sbf, rein-sds) ∈ {0 (off), ...} up to the largest slack upper bound (default 20 ms).
    - tailx `thr_l_bytes` from value_size.thr_l_candidates (default 4 KiB, 16 KiB, 64 KiB), TL/TS scales and
      `allowance_scale` 0.5..2, `replica` ∈ REPLICA_SELECTORS.
    - `size_aware_cost` ∈ {0, 1} for rein, rein-sbf, rein-sds when value_size says sizes vary (p99 or max above
      p50): opset cost = Σ estimated op demand instead of the op count (Rein as published = 0).
    - heron (the Héron replica selector): `thr_l_bytes` as tailx, `queue` ∈ QUEUE_DISCIPLINES.
    - replica (another selector with a queue discipline): `replica` ∈ {least-outstanding, c3, ds} (round-robin is
      the plain policies, heron its own entry), `queue` ∈ QUEUE_DISCIPLINES.
    """
    bott = _num(summary, "fanout", "bottleneck_p99")
    if bott is not None and bott >= 1:
        k_max = int(_clamp(1 + math.ceil(math.log2(max(bott, 2.0))), 3, 8))
        r_max = _clamp(math.floor(bott * 2) / 2, 4.0, 8.0)
    else:
        k_max, r_max = int(CASSANDRA_DEFAULTS["k_max"]), CASSANDRA_DEFAULTS["r_max"]
    boost_max = CASSANDRA_DEFAULTS["boost_max_ms"]
    slack = summary.get("slack_bounds") if summary else None
    if isinstance(slack, list):
        uppers = [
            float(s["upper_ms"]) for s in slack
            if isinstance(s, Mapping) and isinstance(s.get("upper_ms"), int | float) and s["upper_ms"] > 0
        ]
        if uppers:
            boost_max = _clamp(max(uppers), 1.0, 1000.0)
    boosts: tuple[ParamValue, ...] = (0.0, *[b for b in (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0) if b <= boost_max])
    thr: list[ParamValue] = []
    vs = summary.get("value_size") if summary else None
    if isinstance(vs, Mapping) and isinstance(vs.get("thr_l_candidates"), list):
        thr = sorted(
            {int(c["bytes"]) for c in vs["thr_l_candidates"]
             if isinstance(c, Mapping) and isinstance(c.get("bytes"), int | float) and c["bytes"] > 0}
        )
    if not thr:
        thr = [4096, 16384, 65536]
    # Ranges derived from the summary replace the registry's declared ones for these parameters.
    derived = {
        "k": Param("k", "int", 2, k_max),
        "range_factor": Param("range_factor", "float", 1.5, r_max, step=0.5),
        "boost_after_ms": Param("boost_after_ms", "cat", choices=boosts),
        "thr_l_bytes": Param("thr_l_bytes", "cat", choices=tuple(thr)),
    }
    # Heterogeneous value sizes: Rein / SBF / SDS may cost opsets by estimated demand instead of op count.
    cost = (Param("size_aware_cost", "cat", choices=(0.0, 1.0)),) if _sizes_vary(vs) else ()
    from simulation.registry import NOT_TUNABLE, policy_specs, selector_spec

    spaces: list[PolicySpace] = []
    for spec in policy_specs():
        if spec.name in NOT_TUNABLE:
            continue
        params = [derived.get(p.name) or _registry_param(p) for p in spec.searched()]
        if spec.name in SIZE_COST_POLICIES:
            params += cost
        if spec.name == "tailx":
            params.append(Param("replica", "cat", choices=REPLICA_SELECTORS))
        spaces.append(PolicySpace(spec.name, tuple(params), dict(FIXED.get(spec.name, {}))))
    heron = [derived.get(p.name) or _registry_param(p) for p in selector_spec("heron").searched()]
    spaces.append(PolicySpace("heron", (*heron, Param("queue", "cat", choices=QUEUE_DISCIPLINES))))
    spaces.append(PolicySpace("replica", (
        Param("replica", "cat", choices=("least-outstanding", "c3", "ds")),
        Param("queue", "cat", choices=QUEUE_DISCIPLINES),
    )))
    return SearchSpace("cassandra", tuple(spaces))


# ------------------------------------------------------------------------------------------------ stock cassandra
def _knob_param(k: Any) -> Param:
    """A stock knob's search: its row's `grid` (values an operator would write), else its choices or its range."""
    when = tuple(getattr(k, "only_with", ()) or ())
    if k.grid:
        return Param(k.name, "cat", choices=tuple(k.grid), when=when)
    if k.kind in ("bool", "choice") or k.choices:
        return Param(k.name, "cat", choices=tuple(k.choices or (0, 1)), when=when)
    kind: Kind = "int" if k.kind == "int" else "float"
    return Param(k.name, kind, k.low, k.high, log=k.log, when=when)


def stock_space(driver: str = "java4") -> SearchSpace:
    """Stock Cassandra: the single policy `stock` over exactly the knobs that stock Cassandra and `driver` have and
    the simulator models (`simulation.stock_knobs.stock_knobs`); `driver` is fixed."""
    from simulation.stock_knobs import DRIVERS, stock_knobs

    if driver not in DRIVERS:
        raise BadInputError.single("command line", f"unknown driver {driver!r} (one of {', '.join(DRIVERS)})",
                                   field="driver")
    params = tuple(_knob_param(k) for k in stock_knobs(driver))
    return SearchSpace("cassandra", (PolicySpace("stock", params, {"driver": driver}),))


def patched_space(space: SearchSpace, driver: str = "java4") -> SearchSpace:
    """A Rein-patched server: `space` (the scheduler space, `cassandra_space`) with, on every policy entry, the
    stock knobs of `driver` after its own (a patched server keeps its coordinator, its driver and the
    application's multiget shape, whatever its scheduler and replica selector), `driver` fixed. The snitch knobs
    go only where a snitch may pick the replicas: entries that search `replica`, asked when it is `ds`. Policies
    that refuse the knobs (`simulation.policies.NO_COORDINATOR`) keep their space."""
    from simulation.policies import NO_COORDINATOR
    from simulation.stock import SNITCH_KNOBS

    knobs = stock_space(driver).policies[0].params
    client = tuple(k for k in knobs if k.name not in SNITCH_KNOBS)
    snitch = tuple(replace(k, when=(("replica", "ds"),)) for k in knobs if k.name in SNITCH_KNOBS)
    out: list[PolicySpace] = []
    for ps in space.policies:
        if ps.policy in NO_COORDINATOR:
            out.append(ps)
            continue
        ds = any(p.name == "replica" and "ds" in (p.choices or ()) for p in ps.params)
        extra = client + (snitch if ds else ())
        out.append(replace(ps, params=(*ps.params, *extra), fixed={**ps.fixed, "driver": driver}))
    return SearchSpace(space.deployment, tuple(out))


# ------------------------------------------------------------------------------------------------ memcached
MEMCACHED_DEFAULTS: dict[str, float] = {"size_p50": 10, "size_p99": 100, "size_max": 100}


def memcached_space(summary: Mapping[str, Any] | None = None) -> SearchSpace:
    """memcached: batching (no knobs) vs chisel with `split_keys`, `merge`, `elephant_threshold`.

    From multiget_size (defaults p50 10, p99 100, max 100 keys):
    - `elephant_threshold` (mice/elephant boundary, keys): max(2, p50) .. max(p50 + 1, p99) (int, log scale);
    - `split_keys` (chunk size of an elephant, keys): 1 .. max(2, max) (int, log scale);
    - `merge` (mice merged per query): 1 .. 8.
    """
    p50 = _num(summary, "multiget_size", "p50") or MEMCACHED_DEFAULTS["size_p50"]
    p99 = _num(summary, "multiget_size", "p99") or MEMCACHED_DEFAULTS["size_p99"]
    mx = _num(summary, "multiget_size", "max") or max(p99, MEMCACHED_DEFAULTS["size_max"])
    thr_lo = max(2, round(p50))
    thr_hi = max(thr_lo + 1, round(p99))
    return SearchSpace(
        "memcached",
        (
            PolicySpace("batching"),
            PolicySpace(
                "chisel",
                (
                    Param("split_keys", "int", 1, max(2, round(mx)), log=True),
                    Param("merge", "int", 1, 8),
                    Param("elephant_threshold", "int", thr_lo, thr_hi, log=True),
                ),
            ),
        ),
    )


# ------------------------------------------------------------------------------------------------ overrides
def _value(text: str) -> ParamValue:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_override(text: str) -> tuple[str, dict[str, Any]]:
    """`policy.param=VALUE` (fix), `policy.param=LOW:HIGH[:STEP]` (range), `policy.param=a|b|c` (choices).

    Returns (`policy.param`, override dict) for `apply_overrides`.
    """
    where = "--space"
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise BadInputError.single(where, f"{text!r}: expected policy.param=VALUE | LOW:HIGH[:STEP] | a|b|c",
                                   field="space")
    name, spec = (s.strip() for s in text.split("=", 1))
    if "|" in spec:
        return name, {"choices": [_value(s) for s in spec.split("|")]}
    if ":" in spec:
        parts = spec.split(":")
        if len(parts) not in (2, 3):
            raise BadInputError.single(where, f"{text!r}: a range is LOW:HIGH or LOW:HIGH:STEP", field=name)
        try:
            nums = [float(p) for p in parts]
        except ValueError:
            raise BadInputError.single(where, f"{text!r}: range bounds must be numbers", field=name) from None
        out: dict[str, Any] = {"low": nums[0], "high": nums[1]}
        if len(nums) == 3:
            out["step"] = nums[2]
        return name, out
    return name, {"fixed": _value(spec)}


def apply_overrides(
    space: SearchSpace,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    policies: Sequence[str] | None = None,
    source: str = "--space",
) -> SearchSpace:
    """Restrict the space to `policies` (in that order) and apply per-parameter overrides.

    `overrides` maps `policy.param` to {"fixed": v} | {"low", "high", ["step"], ["log"]} | {"choices": [...]};
    a fixed value moves the parameter to the policy's fixed values; a new name adds a parameter.
    """
    known = {ps.policy: ps for ps in space.policies}
    problems: list[InputProblem] = []
    if policies is not None:
        bad = [p for p in policies if p not in known]
        for p in bad:
            problems.append(InputProblem(source, None, "policies", f"unknown policy {p!r} (one of {list(known)})"))
        chosen = [known[p] for p in policies if p in known]
    else:
        chosen = list(space.policies)
    by_policy = {ps.policy: ps for ps in chosen}
    for full, ov in (overrides or {}).items():
        policy, _, name = full.partition(".")
        if policy not in by_policy:
            problems.append(InputProblem(source, None, full, f"policy {policy!r} is not in the search space"))
            continue
        ps = by_policy[policy]
        params = {p.name: p for p in ps.params}
        fixed = dict(ps.fixed)
        try:
            if "fixed" in ov:
                params.pop(name, None)
                fixed[name] = ov["fixed"]
            elif "choices" in ov:
                fixed.pop(name, None)
                params[name] = Param(name, "cat", choices=tuple(ov["choices"]))
            else:
                fixed.pop(name, None)
                old = params.get(name)
                lo, hi = float(ov["low"]), float(ov["high"])
                integral = lo.is_integer() and hi.is_integer() and (old is None or old.kind == "int")
                kind: Kind = "int" if integral and (old is None or old.kind != "float") else "float"
                step = ov.get("step", old.step if old is not None and old.kind != "cat" else None)
                params[name] = Param(name, kind, lo, hi, step=step, log=bool(ov.get("log", False)))
        except (ValueError, KeyError) as exc:
            problems.append(InputProblem(source, None, full, str(exc)))
            continue
        by_policy[policy] = replace(ps, params=tuple(params.values()), fixed=fixed)
    if problems:
        raise BadInputError(problems)
    if not by_policy:
        raise BadInputError.single(source, "no policy left in the search space", field="policies")
    return SearchSpace(space.deployment, tuple(by_policy[p.policy] for p in chosen))
