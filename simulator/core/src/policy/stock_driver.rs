//! The client side of the coordinator section (`coordinator.rs`), for any queue policy: the application's multiget shape (which keys travel in one query), the driver's
//! query plans (which replica coordinates a token-aware query) and its speculative executions. The engine
//! (`engine/handlers.rs`) drives them; sources and choices in docs/stock-cassandra.md.
//!
//! **Queries.** A multiget's keys, in the application's order (the trace's), are cut into queries: `in` — one
//! `SELECT ... IN (...)` per `chunk` keys (0 = all of them), coordinated by a node without a routing key, each
//! partition read from the coordinator's snitch choice (the replay's replica selector); `per-partition` — one
//! token-aware query per key, coordinated by the replica the driver puts first, which reads the replica its own
//! snitch puts first (inline when that is itself). An unpaged query's latency (sent with its multiget → its last
//! key answered) is what the coordinator records once per partition (`StorageProxy`'s coordinator read latency,
//! which feeds the percentile threshold); a paged one records each partition's own.
//!
//! **Query plans** (`per-partition`): Java driver 4 (`DefaultLoadBalancingPolicy`): the replicas shuffled; with
//! slow-replica avoidance and ≥ 3 replicas, unhealthy replicas (≥ 10 in flight from this client and fewer than 2
//! responses in the last 200 ms) go to the back when they are fewer than half, then the first two are swapped
//! when the first has more in flight. Python (`TokenAwarePolicy`): the replicas in ring order, shuffled when
//! `shuffle_replicas`. No node is "newly up" in a replay.
//!
//! **Speculative executions** (`ConstantSpeculativeExecutionPolicy`, both drivers): while a query is not
//! answered, execution e (2..=max) starts `(e − 1) × delay` after the first; it sends the whole query again (every
//! key is read again: real load) to the plan's e-th node (`per-partition`, which reads from its own snitch's
//! choice; past the replicas, a non-replica coordinator reads from the snitch's choice) or to another coordinator
//! (`in`: each key from the snitch's choice at that time). Each key's first answer counts. The Java driver
//! schedules them on its wheel timer (`se_tick_ms`, [`timer_fires_at`]): execution e + 1 is armed when execution
//! e starts, `delay` later, and fires on the first tick past that deadline; tick 0 (the Python driver) is exact.
use std::collections::{HashMap, VecDeque};

use crate::coordinator::CoordinatorConfig;
use crate::rng::Rng;
use crate::workload::Workload;

/// Random stream of the drivers' replica shuffles.
const STREAM_DRIVER: u64 = 7;
/// Java driver 4: in-flight requests from which a node is busy (`MAX_IN_FLIGHT_THRESHOLD`).
pub const MAX_IN_FLIGHT: u32 = 10;
/// Java driver 4: a node answering fewer than 2 times within this window is slow (`RESPONSE_COUNT_RESET_INTERVAL`).
pub const RESPONSE_WINDOW_NS: u64 = 200_000_000;
/// No response yet.
const NONE: u64 = u64::MAX;

/// When a timeout of Netty's `HashedWheelTimer` due at `deadline` (ns since the timer's start) fires, with a
/// tick of `tick` ns: on the worker's iteration ⌊deadline / tick⌋, which runs at (⌊deadline / tick⌋ + 1) × tick
/// (`transferTimeoutsToBuckets` puts it in bucket ⌊deadline / tick⌋; iteration k's `waitForNextTick` waits
/// until tick × (k + 1), then `expireTimeouts` that bucket). Tick 0: at `deadline` (exact timing).
#[inline]
pub fn timer_fires_at(deadline: u64, tick: u64) -> u64 {
    deadline
        .checked_div(tick)
        .map_or(deadline, |k| (k + 1).saturating_mul(tick))
}

/// When driver execution `k` (1 = the first, sent at `first`) starts, each armed `delay` ns after the previous
/// one started, on a timer of tick `tick` ns ([`timer_fires_at`]; tick 0: `first + (k − 1) × delay`).
#[inline]
pub fn execution_start(first: u64, k: u32, delay: u64, tick: u64) -> u64 {
    if tick == 0 {
        return first + (k.saturating_sub(1)) as u64 * delay;
    }
    (1..k).fold(first, |at, _| timer_fires_at(at + delay, tick))
}

/// The queries of the `in` shape with more than one key per query: which query each op belongs to, and how many
/// of each query's keys are unanswered. A query's keys are its request's ops whose input ranks fall in its chunk;
/// they are listed by scanning the request's ops (engine order), and counted from the request's size. (Queries
/// of one key — `per-partition`, or `chunk` 1 — are implicit: a query is its key's op, answered at the op's first
/// answer, `answered_at` in the engine; nothing is kept per query, see [`StockClient::per_key`].)
#[derive(Debug, Clone, Default)]
pub struct Queries {
    /// Keys per query (0 = all the request's keys).
    pub chunk: usize,
    /// Query of each op (engine op order), where [`Queries::of`] cannot tell it from the op's input index: empty
    /// with `chunk` 0 (a request's one query), and when each request's ops are its input positions `a..b`, as
    /// in the layouts `WorkloadLayout::build` makes (an op's input rank in its request is then `op_input − a`).
    pub of_op: Vec<u32>,
    /// Queries of request r: `req_start[r]..req_start[r + 1]`.
    pub req_start: Vec<u32>,
    /// Ops of each query not answered yet (first answers).
    pub left: Vec<u32>,
    /// When each query's last answer reaches the client (`u64::MAX` until then).
    pub done_at: Vec<u64>,
}

impl Queries {
    /// Each request's ops in input order, cut every `chunk` (0 = all).
    pub fn build(wl: &Workload, chunk: usize) -> Queries {
        let explicit = chunk != 0 && !inputs_are_positions(wl);
        let mut of_op = vec![0u32; if explicit { wl.ops() } else { 0 }];
        let mut req_start = Vec::with_capacity(wl.requests() + 1);
        let mut left = Vec::new();
        let mut next = 0u32;
        let mut order: Vec<(u32, u32)> = Vec::new();
        for r in 0..wl.requests() {
            req_start.push(next);
            let (a, b) = request_ops(wl, r);
            let c = if chunk == 0 { b - a } else { chunk };
            if explicit {
                input_order(wl, a, b, &mut order);
                for (rank, &(_, op)) in order.iter().enumerate() {
                    of_op[op as usize] = next + (rank / c) as u32;
                }
            }
            let n = (b - a).div_ceil(c);
            left.extend((0..n).map(|k| c.min(b - a - k * c) as u32));
            next += n as u32;
        }
        req_start.push(next);
        let nq = next as usize;
        Queries {
            chunk,
            of_op,
            req_start,
            left,
            done_at: vec![u64::MAX; nq],
        }
    }

    pub fn len(&self) -> usize {
        self.left.len()
    }

    pub fn is_empty(&self) -> bool {
        self.left.is_empty()
    }

    /// The query of op `op` of request `r`, whose ops are `a..`.
    #[inline]
    pub fn of(&self, wl: &Workload, op: usize, r: usize, a: usize) -> usize {
        let first = self.req_start[r] as usize;
        if self.chunk == 0 {
            first
        } else if self.of_op.is_empty() {
            first + (wl.op_input[op] as usize - a) / self.chunk
        } else {
            self.of_op[op] as usize
        }
    }

    /// The request of query `q`.
    pub fn request(&self, q: usize) -> usize {
        self.req_start.partition_point(|&s| s as usize <= q) - 1
    }

    /// Keys of query `q` of request `r`, which has `n` keys.
    pub fn keys(&self, q: usize, r: usize, n: usize) -> u32 {
        let c = if self.chunk == 0 { n } else { self.chunk };
        let k = q - self.req_start[r] as usize;
        c.min(n - k * c) as u32
    }
}

/// Every request's ops `a..b` have the input indices `a..b` (in some order): an op's rank in its request's input
/// order is `op_input − a`.
fn inputs_are_positions(wl: &Workload) -> bool {
    let mut seen = Vec::new();
    for r in 0..wl.requests() {
        let (a, b) = request_ops(wl, r);
        seen.clear();
        seen.resize(b - a, false);
        for op in a..b {
            let i = wl.op_input[op] as usize;
            if !(a..b).contains(&i) || std::mem::replace(&mut seen[i - a], true) {
                return false;
            }
        }
    }
    true
}

/// The ops `a..b` of request `r` (engine order).
pub fn request_ops(wl: &Workload, r: usize) -> (usize, usize) {
    (
        wl.opset_ops[wl.req_opsets[r] as usize] as usize,
        wl.opset_ops[wl.req_opsets[r + 1] as usize] as usize,
    )
}

/// `order` = the ops `a..b` of one request in input order (the application's key order), as (input index, op).
pub fn input_order(wl: &Workload, a: usize, b: usize, order: &mut Vec<(u32, u32)>) {
    order.clear();
    order.extend((a..b).map(|op| (wl.op_input[op], op as u32)));
    order.sort_unstable();
}

/// The workload with one opset per op (the `per-partition` shape: every key is its own query, routed on its
/// own). Op order, demands and requests are unchanged.
pub fn split_partitions(wl: &Workload) -> Workload {
    let n = wl.ops();
    let mut group = Vec::with_capacity(n);
    let mut req = Vec::with_capacity(n);
    let mut req_opsets = Vec::with_capacity(wl.requests() + 1);
    req_opsets.push(0u32);
    for r in 0..wl.requests() {
        for o in wl.req_opsets[r] as usize..wl.req_opsets[r + 1] as usize {
            for _ in wl.opset_ops[o]..wl.opset_ops[o + 1] {
                group.push(wl.opset_group[o]);
                req.push(r as u32);
            }
        }
        req_opsets.push(group.len() as u32);
    }
    Workload {
        opset_group: group.into(),
        opset_req: req.into(),
        opset_ops: (0..=n as u32).collect::<Vec<u32>>().into(),
        req_opsets: req_opsets.into(),
        ..wl.clone()
    }
}

/// The driver speculative executions armed: one entry per query whose next execution is scheduled (a query has
/// at most one), from its first execution until an execution finds it answered or is its last. The timer carries
/// the entry's index; freed entries are reused, so the table holds the queries in flight, not one entry per
/// query of the trace.
#[derive(Debug, Clone, Default)]
pub struct Executions {
    /// Per entry: the query (`per-partition`: its op) and the executions started.
    entries: Vec<(u32, u32)>,
    /// `per-partition`: each entry's query plan (`rf` nodes from `i * rf`).
    plans: Vec<u32>,
    rf: usize,
    free: Vec<u32>,
}

impl Executions {
    /// An empty table; `rf` = nodes of a query plan (`per-partition`), 0 without plans (`in`).
    pub fn new(rf: usize) -> Self {
        Executions {
            rf,
            ..Executions::default()
        }
    }

    /// An entry for `query`, its first execution started, with its `plan` (`rf` nodes, or none).
    pub fn open(&mut self, query: u32, plan: &[u32]) -> u32 {
        debug_assert_eq!(plan.len(), self.rf);
        match self.free.pop() {
            Some(i) => {
                self.entries[i as usize] = (query, 1);
                let p = i as usize * self.rf;
                self.plans[p..p + self.rf].copy_from_slice(plan);
                i
            }
            None => {
                self.entries.push((query, 1));
                self.plans.extend_from_slice(plan);
                (self.entries.len() - 1) as u32
            }
        }
    }

    /// The query of entry `i`.
    pub fn query(&self, i: u32) -> u32 {
        self.entries[i as usize].0
    }

    /// Entry `i`'s query starts one more execution: its number (2 for the first speculative one).
    pub fn start(&mut self, i: u32) -> u32 {
        let e = &mut self.entries[i as usize].1;
        *e += 1;
        *e
    }

    /// The `k`-th node (from 0) of entry `i`'s plan.
    pub fn node(&self, i: u32, k: usize) -> u32 {
        self.plans[i as usize * self.rf + k]
    }

    /// Entry `i` is done (its query answered, or its last execution started); its index is free.
    pub fn close(&mut self, i: u32) {
        self.free.push(i);
    }

    /// Entries open.
    pub fn len(&self) -> usize {
        self.entries.len() - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The driver of every client: its query plans and what its slow-replica avoidance reads (per client and node:
/// requests in flight, the times of the last two responses).
#[derive(Debug, Clone)]
pub struct Driver {
    java: bool,
    avoid: bool,
    shuffle: bool,
    servers: usize,
    rng: Rng,
    /// Requests in flight from client c to node s at `c * servers + s`.
    pub inflight: Vec<u32>,
    /// The last two response times (older first; `NONE` = none yet).
    last: Vec<[u64; 2]>,
    unhealthy: Vec<bool>,
}

impl Driver {
    pub fn new(cfg: &CoordinatorConfig, clients: usize, servers: usize, seed: u64) -> Driver {
        Driver {
            java: cfg.driver < 0.5,
            avoid: cfg.slow_avoid >= 0.5,
            shuffle: cfg.shuffle >= 0.5,
            servers,
            rng: Rng::new(seed, STREAM_DRIVER),
            inflight: vec![0; clients * servers],
            last: vec![[NONE; 2]; clients * servers],
            unhealthy: Vec::new(),
        }
    }

    /// A request of `client` to node `s` is sent.
    #[inline]
    pub fn sent(&mut self, client: u32, s: u32) {
        self.inflight[client as usize * self.servers + s as usize] += 1;
    }

    /// Node `s` answered a request of `client`; the answer reaches the driver at `at`.
    #[inline]
    pub fn answered(&mut self, client: u32, s: u32, at: u64) {
        let i = client as usize * self.servers + s as usize;
        self.inflight[i] -= 1;
        let l = &mut self.last[i];
        if l[1] == NONE {
            if l[0] == NONE {
                l[0] = at;
            } else {
                l[1] = at;
            }
        } else {
            *l = [l[1], at];
        }
    }

    fn in_flight(&self, client: u32, s: u32) -> u32 {
        self.inflight[client as usize * self.servers + s as usize]
    }

    /// `isUnhealthy`: busy (≥ 10 in flight) and fewer than 2 responses in the last 200 ms.
    fn is_unhealthy(&self, client: u32, s: u32, now: u64) -> bool {
        let i = client as usize * self.servers + s as usize;
        let [oldest, newest] = self.last[i];
        let enough = newest != NONE && oldest.saturating_add(RESPONSE_WINDOW_NS) >= now;
        self.inflight[i] >= MAX_IN_FLIGHT && !enough
    }

    /// The query plan's replicas for a token-aware query of `client` over `replicas` (ring order) at `now`,
    /// into `plan`.
    pub fn plan(&mut self, client: u32, replicas: &[u32], now: u64, plan: &mut Vec<u32>) {
        plan.clear();
        plan.extend_from_slice(replicas);
        let n = plan.len();
        if self.java {
            if n > 1 {
                self.shuffle_head(plan);
            }
            if self.avoid && n > 2 {
                let mut unhealthy = std::mem::take(&mut self.unhealthy);
                unhealthy.clear();
                unhealthy.extend(plan.iter().map(|&s| self.is_unhealthy(client, s, now)));
                self.unhealthy = unhealthy;
                let count = self.unhealthy.iter().filter(|&&u| u).count();
                if count > 0 && (count as f64) < n as f64 / 2.0 {
                    // Unhealthy replicas to the back, from the back (ArrayUtils.bubbleDown).
                    let mut moved = 0;
                    let mut i = n;
                    while i > 0 && moved < count {
                        i -= 1;
                        if self.unhealthy[i] {
                            let x = plan.remove(i);
                            plan.insert(n - 1 - moved, x);
                            moved += 1;
                        }
                    }
                }
                if self.in_flight(client, plan[0]) > self.in_flight(client, plan[1]) {
                    plan.swap(0, 1);
                }
            }
        } else if self.shuffle && n > 1 {
            self.shuffle_head(plan);
        }
    }

    /// Fisher–Yates, as `ArrayUtils.shuffleHead` and Python's `random.shuffle`.
    fn shuffle_head(&mut self, plan: &mut [u32]) {
        for i in (1..plan.len()).rev() {
            let j = self.rng.below(i as u64 + 1) as usize;
            plan.swap(i, j);
        }
    }
}

/// The client side of one replay's coordinator section (built when it speculates, hedges or routes per
/// partition: [`CoordinatorConfig::active`]).
#[derive(Debug, Clone)]
pub struct StockClient {
    pub per_partition: bool,
    /// Every query is one key (`per-partition`, or the `in` shape with `chunk` 1): queries are implicit (their
    /// ops), `queries` is empty.
    pub per_key: bool,
    /// Driver speculative execution is on (max executions > 1).
    pub hedge: bool,
    pub max_exec: u32,
    pub delay_ns: u64,
    /// The driver timer's tick, ns (0: exact; [`timer_fires_at`]).
    pub tick_ns: u64,
    pub rf: usize,
    /// The `in` shape's queries of several keys (empty when [`StockClient::per_key`]).
    pub queries: Queries,
    pub driver: Driver,
    /// Driver speculative executions armed.
    pub execs: Executions,
    /// Reads of speculative executions on their way to their servers: (op id, opset, server), FIFO.
    pub sends: VecDeque<(u32, u32, u32)>,
    pub plan_buf: Vec<u32>,
    /// `per-partition` with hedging, while a request is placed: its keys' plans (`rf` nodes each, engine order),
    /// and its keys in input order (the order their executions are armed in).
    pub req_plans: Vec<u32>,
    pub order: Vec<(u32, u32)>,
    /// Paged `IN` queries: each request's ops are read one at a time, in op order.
    pub paged: bool,
    /// Paged: per request, when its partition read in flight was sent (its latency sample's start).
    pub page_at: Vec<u64>,
    /// `per-partition`: the coordinator node of each routed driver execution's read in flight, by its copy id.
    pub exec_coord: HashMap<u32, u32>,
}

impl StockClient {
    /// When the next execution of a query, armed at `now`, fires: `delay` later, on the driver's timer.
    #[inline]
    pub fn next_execution_at(&self, now: u64) -> u64 {
        timer_fires_at(now + self.delay_ns, self.tick_ns)
    }

    pub fn new(
        cfg: &CoordinatorConfig,
        wl: &Workload,
        clients: usize,
        servers: usize,
        rf: usize,
        seed: u64,
    ) -> Self {
        let per_partition = cfg.shape >= 0.5;
        let per_key = per_partition || cfg.chunk as usize == 1;
        StockClient {
            per_partition,
            per_key,
            hedge: cfg.se_max >= 1.5,
            max_exec: cfg.se_max as u32,
            delay_ns: (cfg.se_delay_ms * 1e6).round() as u64,
            tick_ns: cfg.tick_ns(),
            rf,
            queries: if per_key {
                Queries::default()
            } else {
                Queries::build(wl, cfg.chunk as usize)
            },
            driver: Driver::new(cfg, clients, servers, seed),
            execs: Executions::new(if per_partition { rf } else { 0 }),
            sends: VecDeque::new(),
            plan_buf: Vec::with_capacity(rf),
            req_plans: Vec::new(),
            order: Vec::new(),
            paged: cfg.paged(),
            page_at: vec![0; if cfg.paged() { wl.requests() } else { 0 }],
            exec_coord: HashMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_cut_the_keys_in_input_order() {
        // One request, keys in input order 0..5 on groups [1, 0, 1, 0, 2]: engine order groups 0, 1, 2.
        let wl = Workload {
            arrival: vec![0].into(),
            client: vec![0].into(),
            req_opsets: vec![0, 3].into(),
            opset_group: vec![0, 1, 2].into(),
            opset_req: vec![0, 0, 0].into(),
            opset_ops: vec![0, 2, 4, 5].into(),
            demand: vec![1; 5].into(),
            op_input: vec![1, 3, 0, 2, 4].into(),
            mean_demand: Vec::new().into(),
        };
        let q = Queries::build(&wl, 2);
        // input 0,1 → q0; 2,3 → q1; 4 → q2. Engine ops: op0 = input 1, op1 = input 3, op2 = input 0, ...
        // (inputs 0..5 are the request's positions: read from `op_input`, no per-op array)
        let of: Vec<usize> = (0..5).map(|op| q.of(&wl, op, 0, 0)).collect();
        assert_eq!((of, q.of_op.len()), (vec![0, 1, 0, 1, 2], 0));
        assert_eq!(q.req_start, vec![0, 3]);
        assert_eq!(
            (q.keys(0, 0, 5), q.keys(1, 0, 5), q.keys(2, 0, 5)),
            (2, 2, 1)
        );
        assert_eq!((q.left.clone(), q.request(2)), (vec![2, 2, 1], 0));
        let all = Queries::build(&wl, 0);
        assert_eq!(all.len(), 1);
        assert_eq!(
            (all.keys(0, 0, 5), all.of(&wl, 4, 0, 0), all.left[0]),
            (5, 0, 5)
        );
        // Two requests: ops 0..5 as above, then 5..8 (input 5..8) on groups [2, 2, 0].
        let two = Workload {
            arrival: vec![0, 1].into(),
            client: vec![0, 0].into(),
            req_opsets: vec![0, 3, 5].into(),
            opset_group: vec![0, 1, 2, 0, 2].into(),
            opset_req: vec![0, 0, 0, 1, 1].into(),
            opset_ops: vec![0, 2, 4, 5, 6, 8].into(),
            demand: vec![1; 8].into(),
            op_input: vec![1, 3, 0, 2, 4, 7, 5, 6].into(),
            mean_demand: Vec::new().into(),
        };
        let q = Queries::build(&two, 2);
        assert_eq!(q.req_start, vec![0, 3, 5]);
        let of: Vec<usize> = (5..8).map(|op| q.of(&two, op, 1, 5)).collect();
        assert_eq!(of, vec![4, 3, 3]);
        // inputs that are not the requests' positions: the queries are kept per op, the same
        let mut moved = two.clone();
        moved.op_input = vec![1, 3, 0, 2, 4, 9, 5, 6].into();
        let m = Queries::build(&moved, 2);
        assert_eq!(
            (m.of_op.clone(), m.left.clone()),
            (vec![0, 1, 0, 1, 2, 4, 3, 3], q.left.clone())
        );
        assert_eq!(m.of(&moved, 5, 1, 5), 4);
        assert_eq!((q.request(2), q.request(3), q.request(4)), (0, 1, 1));
        assert_eq!((q.keys(3, 1, 3), q.keys(4, 1, 3)), (2, 1));
        assert_eq!(q.left, vec![2, 2, 1, 2, 1]);
        let whole = Queries::build(&two, 0);
        assert_eq!(
            (
                whole.of(&two, 6, 1, 5),
                whole.request(1),
                whole.keys(1, 1, 3)
            ),
            (1, 1, 3)
        );
        let pp = split_partitions(&wl);
        assert_eq!(&pp.opset_group[..], &[0, 0, 1, 1, 2]);
        assert_eq!(&pp.req_opsets[..], &[0, 5]);
        assert_eq!(Queries::build(&pp, 1).len(), 5);
    }

    #[test]
    fn the_wheel_timer_fires_on_the_first_tick_past_the_deadline() {
        const MS: u64 = 1_000_000;
        // Tick 100 ms: a 10 ms hedge armed at 0.3 ms (deadline 10.3 ms) lands in bucket 0, expired by the
        // worker's first iteration at 100 ms; armed at 95 ms (deadline 105) → bucket 1, at 200 ms.
        assert_eq!(timer_fires_at(10_300_000, 100 * MS), 100 * MS);
        assert_eq!(timer_fires_at(105 * MS, 100 * MS), 200 * MS);
        // A deadline on a tick boundary waits a whole tick: 100 ms → bucket 1 → 200 ms.
        assert_eq!(timer_fires_at(100 * MS, 100 * MS), 200 * MS);
        // Tick 1 ms: late by under a millisecond (10.3 → 11), by one on a boundary (10 → 11).
        assert_eq!(timer_fires_at(10_300_000, MS), 11 * MS);
        assert_eq!(timer_fires_at(10 * MS, MS), 11 * MS);
        // Tick 0: exact.
        assert_eq!(timer_fires_at(10_300_000, 0), 10_300_000);
        // Executions are chained: each armed when the previous starts. Delay 10, tick 4, first at 0: the
        // second's deadline 10 → 12; the third's 22 → 24 (exact: 10, 20).
        let starts: Vec<u64> = (1..=3)
            .map(|k| execution_start(0, k, 10 * MS, 4 * MS))
            .collect();
        assert_eq!(starts, vec![0, 12 * MS, 24 * MS]);
        let exact: Vec<u64> = (1..=3).map(|k| execution_start(0, k, 10 * MS, 0)).collect();
        assert_eq!(exact, vec![0, 10 * MS, 20 * MS]);
        // Delay 0 still waits for the next tick (a newTimeout of 0 ms is expired by the next iteration).
        assert_eq!(execution_start(3 * MS, 2, 0, 5 * MS), 5 * MS);
    }

    #[test]
    fn executions_reuse_the_entries_of_answered_queries() {
        let mut x = Executions::new(3);
        let a = x.open(7, &[2, 0, 1]);
        let b = x.open(9, &[1, 2, 0]);
        assert_eq!((x.query(a), x.query(b), x.len()), (7, 9, 2));
        assert_eq!((x.start(a), x.start(a), x.start(b)), (2, 3, 2));
        assert_eq!((x.node(a, 0), x.node(a, 2), x.node(b, 1)), (2, 1, 2));
        x.close(a);
        assert_eq!(x.len(), 1);
        // a's entry again: the new query's count and plan, b's untouched
        let c = x.open(4, &[0, 1, 2]);
        assert_eq!((c, x.query(c), x.start(c)), (a, 4, 2));
        assert_eq!((x.node(c, 0), x.node(c, 2), x.node(b, 0)), (0, 2, 1));
        x.close(b);
        x.close(c);
        assert!(x.is_empty());
        // without plans (the `in` shape)
        let mut y = Executions::new(0);
        let q = y.open(5, &[]);
        assert_eq!((y.query(q), y.start(q)), (5, 2));
    }

    #[test]
    fn java_avoids_a_busy_silent_replica() {
        let cfg = CoordinatorConfig::cassandra();
        let mut d = Driver::new(&cfg, 1, 3, 1);
        let mut plan = Vec::new();
        // Node 2: 10 in flight, no response: unhealthy (1 of 3 < half) → always last.
        for _ in 0..10 {
            d.sent(0, 2);
        }
        for _ in 0..50 {
            d.plan(0, &[0, 1, 2], 0, &mut plan);
            assert_eq!(plan[2], 2);
        }
        // Two responses within 200 ms: healthy again (busy alone is not enough).
        d.answered(0, 2, 1);
        d.answered(0, 2, 2);
        d.sent(0, 2);
        d.sent(0, 2);
        let (mut first, mut last) = ([0; 3], [0; 3]);
        for _ in 0..300 {
            d.plan(0, &[0, 1, 2], 100_000_000, &mut plan);
            first[plan[0] as usize] += 1;
            last[plan[2] as usize] += 1;
        }
        assert!(last[2] < 300, "{last:?}");
        // ... but it has the most in flight: never first (the first two are ordered by in-flight).
        assert_eq!(first[2], 0, "{first:?}");
        let python = Driver::new(
            &CoordinatorConfig {
                driver: 1.0,
                ..CoordinatorConfig::cassandra()
            },
            1,
            3,
            1,
        );
        let mut p = python;
        p.plan(0, &[2, 0, 1], 0, &mut plan);
        assert_eq!(plan, vec![2, 0, 1], "python: ring order");
    }
}
