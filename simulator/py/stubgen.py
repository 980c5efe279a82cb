"""Writes the stub of the native module, `python/kvsim/_kvsim.pyi`, from the built module itself.

What the binding says is read from it: every name it exports (exceptions with their bases, classes, functions),
each class's constructor, methods, static methods and properties, every parameter with its kind and default
(`__text_signature__`, which PyO3 writes from the Rust `signature`) and every docstring (the Rust doc comments).
What a compiled module cannot say — the Python types — is declared below, once: `PARAMS` (a parameter's type by
name, `Owner.name` where one name means different things), `RETURNS` (what a function, method or property
gives) and `RECORDS` (the shapes of the dicts the binding hands out and of the config object `replay` reads).
A name of the binding without a type, or a type for no name of the binding, is an error: the stub cannot fall
behind the binding or run ahead of it.

    python simulator/py/stubgen.py           # after rebuilding the module: writes the stub
    python simulator/py/stubgen.py --check   # exit 1 when the committed stub is not the generated one

`tests/simulator/test_stub.py` runs the check, and checks the record shapes against what a replay returns.
"""

from __future__ import annotations

import ast
import importlib
import sys
import textwrap
from pathlib import Path
from types import ModuleType

STUB = Path(__file__).resolve().parent / "python" / "kvsim" / "_kvsim.pyi"
WIDTH = 120

_ARR = "npt.NDArray[np.{}]"
_I64, _U64, _U32, _U8, _F64 = (_ARR.format(t) for t in ("int64", "uint64", "uint32", "uint8", "float64"))
_PAIRS = "list[tuple[str, float]]"
_SLOWDOWN = "tuple[int, float, float, int] | None"  # (interval ns, fraction, factor, duration ns)
_STALLS = "tuple[float, int] | None"  # (stalls per s per server, stall duration ns)
_SCHEDULE = "list[tuple[int, int, int]] | None"  # [(server, start ns, end ns)]
_SEARCH_KIND = 'Literal["int", "float", "cat"]'

#: Parameter types by name; `Owner.name` (a function, or `Class.method`) where one name has another type.
PARAMS: dict[str, str] = {
    "arrays": "dict[str, npt.NDArray[Any]]",
    "arrival": _U64,
    "cluster": "Cluster",
    "config": "NativeConfig",
    "demand": _U64,
    "demand_dist": "str",
    "demand_sigma": "float",
    "factor": "float",
    "layout": "WorkloadLayout",
    "load": "float | None",
    "mean_demand": f"{_F64} | None",
    "n": "int",
    "name": "str",
    "offsets": _I64,
    "seed": "int",
    "servers": "int",
    "service_rate": "float",
    "timestamps": f"{_F64} | None",
    "tokens": _I64,
    "workload": "Workload",
    # Cluster
    "Cluster.slots": "int",
    "Cluster.replication": "int",
    "Cluster.vnodes": "int",
    "Cluster.net_latency_ns": "int",
    "Cluster.clients": "int",
    "Cluster.ring": "Ring | None",
    "Cluster.client_rtt_ns": "list[int] | None",
    "Cluster.client_key_ns": "int",
    # Ring
    "Ring.dcs": "list[str]",
    "Ring.racks": "list[str]",
    "Ring.tokens": "list[list[int]]",
    "Ring.local_dc": "str",
    "Ring.replication_factor": "int | None",
    "Ring.replication": "list[tuple[str, int]] | None",
    # the catalogue's records
    "SearchSpec.kind": _SEARCH_KIND,
    "SearchSpec.low": "float | None",
    "SearchSpec.high": "float | None",
    "SearchSpec.step": "float | None",
    "SearchSpec.log": "bool",
    "SearchSpec.choices": "tuple[float, ...] | list[float] | None",
    # workloads
    "WorkloadLayout.clients": f"{_U32} | None",
    "Workload.clients": f"{_U32} | None",
    # hashing
    "tokens_from_ids.ids": _U64,
    "tokens_from_strings.keys": "list[str]",
    "tokens_from_utf8.data": _U8,
    # models
    "large_filter.sizes": _F64,
    "large_filter.query": _I64,
    "large_filter.thr_l_bytes": "float",
    "large_filter.fp": "float",
    "large_filter.parts": "int",
    "capacity_factor.server_speeds": f"{_F64} | None",
    "capacity_factor.slowdown": _SLOWDOWN,
    "capacity_factor.stalls": _STALLS,
    "capacity_factor.stall_schedule": _SCHEDULE,
    "capacity_factor.span_ns": "tuple[int, int] | None",  # [from, to) ns; None: [0, the schedule's last end)
    # memcached
    "replay_memcached_raw.arrivals_us": "list[float]",
    "replay_memcached_raw.keys": "list[int]",
    "replay_memcached_raw.server_of": "list[int]",
    "replay_memcached_raw.policy": "str",
    "replay_memcached_raw.worker_threads": "int",
    "replay_memcached_raw.query_threads": "int",
    "replay_memcached_raw.client_overhead_us": "float",
    "replay_memcached_raw.setup_us": "float",
    "replay_memcached_raw.profile": "tuple[float, float, float, float]",
    "replay_memcached_raw.service_cv": "float",
    "replay_memcached_raw.split_keys": "int | None",
    "replay_memcached_raw.split_chunks": "int | None",
    "replay_memcached_raw.merge": "int",
    "replay_memcached_raw.elephant_threshold": "int",
    "replay_memcached_raw.shards": "tuple[list[int], list[int], list[int]] | None",
    "replay_memcached_raw.client_cpus": "int",
    "replay_memcached_raw.client_processes": "int",
    "replay_memcached_raw.client_key_us": "float",
}

#: What each function, method and property gives (a constructor gives `Self`).
RETURNS: dict[str, str] = {
    "Cluster.groups": "int",
    "Cluster.groups_of": "bytes",
    "Cluster.replica_table": "bytes",
    "ClusterConfig.clients": "int",
    "ComponentSpec.fast_loop": "bool",
    "ComponentSpec.loop_note": "str",
    "ComponentSpec.name": "str",
    "ComponentSpec.params": "tuple[ParamSpec, ...]",
    "ClusterConfig.net_latency_ns": "int",
    "ClusterConfig.replication": "int",
    "ClusterConfig.servers": "int",
    "ClusterConfig.service_rate": "float",
    "ClusterConfig.slots": "int",
    "ClusterConfig.vnodes": "int",
    "ParamSpec.default": "float",
    "ParamSpec.describe": "str",
    "ParamSpec.doc": "str",
    "ParamSpec.domain": 'Literal["real", "integer", "rounded"]',
    "ParamSpec.high": "float",
    "ParamSpec.low": "float",
    "ParamSpec.name": "str",
    "ParamSpec.search": "SearchSpec | None",
    "ParamSpec.valid": "str",
    "Ring.local_rf": "int",
    "Ring.owners": "bytes",
    "Ring.ranges": "int",
    "Ring.ranges_of": "bytes",
    "Ring.replica_table": "bytes",
    "Ring.servers": "bytes",
    "Ring.tokens": "bytes",
    "Ring.width": "int",
    "SearchSpec.choices": "tuple[float, ...] | None",
    "SearchSpec.high": "float | None",
    "SearchSpec.kind": _SEARCH_KIND,
    "SearchSpec.log": "bool",
    "SearchSpec.low": "float | None",
    "SearchSpec.step": "float | None",
    "Workload.arrays": "WorkloadArrays",
    "Workload.draw": "Workload",
    "Workload.from_arrays": "Workload",
    "Workload.nbytes": "int",
    "Workload.ops": "int",
    "Workload.opsets": "int",
    "Workload.prefix": "Workload",
    "Workload.requests": "int",
    "WorkloadLayout.arrays": "LayoutArrays",
    "WorkloadLayout.from_arrays": "WorkloadLayout",
    "WorkloadLayout.nbytes": "int",
    "WorkloadLayout.ops": "int",
    "WorkloadLayout.opsets": "int",
    "WorkloadLayout.requests": "int",
    "capacity_factor": "float",
    "cluster_defaults": "ClusterConfig",
    "coordinator_defaults": _PAIRS,
    "coordinator_spec": "ComponentSpec",
    "default_demand_model": "tuple[float, float]",
    "large_filter": "tuple[bytes, float, int, int]",
    "memcached_policy_specs": "list[ComponentSpec]",
    "model_version": "int",
    "policy_defaults": _PAIRS,
    "policy_names": "list[str]",
    "policy_specs": "list[ComponentSpec]",
    "replay": "RawResult",
    "replay_memcached_raw": "RawMemcachedResult",
    "replica_defaults": _PAIRS,
    "replica_names": "list[str]",
    "replica_specs": "list[ComponentSpec]",
    "slow_server_speeds": "list[float]",
    "tokens_from_ids": "bytes",
    "tokens_from_strings": "bytes",
    "tokens_from_utf8": "bytes",
}

#: The shapes of the dicts the binding hands out (their keys are checked against a replay's by the test) and of
#: the config object `replay` reads by attribute.
RECORDS = '''
class WorkloadArrays(TypedDict):
    """`Workload.arrays()`: bytes of arrival_ns u64, client u32, req_opsets u32, opset_group u32, opset_req u32,
    opset_ops u32, demand_ns u64, op_input u32, replicas u32 (groups × RF)."""

    arrival_ns: bytes
    client: bytes
    req_opsets: bytes
    opset_group: bytes
    opset_req: bytes
    opset_ops: bytes
    demand_ns: bytes
    op_input: bytes
    replicas: bytes

class LayoutArrays(TypedDict):
    """`WorkloadLayout.arrays()`: bytes of client, req_opsets, opset_group, opset_req, opset_ops, op_input (u32)
    and mean_demand (f32, empty without per-op means)."""

    client: bytes
    req_opsets: bytes
    opset_group: bytes
    opset_req: bytes
    opset_ops: bytes
    op_input: bytes
    mean_demand: bytes

class NativeConfig(Protocol):
    """What `replay` reads (by attribute) of its config; `kvsim.replay` builds one from a `kvsim.ReplayConfig`.
    Flags are uint8 per input op (the order of the workload's tokens)."""

    @property
    def policy(self) -> str: ...
    @property
    def params(self) -> list[tuple[str, float]]: ...
    @property
    def replica(self) -> str: ...
    @property
    def replica_params(self) -> list[tuple[str, float]]: ...
    @property
    def large_est(self) -> npt.NDArray[np.uint8] | None: ...
    @property
    def large_true(self) -> npt.NDArray[np.uint8] | None: ...
    @property
    def server_speeds(self) -> npt.NDArray[np.float64] | None: ...
    @property
    def slowdown(self) -> tuple[int, float, float, int] | None:
        """(interval ns, fraction, factor, duration ns)"""
    @property
    def stalls(self) -> tuple[float, int] | None:
        """(stalls per s per server, stall duration ns)"""
    @property
    def stall_schedule(self) -> list[tuple[int, int, int]] | None:
        """[(server, start ns, end ns)] on the replay's clock: stalls on an explicit schedule (not with `stalls`)"""
    @property
    def writes(self) -> npt.NDArray[np.uint8] | None: ...
    @property
    def closed(self) -> tuple[int, int, str] | None:
        """(threads, mean think time ns, think-time distribution)"""
    @property
    def warmup(self) -> float: ...
    @property
    def record_ops(self) -> bool: ...
    @property
    def size_aware_cost(self) -> bool: ...
    @property
    def seed(self) -> int: ...
    @property
    def stop(self) -> tuple[float, int] | None:
        """(quantile, bound ns): stop once that quantile of the measured latencies is certainly above the bound"""
    @property
    def latency_history(self) -> list[int] | None:
        """Sample counts per bucket of Cassandra's microsecond histogram (127, or 128 with the overflow) every
        coordinator's histogram holds at time 0"""

class RawHeld(TypedDict):
    opsets: int
    max: int
    mean_ms: float
    at_half: int
    at_end: int
    unstable: bool

class RawCounts(TypedDict):
    ops: int

class RawCopies(RawCounts):
    wins: int

class RawWrites(RawCounts):
    copies: int

class RawTimeouts(TypedDict):
    on: bool  # the replay modelled read timeouts (coordinator `drop_expired`)
    requests: int  # requests answered with a timeout
    dropped_reads: int  # reads their replica dropped unserved (expired)

class RawRecords(TypedDict):
    """bytes of request u32, opset u32, server u32, slot u32, enqueue_ns u64, start_ns u64, end_ns u64,
    demand_ns u64."""

    request: bytes
    opset: bytes
    server: bytes
    slot: bytes
    enqueue_ns: bytes
    start_ns: bytes
    end_ns: bytes
    demand_ns: bytes

class _RawResultBase(TypedDict):
    policy: str
    params: list[tuple[str, float]]
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    mean_ms: float
    measured: int
    requests: int
    ops: int
    events: int
    utilization: float
    server_load: bytes  # float64 per server
    server_load_max: float
    half_ratio: float
    steady_state: bool
    sim_wall_s: float
    bytes_per_op: float
    latency_ns: bytes  # uint64 per request
    replica: str
    replica_params: list[tuple[str, float]]
    held: RawHeld
    copies: RawCopies
    writes: RawWrites
    timeouts: RawTimeouts
    served_ops: int
    makespan_ns: int
    capacity_factor: float
    arrival_ns: bytes  # uint64 per request (closed loop), empty in open loop
    stopped: bool  # the stop rule ended the replay (percentiles over the measured requests completed by then)

class RawResult(_RawResultBase, total=False):
    records: RawRecords  # with record_ops

class RawMemcachedResult(TypedDict):
    policy: str
    requests: int
    mean_us: float
    p50_us: float
    p95_us: float
    p99_us: float
    p999_us: float
    utilization: float
    server_load_max: float
    steady_state: bool
    queries: int
    query_keys: int
    merged_queries: int
    split_requests: int
    chunks: int
    events: int
    client_wait_us: float
    server_wait_us: float
    client_cpu_wait_us: float
    client_cpu_load: float
    span_us: float
    query_threads: int
    sim_wall_s: float
    latencies_us: list[float]
'''

HEADER = '''"""Native binding of kvsim-core (PyO3). The typed API is the `kvsim` package; these are its building blocks.

Arrays go in as contiguous numpy arrays of the stated dtype and come back as bytes (native endianness) that the
package wraps with `numpy.frombuffer`.

Generated by simulator/py/stubgen.py from the built module: do not edit; change the binding (or the types
declared in the generator) and run it again.
"""

from typing import Any, Literal, Protocol, Self, TypedDict, final

import numpy as np
import numpy.typing as npt
'''


class StubError(Exception):
    """The binding and the declared types disagree."""


def _doc(obj: object, indent: str) -> list[str]:
    """`obj`'s docstring as stub lines at `indent` (wrapped to the line width), none when it has none."""
    raw = getattr(obj, "__doc__", None)
    if not isinstance(raw, str) or not raw.strip() or raw.startswith(("staticmethod(", "Create and return")):
        return []
    text = " ".join(raw.split())
    one = f'{indent}"""{text}"""'
    if len(one) <= WIDTH:
        return [one]
    lines = textwrap.wrap(text, WIDTH - len(indent), break_long_words=False, break_on_hyphens=False)
    lines[0] = '"""' + lines[0]
    if len(indent) + len(lines[0]) > WIDTH:  # the quotes pushed the first line over: wrap it again
        lines = textwrap.wrap('"""' + text, WIDTH - len(indent), break_long_words=False, break_on_hyphens=False)
    lines[-1] += '"""'
    return [indent + line for line in lines]


def _params(owner: str, sig: str, *, method: bool, used: set[str]) -> list[str]:
    """The typed parameter list of `owner` from its text signature (`$self`/`$type` become `self`/`cls`)."""
    fn = ast.parse(f"def f{sig.replace('$self', 'self').replace('$type', 'cls')}: ...").body[0]
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    if a.vararg or a.kwarg or a.posonlyargs:
        raise StubError(f"{owner}: *args, **kwargs and positional-only parameters are not generated")
    out: list[str] = ["self"] if method and owner.split(".")[-1] != "__new__" else []
    if owner.endswith(".__new__"):
        out = ["cls"]
    plain = [x.arg for x in a.args if x.arg not in ("self", "cls")]
    defaults: list[ast.expr | None] = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
    defaults = defaults[len(a.args) - len(plain):]
    kw = [(x.arg, d) for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]

    def one(name: str, default: ast.expr | None) -> str:
        short = owner.removesuffix(".__new__")
        key = next((k for k in (f"{short}.{name}", f"{short.split('.')[-1]}.{name}", name) if k in PARAMS), None)
        if key is None:
            raise StubError(f"{owner}: parameter '{name}' has no type: declare it in PARAMS (simulator/py/stubgen.py)")
        used.add(key)
        if default is None:
            return f"{name}: {PARAMS[key]}"
        return f"{name}: {PARAMS[key]} = {ast.unparse(default)}"

    out += [one(n, d) for n, d in zip(plain, defaults, strict=True)]
    if kw:
        out.append("*")
        out += [one(n, d) for n, d in kw]
    return out


def _returns(name: str, used: set[str]) -> str:
    if name not in RETURNS:
        raise StubError(f"{name}: its return type is not declared: add it to RETURNS (simulator/py/stubgen.py)")
    used.add(name)
    return RETURNS[name]


def _head(indent: str, decorator: str | None, name: str, params: list[str], returns: str) -> list[str]:
    """`def name(params) -> returns:` on one line, or its parameters one per line when it is too long."""
    top = [f"{indent}{decorator}"] if decorator else []
    one = f"{indent}def {name}({', '.join(params)}) -> {returns}:"
    if len(one) <= WIDTH or not params:
        return [*top, one]
    return [*top, f"{indent}def {name}(", *(f"{indent}    {p}," for p in params),
            f"{indent}) -> {returns}:"]


def _def(lines: list[str], head: list[str], obj: object, indent: str) -> None:
    """`head` (a `def ...:` without its body) with `obj`'s docstring as its body, or `...`."""
    doc = _doc(obj, indent + "    ")
    if doc:
        lines += head
        lines += doc
    else:
        lines += [*head[:-1], head[-1] + " ..."]


def _class(cls: type, used: set[str], used_returns: set[str]) -> list[str]:
    """A class's stub: its docstring, constructor, static methods, methods and properties (each by name)."""
    name = cls.__name__
    body: list[str] = _doc(cls, "    ")
    sig = getattr(cls, "__text_signature__", None)
    if sig:
        body += _head("    ", None, "__new__", _params(f"{name}.__new__", sig, method=True, used=used), "Self")
        body[-1] += " ..."
    members = sorted((a, type(d).__name__, d) for a, d in vars(cls).items() if not a.startswith("_"))
    order = {"staticmethod": 0, "method_descriptor": 1, "getset_descriptor": 2}
    for attr, kind, d in sorted(members, key=lambda m: (order.get(m[1], 3), m[0])):
        qual = f"{name}.{attr}"
        if kind == "getset_descriptor":
            _def(body, _head("    ", "@property", attr, ["self"], _returns(qual, used_returns)), d, "    ")
        elif kind == "staticmethod":
            f = getattr(cls, attr)
            params = _params(qual, f.__text_signature__, method=False, used=used)
            _def(body, _head("    ", "@staticmethod", attr, params, _returns(qual, used_returns)), f, "    ")
        elif kind == "method_descriptor":
            params = _params(qual, d.__text_signature__, method=True, used=used)
            _def(body, _head("    ", None, attr, params, _returns(qual, used_returns)), d, "    ")
        else:
            raise StubError(f"{qual}: a {kind} is not generated")
    return ["@final", f"class {name}:", *(body or ["    ..."])]


def _rule(title: str) -> str:
    return f"# ---- {title} ".ljust(112, "-")


def generate(module: ModuleType) -> str:
    """The stub of `module` (the built `kvsim._kvsim`)."""
    names = sorted(n for n in vars(module) if not n.startswith("_"))
    objs = {n: getattr(module, n) for n in names}
    errors = sorted((n for n, o in objs.items() if isinstance(o, type) and issubclass(o, BaseException)),
                    key=lambda n: (len(objs[n].__mro__), n))
    classes = [n for n, o in objs.items() if isinstance(o, type) and n not in errors]
    functions = [n for n, o in objs.items() if callable(o) and not isinstance(o, type)]
    other = set(names) - set(errors) - set(classes) - set(functions)
    if other:
        raise StubError(f"not generated (neither an exception, a class nor a function): {sorted(other)}")
    used: set[str] = set()
    used_returns: set[str] = set()
    out = [HEADER, _rule("errors")]
    for n in errors:
        base = objs[n].__mro__[1].__name__
        out += [f"class {n}({base}):", *(_doc(objs[n], "    ") or ["    ..."]), ""]
    out += [_rule("records"), RECORDS.strip("\n"), "", _rule("classes")]
    for n in classes:
        out += [*_class(objs[n], used, used_returns), ""]
    out.append(_rule("functions"))
    for n in functions:
        f = objs[n]
        params = _params(n, f.__text_signature__ or "()", method=False, used=used)
        _def(out, _head("", None, n, params, _returns(n, used_returns)), f, "")
    unused = sorted(set(PARAMS) - used) + sorted(set(RETURNS) - used_returns)
    if unused:
        raise StubError(f"types declared for no name of the binding: {unused} (simulator/py/stubgen.py)")
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = generate(importlib.import_module("kvsim._kvsim"))
    if "--check" in argv:
        if STUB.read_text() != text:
            print(f"{STUB} is not the stub of the built module: run python simulator/py/stubgen.py", file=sys.stderr)
            return 1
        return 0
    STUB.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
