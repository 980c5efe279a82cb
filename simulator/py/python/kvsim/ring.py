"""An explicit Cassandra token ring: every node's tokens, datacenter and rack, the keyspace's replication strategy
and the datacenter reads come from. `Cluster(..., ring=Ring(...))` (or `Cluster.of_ring`) replays on it: its
servers are the local datacenter's nodes (server i = its i-th node in `nodes` order), its replica groups the
ring's token ranges, each read from the range's replicas in the local datacenter, placed as Cassandra places
them (`SimpleStrategy`, `NetworkTopologyStrategy` with racks). Placement rules: docs/simulator.md § Cluster.

`Ring.from_dict` reads the JSON shape a discovered ring is kept in:
`{"partitioner": "org.apache.cassandra.dht.Murmur3Partitioner", "strategy": {"class": "SimpleStrategy",
"replication_factor": 3} | {"class": "NetworkTopologyStrategy", "replication": {"dc1": 3, "dc2": 2}},
"local_dc": "dc1", "nodes": [{"address": "10.0.0.1", "dc": "dc1", "rack": "r1", "tokens": [int, ...]}, ...]}`.
Every error is a `RingError` (a `ParameterError`) naming the part at fault (`ring.nodes[2].tokens[5]`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from kvsim import _kvsim
from kvsim._kvsim import RingError

__all__ = ["MURMUR3", "NTS", "SIMPLE", "Ring", "RingError", "RingNode"]

#: The only partitioner the simulator hashes keys with.
MURMUR3 = "org.apache.cassandra.dht.Murmur3Partitioner"
SIMPLE = "SimpleStrategy"
NTS = "NetworkTopologyStrategy"
_LOCATOR = "org.apache.cassandra.locator."
_MIN, _MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class RingNode:
    """One node: its address (a name only), datacenter, rack and tokens."""

    address: str
    dc: str
    rack: str
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class Ring:
    """The nodes, the datacenter reads come from (`local_dc`) and exactly one strategy: `replication_factor`
    (SimpleStrategy) or `replication` ((dc, RF) pairs: NetworkTopologyStrategy). Placed (and validated) on
    construction; a bad ring raises `RingError`."""

    nodes: tuple[RingNode, ...]
    local_dc: str
    replication_factor: int | None = None
    replication: tuple[tuple[str, int], ...] | None = None
    _raw: _kvsim.Ring = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        if self.replication is not None:
            object.__setattr__(self, "replication", tuple((str(d), int(rf)) for d, rf in self.replication))
        seen: dict[str, int] = {}
        for i, n in enumerate(self.nodes):
            if n.address in seen:
                raise RingError(f"bad ring: 'nodes[{i}].address': {n.address!r} is also nodes[{seen[n.address]}]")
            seen[n.address] = i
        try:
            raw = _kvsim.Ring(
                [n.dc for n in self.nodes],
                [n.rack for n in self.nodes],
                [list(n.tokens) for n in self.nodes],
                self.local_dc,
                replication_factor=self.replication_factor,
                replication=None if self.replication is None else list(self.replication),
            )
        except (OverflowError, TypeError) as exc:
            raise RingError(f"bad ring: {exc}") from None
        object.__setattr__(self, "_raw", raw)

    # ---------------------------------------------------------------------------------------------- the contract
    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Ring:
        """The ring of a discovered-ring document (the module's JSON shape); errors name the field (`ring.…`)."""
        if not isinstance(doc, Mapping):
            raise RingError(f"bad ring: 'ring': expected an object, got {type(doc).__name__}")
        _keys(doc, "ring", required={"strategy", "local_dc", "nodes"}, optional={"partitioner"})
        partitioner = doc.get("partitioner", MURMUR3)
        if partitioner != MURMUR3:
            raise RingError(f"bad ring: 'ring.partitioner': {partitioner!r}; the simulator hashes keys with {MURMUR3}")
        local_dc = _str(doc["local_dc"], "ring.local_dc")
        strategy = doc["strategy"]
        if not isinstance(strategy, Mapping):
            raise RingError("bad ring: 'ring.strategy': expected an object")
        kind = strategy.get("class")
        kind = kind[len(_LOCATOR):] if isinstance(kind, str) and kind.startswith(_LOCATOR) else kind
        rf: int | None = None
        replication: tuple[tuple[str, int], ...] | None = None
        if kind == SIMPLE:
            _keys(strategy, "ring.strategy", required={"class", "replication_factor"})
            rf = _int(strategy["replication_factor"], "ring.strategy.replication_factor", 1, 255)
        elif kind == NTS:
            _keys(strategy, "ring.strategy", required={"class", "replication"})
            reps = strategy["replication"]
            if not isinstance(reps, Mapping) or not reps:
                raise RingError("bad ring: 'ring.strategy.replication': expected an object {datacenter: RF}")
            replication = tuple(
                (_str(dc, "ring.strategy.replication"), _int(v, f"ring.strategy.replication.{dc}", 0, 255))
                for dc, v in reps.items()
            )
        else:
            raise RingError(f"bad ring: 'ring.strategy.class': {kind!r} is not one of {SIMPLE}, {NTS}")
        raw_nodes = doc["nodes"]
        if not isinstance(raw_nodes, Sequence) or isinstance(raw_nodes, str) or not raw_nodes:
            raise RingError("bad ring: 'ring.nodes': expected a non-empty list of nodes")
        nodes = []
        for i, n in enumerate(raw_nodes):
            where = f"ring.nodes[{i}]"
            if not isinstance(n, Mapping):
                raise RingError(f"bad ring: '{where}': expected an object")
            _keys(n, where, required={"address", "dc", "rack", "tokens"})
            toks = n["tokens"]
            if not isinstance(toks, Sequence) or isinstance(toks, str):
                raise RingError(f"bad ring: '{where}.tokens': expected a list of integers")
            nodes.append(RingNode(
                address=_str(n["address"], f"{where}.address"),
                dc=_str(n["dc"], f"{where}.dc"),
                rack=_str(n["rack"], f"{where}.rack"),
                tokens=tuple(_int(t, f"{where}.tokens[{k}]", _MIN, _MAX) for k, t in enumerate(toks)),
            ))
        try:
            return cls(nodes=tuple(nodes), local_dc=local_dc, replication_factor=rf, replication=replication)
        except RingError as exc:
            # the core names the part ('nodes[2].tokens'): as a field of the document it is 'ring.nodes[2].tokens'
            raise RingError(str(exc).replace("bad ring: '", "bad ring: 'ring.", 1)) from None

    def as_dict(self) -> dict[str, Any]:
        """The ring in the module's JSON shape (`from_dict(as_dict())` is the same ring)."""
        strategy: dict[str, Any] = (
            {"class": SIMPLE, "replication_factor": self.replication_factor}
            if self.replication is None
            else {"class": NTS, "replication": dict(self.replication)}
        )
        return {
            "partitioner": MURMUR3,
            "strategy": strategy,
            "local_dc": self.local_dc,
            "nodes": [{"address": n.address, "dc": n.dc, "rack": n.rack, "tokens": list(n.tokens)}
                      for n in self.nodes],
        }

    # ---------------------------------------------------------------------------------------------- placement
    @property
    def strategy(self) -> str:
        return SIMPLE if self.replication is None else NTS

    @property
    def servers(self) -> int:
        """The simulated servers: the local datacenter's nodes."""
        return int(self.server_nodes().size)

    @property
    def local_replication(self) -> int:
        """The local datacenter's RF (replicas of every read group)."""
        return int(self._raw.local_rf)

    @property
    def ranges(self) -> int:
        """Token ranges (= the ring's tokens = the cluster's replica groups)."""
        return int(self._raw.ranges)

    @property
    def width(self) -> int:
        """Replicas per range, every datacenter."""
        return int(self._raw.width)

    def tokens(self) -> npt.NDArray[np.int64]:
        """The ring's tokens, ascending (range i ends at token i)."""
        return np.frombuffer(self._raw.tokens(), dtype=np.int64)

    def owners(self) -> npt.NDArray[np.uint32]:
        """The node (index into `nodes`) owning each token."""
        return np.frombuffer(self._raw.owners(), dtype=np.uint32)

    def replica_table(self) -> npt.NDArray[np.uint32]:
        """ranges × width nodes (indices into `nodes`), in the order Cassandra takes them (primary first)."""
        return np.frombuffer(self._raw.replica_table(), dtype=np.uint32).reshape(self.ranges, self.width)

    def server_nodes(self) -> npt.NDArray[np.uint32]:
        """The node of each simulated server."""
        return np.frombuffer(self._raw.servers(), dtype=np.uint32)

    def ranges_of(self, tokens: npt.ArrayLike) -> npt.NDArray[np.uint32]:
        """The range of each key token: the first ring token ≥ it, wrapping to range 0."""
        return np.frombuffer(
            self._raw.ranges_of(np.ascontiguousarray(tokens, dtype=np.int64)), dtype=np.uint32
        )

    def replicas_of(self, tokens: npt.ArrayLike) -> npt.NDArray[np.uint32]:
        """len(tokens) × width: each key token's replicas (node indices, every datacenter, primary first)."""
        return self.replica_table()[self.ranges_of(tokens).astype(np.int64)]


def _keys(doc: Mapping[str, Any], where: str, *, required: set[str], optional: set[str] | None = None) -> None:
    optional = optional or set()
    missing = sorted(required - set(doc))
    if missing:
        raise RingError(f"bad ring: '{where}.{missing[0]}': missing")
    unknown = sorted(set(doc) - required - set(optional), key=str)
    if unknown:
        valid = ", ".join(sorted(required | set(optional)))
        raise RingError(f"bad ring: '{where}.{unknown[0]}': unknown key (valid: {valid})")


def _str(v: object, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise RingError(f"bad ring: '{where}': expected a non-empty string, got {v!r}")
    return v


def _int(v: object, where: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer):
        raise RingError(f"bad ring: '{where}': expected an integer, got {v!r}")
    if not lo <= int(v) <= hi:
        raise RingError(f"bad ring: '{where}': {v} is out of range {lo}..={hi}")
    return int(v)
