"""Pure-Python reference of the kvsim model (plain heapq) for fifo and rein, fed the same workload.

It mirrors docs/simulator.md: integer-ns time, events ordered by (time, seq) with request arrivals
pre-scheduled as seq 0..R-1, servers pick ops only after every event of an instant is applied (lowest free
slot first, servers in the order they became dirty),
per-(client, group) round-robin replicas starting at client mod RF.

Extensions (optional): constant per-server `speeds` (service = round(demand / speed), half away from zero as
Rust's f64::round) and a closed loop of `threads` client threads with a fixed think time (request r goes to the
thread free first; ready threads are events of the same (time, seq) order).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any

import numpy as np

__all__ = ["bottleneck_queue", "reference_latencies", "slack_queue"]


def bottleneck_queue(cost: float, k: int, range_factor: float, tau_1: float) -> int:
    if range_factor <= 1.0:
        return 0
    upper = tau_1 * range_factor
    for i in range(k - 1):
        if cost < upper:
            return i
        upper *= range_factor
    return k - 1


def slack_queue(cost: float, cost_bn: float, q_bn: int, rates: list[float]) -> int:
    ratio = cost / cost_bn
    best, min_error = q_bn, 1e9
    for q, w in enumerate(rates):
        error = abs(ratio - w / rates[q_bn])
        if error < min_error and rates[q_bn] >= w:
            min_error, best = error, q
    return best


class _Drr:
    def __init__(self, rates: list[float]) -> None:
        m = min(rates)
        scale = 1.0 / m if m < 1.0 else 1.0
        self.quanta = [r * scale for r in rates]
        self.queues: list[deque[int]] = [deque() for _ in rates]
        self.deficit = [0.0] * len(rates)
        self.cur = 0
        self.in_turn = False
        self.n = 0

    def push(self, q: int, op: int) -> None:
        self.queues[q].append(op)
        self.n += 1

    def pop(self) -> int | None:
        if self.n == 0:
            return None
        k = len(self.queues)
        while True:
            c = self.cur
            if not self.in_turn:
                if not self.queues[c]:
                    self.deficit[c] = 0.0
                    self.cur = (c + 1) % k
                    continue
                self.deficit[c] += self.quanta[c]
                self.in_turn = True
            if self.deficit[c] >= 1.0 and self.queues[c]:
                op = self.queues[c].popleft()
                self.deficit[c] -= 1.0
                self.n -= 1
                if not self.queues[c]:
                    self.deficit[c] = 0.0
                    self.in_turn = False
                    self.cur = (c + 1) % k
                return op
            if not self.queues[c]:
                self.deficit[c] = 0.0
            self.in_turn = False
            self.cur = (c + 1) % k


def reference_latencies(
    arrays: dict[str, Any],
    *,
    servers: int,
    slots: int,
    clients: int,
    net_latency_ns: int,
    policy: str,
    params: dict[str, float] | None = None,
    speeds: list[float] | None = None,
    threads: int = 0,
    think_ns: int = 0,
) -> list[int]:
    """Per-request latency (ns) under `policy` ('fifo' or 'rein') for `kvsim.Workload.arrays()`."""
    p = {"k": 4.0, "range_factor": 3.0, "r_q1": 5.0, "rate_step": 1.0, "tau_1": 1.0, **(params or {})}
    arrival = [int(x) for x in arrays["arrival_ns"]]
    client = [int(x) for x in arrays["client"]]
    req_opsets = [int(x) for x in arrays["req_opsets"]]
    opset_group = [int(x) for x in arrays["opset_group"]]
    opset_req = [int(x) for x in arrays["opset_req"]]
    opset_ops = [int(x) for x in arrays["opset_ops"]]
    demand = [int(x) for x in arrays["demand_ns"]]
    replicas = np.asarray(arrays["replicas"]).tolist()
    rf = len(replicas[0])
    n_req, d = len(arrival), net_latency_ns
    rates = [p["r_q1"] - i * p["rate_step"] for i in range(int(p["k"]))]

    rr: dict[tuple[int, int], int] = {}
    opset_server = [0] * len(opset_group)
    opset_queue = [0] * len(opset_group)
    remaining = [opset_ops[req_opsets[r + 1]] - opset_ops[req_opsets[r]] for r in range(n_req)]
    latency = [0] * n_req
    free = [list(range(slots)) for _ in range(servers)]
    fifo: list[deque[int]] = [deque() for _ in range(servers)]
    drr = [_Drr(rates) for _ in range(servers)]
    op_opset = [0] * len(demand)
    for o in range(len(opset_group)):
        for i in range(opset_ops[o], opset_ops[o + 1]):
            op_opset[i] = o

    def service(s: int, dem: int) -> int:
        if speeds is None or speeds[s] == 1.0:
            return dem
        return math.floor(dem / speeds[s] + 0.5)

    closed = threads > 0
    thread_of = [0] * n_req
    if closed:
        arrival = [0] * n_req
        heap: list[tuple[int, int, str, int, int]] = [(0, t, "arrive", t, 0) for t in range(min(threads, n_req))]
    else:
        heap = [(arrival[r], r, "arrive", r, 0) for r in range(n_req)]
    heapq.heapify(heap)
    seq = n_req
    next_req = 0
    dirty: list[int] = []
    while heap:
        now, _, kind, a, b = heapq.heappop(heap)
        if kind == "arrive":
            if closed:
                if next_req >= n_req:
                    continue  # a thread with nothing left to issue
                r = next_req
                arrival[r], thread_of[r] = now, a
            else:
                r = a
            next_req += 1
            costs = []
            for o in range(req_opsets[r], req_opsets[r + 1]):
                g = opset_group[o]
                key = (client[r], g)
                i = rr.get(key, client[r] % rf)
                rr[key] = (i + 1) % rf
                opset_server[o] = replicas[g][i]
                costs.append(float(opset_ops[o + 1] - opset_ops[o]))
            if policy == "rein":
                cb = max(costs)
                bn = costs.index(cb)
                q_bn = bottleneck_queue(cb, len(rates), p["range_factor"], p["tau_1"])
                for j, o in enumerate(range(req_opsets[r], req_opsets[r + 1])):
                    opset_queue[o] = q_bn if j == bn else slack_queue(costs[j], cb, q_bn, rates)
            heapq.heappush(heap, (now + d, seq, "servers", r, 0))
            seq += 1
        elif kind == "servers":
            for o in range(req_opsets[a], req_opsets[a + 1]):
                s = opset_server[o]
                for op in range(opset_ops[o], opset_ops[o + 1]):
                    if policy == "rein":
                        drr[s].push(opset_queue[o], op)
                    else:
                        fifo[s].append(op)
                if s not in dirty:
                    dirty.append(s)
        else:
            op, slot = a, b
            o = op_opset[op]
            s = opset_server[o]
            free[s].append(slot)
            r = opset_req[o]
            remaining[r] -= 1
            if remaining[r] == 0:
                latency[r] = now + d - arrival[r]
                if closed:
                    heapq.heappush(heap, (now + d + think_ns, seq, "arrive", thread_of[r], 0))
                    seq += 1
            if s not in dirty:
                dirty.append(s)
        # A thread with nothing left to issue is not an event (the engine drops it).
        while closed and next_req >= n_req and heap and heap[0][2] == "arrive":
            heapq.heappop(heap)
        if dirty and (not heap or heap[0][0] > now):
            for s in dirty:
                while free[s]:
                    nxt = drr[s].pop() if policy == "rein" else (fifo[s].popleft() if fifo[s] else None)
                    if nxt is None:
                        break
                    slot = min(free[s])
                    free[s].remove(slot)
                    heapq.heappush(heap, (now + service(s, demand[nxt]), seq, "done", nxt, slot))
                    seq += 1
            dirty = []
    return latency
