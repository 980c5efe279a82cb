//! The state of one replay: [`Sim`], built once by [`Sim::new`] from the validated inputs, driven by the handlers
//! (`handlers.rs`) and turned into the [`RunResult`] by [`Sim::finish`].
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::Instant;

use super::Args;
use crate::cluster::Cluster;
use crate::config::ReplayConfig;
use crate::error::SimError;
use crate::held::HeldOpsets;
use crate::policy::speculative::LatencyEstimator;
use crate::policy::stock_driver::StockClient;
use crate::policy::{PolicyConfig, Scheduler, Tag, TagFields, TailxConfig};
use crate::replica::{ReplicaSelector, SelectorConfig};
use crate::result::{CopyStats, HeldStats, OpRecords, RunResult, TimeoutStats, WriteStats};
use crate::runs::RunQueue;
use crate::server_model::ServerModel;
use crate::stats::summarize;
use crate::timers::SlotTimers;
use crate::workload::Workload;

/// When an opset was sent to its server, by which request and client.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sent {
    pub(super) at: u64,
    pub(super) client: u32,
    pub(super) req: u32,
}

/// The opsets' tags, only the fields the policy sets ([`Scheduler::tag_fields`]; the others are the default's):
/// `fifo` keeps none, `rein` 4 bytes an opset, the priority policies 8 bytes an opset, or 8 bytes a request when
/// a request's opsets share their tag (`brb-equalmax`).
#[derive(Debug, Default)]
pub(super) struct OpsetTags {
    prio: Vec<f64>,
    queue: Vec<u32>,
    /// Indexed by request.
    per_request: bool,
}

impl OpsetTags {
    fn new(fields: TagFields, opsets: usize, requests: usize) -> Self {
        let n = if fields.per_request { requests } else { opsets };
        OpsetTags {
            prio: vec![0.0; if fields.prio { n } else { 0 }],
            queue: vec![0; if fields.queue { n } else { 0 }],
            per_request: fields.per_request,
        }
    }

    /// The tags of request `r`'s opsets, `o0..o0 + tags.len()`.
    #[inline(always)]
    pub(super) fn set(&mut self, r: usize, o0: usize, tags: &[Tag]) {
        let (i, tags) = if self.per_request {
            debug_assert!(tags.iter().all(|t| *t == tags[0]));
            (r, &tags[..1])
        } else {
            (o0, tags)
        };
        // a policy's `tag_fields` names every field its tagging sets (checked in debug builds)
        debug_assert!(
            !self.prio.is_empty() || tags.iter().all(|t| t.prio == Tag::default().prio),
            "the policy sets a priority its tag_fields leave out"
        );
        debug_assert!(
            !self.queue.is_empty() || tags.iter().all(|t| t.queue == Tag::default().queue),
            "the policy sets a queue its tag_fields leave out"
        );
        if !self.prio.is_empty() {
            for (p, t) in self.prio[i..i + tags.len()].iter_mut().zip(tags) {
                *p = t.prio;
            }
        }
        if !self.queue.is_empty() {
            for (q, t) in self.queue[i..i + tags.len()].iter_mut().zip(tags) {
                *q = t.queue;
            }
        }
    }

    /// The tag of opset `o` (`opset_req`: the workload's request of each opset).
    #[inline(always)]
    pub(super) fn get(&self, o: usize, opset_req: &[u32]) -> Tag {
        let mut t = Tag::default();
        if self.prio.is_empty() && self.queue.is_empty() {
            return t;
        }
        let i = if self.per_request {
            opset_req[o] as usize
        } else {
            o
        };
        if !self.prio.is_empty() {
            t.prio = self.prio[i];
        }
        if !self.queue.is_empty() {
            t.queue = self.queue[i];
        }
        t
    }
}

/// A flag per index (per opset, per op), 64 to a word.
#[derive(Debug, Default)]
pub(super) struct Flags(Vec<u64>);

impl Flags {
    fn new(n: usize) -> Self {
        Flags(vec![0; n.div_ceil(64)])
    }

    /// No flags kept (0 indices).
    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    #[inline(always)]
    pub(super) fn get(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 != 0
    }

    #[inline(always)]
    pub(super) fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
}

/// When each op's first answer reaches the client, kept as the time since its request arrived: 4 bytes an op. A
/// time of 2³² − 2 ns (4.3 s) or more is kept whole in `far`.
#[derive(Debug, Default)]
pub(super) struct Answers {
    since_arrival: Vec<u32>,
    far: HashMap<u32, u64>,
}

/// `Answers`: the op is not answered yet.
const UNANSWERED: u32 = u32::MAX;
/// `Answers`: the op's time is in `far`.
const FAR: u32 = u32::MAX - 1;

impl Answers {
    fn new(ops: usize) -> Self {
        Answers {
            since_arrival: vec![UNANSWERED; ops],
            far: HashMap::new(),
        }
    }

    /// Op `op` has its first answer.
    #[inline(always)]
    pub(super) fn answered(&self, op: usize) -> bool {
        self.since_arrival[op] != UNANSWERED
    }

    /// Op `op`, of a request that arrived at `arrived`, has its first answer at the client at `at`.
    #[inline(always)]
    pub(super) fn set(&mut self, op: usize, arrived: u64, at: u64) {
        let d = at - arrived;
        self.since_arrival[op] = if d < FAR as u64 {
            d as u32
        } else {
            self.far.insert(op as u32, at);
            FAR
        };
    }

    /// When op `op`, of a request that arrived at `arrived`, has its first answer at the client (`u64::MAX` until
    /// it has one).
    #[inline(always)]
    pub(super) fn at(&self, op: usize, arrived: u64) -> u64 {
        match self.since_arrival[op] {
            UNANSWERED => u64::MAX,
            FAR => self.far[&(op as u32)],
            d => arrived + d as u64,
        }
    }
}

/// Marks an `at_servers` entry that carries one late opset (sent after being held) instead of a request.
pub(super) const LATE_OPSET: u32 = 1 << 31;
/// With `LATE_OPSET`: the entry carries the copy of an opset (duplication / speculative retry).
pub(super) const COPY_OPSET: u32 = 1 << 30;
/// Without `LATE_OPSET`: the entry carries the reads of a driver speculative execution (their count; the reads
/// are in `StockClient::sends`).
pub(super) const DRV_BATCH: u32 = 1 << 29;
/// A `spec_q` value that is a driver speculative-execution timer, of the armed execution (`StockClient::execs`)
/// in its other bits (else: an opset's coordinator retry).
pub(super) const DRV_TIMER: u32 = 1 << 31;
/// A `spec_q` value (paged `IN` queries) that sends the read of the op in its other bits.
pub(super) const PAGE_SEND: u32 = 1 << 30;
/// A `spec_q` value (paged `IN` queries) that is the coordinator retry of the op in its other bits.
pub(super) const PAGE_TIMER: u32 = 1 << 29;
/// A `sent_at` value: the opset has not been sent by its client (held by the selector). A driver speculative
/// execution may still read its keys (`in` shape): such a read's response time is counted from the execution's
/// send, `d` before the read reached its server.
pub(super) const NOT_SENT: u64 = u64::MAX;

/// The members of a replay the event loop calls into: the policy, the selector, the event queues, the server
/// model, the speculative estimator and scratch buffers. They live apart from [`Sim`] (which borrows them) so
/// that `Sim`'s plain data — counters, flags and per-server / per-opset arrays — stays in registers: LLVM stops
/// promoting a struct's fields once a pointer into the struct is passed to a call.
pub(super) struct Parts<S, R> {
    pub(super) sched: S,
    pub(super) selector: R,
    // Pending events. Request arrivals are pre-sorted (seq = index); opsets reaching their servers are created in
    // arrival order at arrival + d, so a FIFO is already sorted by (time, seq); op completions are slot timers.
    // The next event is the least (time, seq) of the heads: the order of one global event queue.
    pub(super) at_servers: VecDeque<(u128, u32)>,
    pub(super) timers: SlotTimers,
    /// Held opsets' retry times.
    pub(super) retries: BinaryHeap<Reverse<u128>>,
    /// TailX: procrastinated opsets by release time.
    pub(super) delay_q: BinaryHeap<Reverse<(u128, u32)>>,
    /// Speculative timers, one run of deadlines per client (a k-way merge: `runs.rs`).
    pub(super) spec_q: RunQueue,
    /// Closed loop: threads ready to issue, (time, seq, thread).
    pub(super) ready: BinaryHeap<Reverse<(u64, u64, u32)>>,
    /// Servers that may start ops once the current instant is applied, in the order they became dirty.
    pub(super) dirty: Vec<u32>,
    pub(super) smodel: Option<ServerModel>,
    pub(super) spec: Option<LatencyEstimator>,
    /// The coordinator section: queries of the multiget shape, the driver's plans and speculative executions.
    pub(super) stock: Option<StockClient>,
    /// Opsets held at the clients by the selector.
    pub(super) backlog: HeldOpsets,
    /// Scratch of one request's tagging.
    pub(super) sizes: Vec<u32>,
    pub(super) costs: Vec<f64>,
    pub(super) servers: Vec<u32>,
    pub(super) tags: Vec<Tag>,
    /// Scratch of a held-opset retry: servers the selector freed, their replica groups.
    pub(super) freed: Vec<u32>,
    pub(super) cand_groups: Vec<u32>,
    /// Replica groups of each server (a retry after servers turned available visits only their groups).
    pub(super) server_groups: Vec<Vec<u32>>,
}

/// Everything else one replay reads and changes. `EXT = false` is the plain loop (see `engine::run`): the fields
/// of the general loop stay empty and the branches that read them fold away. Groups below: inputs and constants,
/// event counters, servers, requests and opsets, replica selection, copies and writes, closed loop.
pub(super) struct Sim<'a, const EXT: bool, S, R> {
    pub(super) p: &'a mut Parts<S, R>,
    // Inputs and what is derived from them once.
    pub(super) cluster: &'a Cluster,
    pub(super) wl: &'a Workload,
    pub(super) rc: &'a ReplayConfig,
    pub(super) policy: &'a PolicyConfig,
    /// TailX with TL / TS resolved (None for the other policies).
    pub(super) tailx: Option<TailxConfig>,
    pub(super) started: Instant,
    pub(super) n_req: usize,
    pub(super) n_ops: usize,
    pub(super) n_ops32: u32,
    pub(super) n_servers: usize,
    /// One-way network latency, ns.
    pub(super) d: u64,
    /// Opset cost = Σ mean demand (in units of an average op) instead of the op count.
    pub(super) size_aware: bool,
    pub(super) cost_unit: f64,
    /// Round-robin replicas: no held opsets, no per-choice context.
    pub(super) plain: bool,
    /// The selector takes per-op feedback (the engine then tracks each server's resident ops).
    pub(super) fb_on: bool,
    pub(super) tailx_on: bool,
    pub(super) dup: bool,
    /// Duplication or speculative retry: ops may be served twice.
    pub(super) redundant: bool,
    /// Opsets' send times (`sent_at`) are kept: for feedback, and for the opset response times of client-side
    /// speculation (a coordinator section times its queries from the request's arrival instead).
    pub(super) sent_on: bool,
    /// The coordinator section tracks queries (`Parts::stock`).
    pub(super) sq_on: bool,
    /// The per-partition shape: the driver routes each key.
    pub(super) route_on: bool,
    /// Driver speculative executions.
    pub(super) hedge_on: bool,
    pub(super) write_on: bool,
    /// An op may be answered more than once (copies or writes): only its first answer counts.
    pub(super) multi: bool,
    pub(super) closed_on: bool,
    /// Read timeouts: replicas drop expired reads, requests time out (`CoordinatorConfig::drop_expired`).
    pub(super) drop_on: bool,
    /// Paged `IN` queries: a request's ops are read one at a time (`StockClient::paged`).
    pub(super) page_on: bool,
    /// Coordinators are nodes (the `per-partition` shape's, or `dynamic-snitch`'s `local` = 1): a read whose
    /// replica is its coordinator is local — it reaches its server when sent and its answer is at the
    /// coordinator when it ends (no network hop), no selector hears of it; when its server has a free slot for
    /// it then (`Stage.READ.maybeExecuteImmediately`) it runs inline and arms no coordinator retry.
    pub(super) local_on: bool,
    /// The read timeout, ns.
    pub(super) read_timeout: u64,
    /// The driver's delay between speculative executions, ns (execution e starts (e − 1) × it after the first,
    /// on the driver's timer: `stock_driver::execution_start`).
    pub(super) exec_delay: u64,
    /// The driver timer's tick, ns (0: exact; `stock_driver::timer_fires_at`).
    pub(super) exec_tick: u64,
    /// The stop rule (`ReplayConfig::stop`): measured requests are those from `stop_from` on; the replay stops
    /// when `stop_left` more of them have completed above `stop_above` ns (∞ / never without a rule).
    pub(super) stop_above: u64,
    pub(super) stop_from: usize,
    pub(super) stop_left: usize,

    // Event counters: the next sequence number, the next request to arrive, events applied.
    pub(super) seq: u64,
    pub(super) next_req: usize,
    pub(super) events: u64,

    // Servers.
    /// Free slots of each server (bit set).
    pub(super) free: Vec<u64>,
    /// Ops in flight to, queued at or in service at each server.
    pub(super) outstanding: Vec<u32>,
    pub(super) server_demand: Vec<u64>,
    pub(super) is_dirty: Vec<bool>,
    /// Actual service time of the op in each busy slot (with speeds it differs from the demand). Read back when
    /// the op ends, so the workload's demand array is not touched again (a cache miss with long queues).
    pub(super) slot_svc: Vec<u64>,
    /// With selector feedback: when the op in each busy slot reached its server (its own send + d).
    pub(super) slot_enq: Vec<u64>,
    pub(super) served_ops: u64,

    // Requests and opsets.
    pub(super) opset_server: Vec<u32>,
    /// `per-partition`: the node the driver sent each key's query to (its first execution's coordinator).
    pub(super) opset_coord: Vec<u32>,
    /// `per-partition` with coordinator retries: the key's first execution has answered the driver.
    pub(super) drv_done: Flags,
    /// Coordinators are nodes: the opsets whose coordinator read them inline on arrival (no retry timer).
    pub(super) inline: Flags,
    /// Coordinators are nodes: ops waiting in each server's queue (not started), which a local read's inline
    /// run needs a free slot beyond.
    pub(super) queued: Vec<u32>,
    pub(super) opset_tag: OpsetTags,
    /// Ops of each request not answered yet.
    pub(super) remaining: Vec<u32>,
    pub(super) latency: Vec<u64>,
    pub(super) rec: Option<OpRecords>,

    // Replica selection.
    /// Opsets not sent with their request (held, or procrastinated by TailX).
    pub(super) late: Flags,
    /// When each opset was sent (`Sim::sent_of` adds its request and client from the workload); [`NOT_SENT`]
    /// while the client holds it.
    pub(super) sent_at: Vec<u64>,
    pub(super) resident: Vec<u32>,
    pub(super) large_resident: Vec<u32>,
    pub(super) held: HeldStats,
    pub(super) held_wait_ns: u128,
    pub(super) last_wakeup: u64,
    pub(super) last_feedback_retry: u64,

    // Copies (duplication / speculative retry, Rein §5.1) and writes. Copies of opsets go to the next replica of
    // the group (`Sim::copy_server`: an opset's server is fixed once sent); a copy of op i runs as op n_ops + i;
    // the first answer of each op counts, the other copy is served anyway. A write's copies at the other replicas
    // run as ops i + k·n_ops.
    pub(super) copied: Flags,
    /// When each op's first answer reached the client (with copies or writes).
    pub(super) answered_at: Answers,
    pub(super) opset_left: Vec<u32>,
    pub(super) copies: CopyStats,
    pub(super) writes: WriteStats,

    // Read timeouts: the requests answered with a timeout.
    pub(super) timed_out: Vec<bool>,
    pub(super) timeouts: TimeoutStats,

    // Closed loop.
    pub(super) think: Vec<u64>,
    pub(super) arrival_rt: Vec<u64>,
    pub(super) thread_of: Vec<u32>,
    /// When the last request was complete at its client: the latest reported completion (`Sim::complete_request`).
    pub(super) last_done: u64,

    /// The measured client ↔ coordinator round trip drawn for each request (`Cluster::with_client_rtt`; empty:
    /// the two constant client hops).
    pub(super) client_rtt: Vec<u64>,
    /// The per-partition client/coordinator cost, ns (`Cluster::with_client_key`): (keys − 1) × it is added to
    /// each request's reported latency; 0: none.
    pub(super) client_key: u64,
}

impl<S: Scheduler, R: ReplicaSelector> Parts<S, R> {
    /// Empty queues and buffers for the replay `a` (the loop `EXT`).
    #[inline(always)]
    pub(super) fn new<const EXT: bool>(
        a: &Args<'_>,
        sched: S,
        selector: R,
    ) -> Result<Self, SimError> {
        let (cluster, wl, rc, policy) = (a.cluster, a.wl, a.rc, a.policy);
        let cfg = &cluster.config;
        let n_servers = cfg.servers as usize;
        let n_req = wl.requests();
        let co = &rc.coordinator;
        let spec = match policy {
            PolicyConfig::Speculative(c) if EXT => {
                Some(LatencyEstimator::new(c, cfg.clients as usize))
            }
            _ if EXT && co.speculates() && cfg.replication >= 2 => {
                // The warm-up cut ends at the first measured request's arrival (open loop; closed loop: 0).
                let first = ((rc.warmup * n_req as f64) as usize).min(n_req.saturating_sub(1));
                let warm_at = if rc.client.closed().is_some() || n_req == 0 {
                    0
                } else {
                    wl.arrival[first]
                };
                Some(LatencyEstimator::stock(
                    co,
                    cfg.clients as usize,
                    warm_at,
                    &rc.latency_history,
                ))
            }
            _ => None,
        };
        // The coordinator's client side (a retry needs a second replica: with RF 1 only the driver's part acts).
        let coordinator_retry = spec.is_some() && !matches!(policy, PolicyConfig::Speculative(_));
        let stock = if EXT && (coordinator_retry || co.hedges() || co.per_partition() || co.paged())
        {
            Some(StockClient::new(
                co,
                wl,
                cfg.clients as usize,
                n_servers,
                cfg.replication as usize,
                rc.seed,
            ))
        } else {
            None
        };
        let hedge = stock.as_ref().is_some_and(|s| s.hedge);
        let copies_needed = EXT && (matches!(policy, PolicyConfig::Duplicate(_)) || spec.is_some());
        if EXT && co.paged() {
            let why = if a.tailx.is_some() {
                Some("a policy that delays opsets (TailX)")
            } else if matches!(
                rc.selector,
                SelectorConfig::C3(_) | SelectorConfig::Heron(_)
            ) {
                Some("a replica selector that holds opsets (c3, heron)")
            } else if rc.writes.iter().any(|&w| w) {
                Some("writes (a paged query reads)")
            } else if wl.ops() >= PAGE_TIMER as usize {
                Some("2^29 ops or more")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(SimError::BadInput(format!(
                    "coordinator parameter paged: 1 does not run with {why}"
                )));
            }
        }
        if copies_needed && cfg.replication < 2 {
            return Err(SimError::BadInput(format!(
                "policy '{}' needs replication >= 2 (a second replica to send copies to)",
                policy.name()
            )));
        }
        let mut ready = BinaryHeap::new();
        if let Some(c) = rc.client.closed().filter(|_| EXT) {
            for th in 0..c.threads.min(n_req as u32) {
                ready.push(Reverse((0, th as u64, th)));
            }
        }
        let plain = !EXT || rc.selector.is_round_robin();
        Ok(Parts {
            sched,
            selector,
            at_servers: VecDeque::with_capacity(1024),
            timers: SlotTimers::new(n_servers, cfg.slots as usize),
            retries: BinaryHeap::new(),
            delay_q: BinaryHeap::new(),
            // Sources: the clients' coordinator retries, then their driver executions.
            spec_q: RunQueue::new(if spec.is_some() || hedge || co.paged() {
                2 * cfg.clients as usize
            } else {
                0
            }),
            ready,
            dirty: Vec::with_capacity(n_servers),
            smodel: if EXT && !rc.servers.is_uniform() {
                Some(ServerModel::new(&rc.servers, n_servers, rc.seed)?)
            } else {
                None
            },
            spec,
            stock,
            backlog: HeldOpsets::new(if plain { 0 } else { cluster.groups() }),
            sizes: Vec::new(),
            costs: Vec::new(),
            servers: Vec::new(),
            tags: Vec::new(),
            freed: Vec::new(),
            cand_groups: Vec::new(),
            server_groups: Vec::new(),
        })
    }
}

impl<'a, const EXT: bool, S: Scheduler, R: ReplicaSelector> Sim<'a, EXT, S, R> {
    /// The state at time 0: every slot free, no request arrived; `p` holds the empty queues.
    #[inline(always)]
    pub(super) fn new(a: Args<'a>, p: &'a mut Parts<S, R>) -> Self {
        let Args {
            cluster,
            wl,
            policy,
            rc,
            tailx,
            started,
        } = a;
        let cfg = &cluster.config;
        let n_servers = cfg.servers as usize;
        let n_req = wl.requests();
        let n_ops = wl.ops();
        let dup = EXT && matches!(policy, PolicyConfig::Duplicate(_));
        let speculative = EXT && p.spec.is_some();
        let sq_on = EXT && p.stock.is_some();
        let route_on = EXT && p.stock.as_ref().is_some_and(|s| s.per_partition);
        let hedge_on = EXT && p.stock.as_ref().is_some_and(|s| s.hedge);
        let redundant = EXT && (dup || speculative || hedge_on);
        let write_on = EXT && rc.writes.iter().any(|&w| w);
        let plain = !EXT || rc.selector.is_round_robin();
        let fb_on = EXT && p.selector.wants_feedback();
        // `local` = 1: client c's coordinator is node c mod servers.
        let local_on = route_on || (EXT && rc.selector.local_coordinators());
        let tailx_on = EXT && tailx.is_some();
        let drop_on = EXT && rc.coordinator.drops_expired();
        // (With the coordinator section, a read's start is its opset's send: kept when TailX may delay it.)
        let sent_on = fb_on || (redundant && !sq_on) || (sq_on && drop_on && tailx_on);
        // Copies of opsets (duplication, speculative retry; a driver's executions send their reads on their own).
        let copies_on = dup || speculative;
        let closed = if EXT { rc.client.closed() } else { None };
        let closed_on = EXT && closed.is_some();
        let page_on = EXT && p.stock.as_ref().is_some_and(|s| s.paged);
        let all_free: u64 = if cfg.slots == 64 {
            u64::MAX
        } else {
            (1u64 << cfg.slots) - 1
        };
        let per_op = |on: bool| if on { n_ops } else { 0 };
        let per_opset = |on: bool| if on { wl.opsets() } else { 0 };
        let per_server = |on: bool| if on { n_servers } else { 0 };
        let per_req = |on: bool| if on { n_req } else { 0 };
        let tag_fields = p.sched.tag_fields();
        Sim {
            p,
            cluster,
            wl,
            rc,
            policy,
            started,
            n_req,
            n_ops,
            n_ops32: n_ops as u32,
            n_servers,
            d: cfg.net_latency_ns,
            size_aware: rc.size_aware_cost && !wl.mean_demand.is_empty(),
            cost_unit: cfg.service_rate / 1e9,
            plain,
            fb_on,
            tailx_on,
            dup,
            redundant,
            sent_on,
            sq_on,
            route_on,
            hedge_on,
            write_on,
            multi: redundant || write_on,
            closed_on,
            drop_on,
            page_on,
            local_on,
            read_timeout: rc.coordinator.timeout_ns(),
            exec_delay: (rc.coordinator.se_delay_ms * 1e6).round() as u64,
            exec_tick: rc.coordinator.tick_ns(),
            stop_above: rc.stop.map_or(u64::MAX, |r| r.above_ns),
            stop_from: ((rc.warmup * n_req as f64).floor() as usize).min(n_req.saturating_sub(1)),
            stop_left: rc
                .stop
                .map_or(usize::MAX, |r| r.requests_above(n_req, rc.warmup)),

            seq: n_req as u64,
            next_req: 0,
            events: 0,

            free: vec![all_free; n_servers],
            outstanding: vec![0; n_servers],
            server_demand: vec![0; n_servers],
            is_dirty: vec![false; n_servers],
            slot_svc: vec![0; n_servers * cfg.slots as usize],
            slot_enq: vec![
                0;
                if fb_on {
                    n_servers * cfg.slots as usize
                } else {
                    0
                }
            ],
            served_ops: 0,

            opset_server: vec![0; wl.opsets()],
            opset_coord: vec![0; per_opset(route_on)],
            drv_done: Flags::new(per_op(route_on && speculative)),
            inline: Flags::new(per_opset(local_on)),
            queued: vec![0; per_server(local_on)],
            opset_tag: OpsetTags::new(tag_fields, wl.opsets(), n_req),
            remaining: (0..n_req)
                .map(|r| {
                    wl.opset_ops[wl.req_opsets[r + 1] as usize]
                        - wl.opset_ops[wl.req_opsets[r] as usize]
                })
                .collect(),
            latency: vec![0; n_req],
            rec: rc.record_ops.then(|| OpRecords {
                request: vec![0; n_ops],
                opset: vec![0; n_ops],
                server: vec![0; n_ops],
                slot: vec![0; n_ops],
                enqueue: vec![0; n_ops],
                start: vec![0; n_ops],
                end: vec![0; n_ops],
                demand: wl.demand.to_vec(),
            }),

            late: Flags::new(per_opset((!plain && !route_on) || tailx_on || local_on)),
            sent_at: vec![NOT_SENT; per_opset(sent_on)],
            resident: vec![0; per_server(fb_on)],
            large_resident: vec![0; per_server(fb_on)],
            held: HeldStats::default(),
            held_wait_ns: 0,
            last_wakeup: u64::MAX,
            last_feedback_retry: u64::MAX,

            copied: Flags::new(per_op(copies_on)),
            answered_at: Answers::new(per_op(redundant || write_on)),
            opset_left: if speculative && !sq_on {
                wl.opset_ops.windows(2).map(|w| w[1] - w[0]).collect()
            } else {
                Vec::new()
            },
            copies: CopyStats::default(),
            writes: WriteStats::default(),

            timed_out: vec![false; per_req(drop_on)],
            timeouts: TimeoutStats {
                on: drop_on,
                ..TimeoutStats::default()
            },

            think: closed.map_or(Vec::new(), |c| c.think_times(n_req, rc.seed)),
            arrival_rt: vec![0; per_req(closed_on)],
            thread_of: vec![0; per_req(closed_on)],
            last_done: 0,
            client_rtt: cluster
                .client_rtt()
                .map_or(Vec::new(), |q| crate::client_rtt::draws(q, n_req, rc.seed)),
            client_key: cluster.client_key_ns(),
            tailx,
        }
    }

    // The switches of the general loop, constant false in the plain loop (so its branches fold away).
    #[inline(always)]
    pub(super) fn plain(&self) -> bool {
        !EXT || self.plain
    }
    #[inline(always)]
    pub(super) fn fb_on(&self) -> bool {
        EXT && self.fb_on
    }
    #[inline(always)]
    pub(super) fn tailx_on(&self) -> bool {
        EXT && self.tailx_on
    }
    #[inline(always)]
    pub(super) fn dup(&self) -> bool {
        EXT && self.dup
    }
    #[inline(always)]
    pub(super) fn redundant(&self) -> bool {
        EXT && self.redundant
    }
    #[inline(always)]
    pub(super) fn sent_on(&self) -> bool {
        EXT && self.sent_on
    }
    #[inline(always)]
    pub(super) fn sq_on(&self) -> bool {
        EXT && self.sq_on
    }
    #[inline(always)]
    pub(super) fn route_on(&self) -> bool {
        EXT && self.route_on
    }
    #[inline(always)]
    pub(super) fn hedge_on(&self) -> bool {
        EXT && self.hedge_on
    }
    #[inline(always)]
    pub(super) fn write_on(&self) -> bool {
        EXT && self.write_on
    }
    #[inline(always)]
    pub(super) fn multi(&self) -> bool {
        EXT && self.multi
    }
    #[inline(always)]
    pub(super) fn closed_on(&self) -> bool {
        EXT && self.closed_on
    }
    #[inline(always)]
    pub(super) fn drop_on(&self) -> bool {
        EXT && self.drop_on
    }
    #[inline(always)]
    pub(super) fn page_on(&self) -> bool {
        EXT && self.page_on
    }
    #[inline(always)]
    pub(super) fn local_on(&self) -> bool {
        EXT && self.local_on
    }

    /// The result once every event has been applied.
    #[inline(always)]
    pub(super) fn finish(mut self) -> Result<RunResult, SimError> {
        let (wl, rc, n_req) = (self.wl, self.rc, self.n_req);
        let stopped = self.stop_left == 0;
        if let Some(r) = self
            .remaining
            .iter()
            .position(|&x| x != 0)
            .filter(|_| !stopped)
        {
            return Err(SimError::BadInput(format!(
                "internal: request {r} never completed"
            )));
        }
        // A closed loop offers no external rate: its offered load is measured over the makespan (first issue →
        // last response), so a saturated bottleneck server reads just under 1 and steady state rests on the half
        // ratio.
        let window = if self.closed_on() {
            (self.arrival_rt[0], self.last_done.max(self.arrival_rt[0]))
        } else {
            (wl.arrival[0], wl.arrival[n_req - 1])
        };
        let span = window.1 - window.0;
        let slots = self.cluster.config.slots;
        let summary = if stopped {
            // the measured requests completed when the replay stopped
            let done: Vec<u64> = (self.stop_from..n_req)
                .filter(|&r| self.remaining[r] == 0)
                .map(|r| self.latency[r])
                .collect();
            summarize(&done, 0.0, &self.server_demand, slots, span)
        } else {
            summarize(&self.latency, rc.warmup, &self.server_demand, slots, span)
        };
        // (The figure of the engine's first layout, one whole tag per opset: reported as it was.)
        let run_bytes =
            self.opset_server.len() * 4 + wl.opsets() * std::mem::size_of::<Tag>() + n_req * 12;
        let mut makespan_ns = 0;
        if self.held.opsets > 0 {
            self.held.mean_ms = self.held_wait_ns as f64 / self.held.opsets as f64 / 1e6;
        }
        self.held.unstable =
            self.held.at_end >= 10 && 2 * self.held.at_end >= 3 * self.held.at_half;
        if EXT {
            let first = if self.closed_on() {
                self.arrival_rt[0]
            } else {
                wl.arrival[0]
            };
            makespan_ns = self.last_done.saturating_sub(first);
        }
        Ok(RunResult {
            policy: self.policy.name(),
            params: crate::coordinator::reported_params(self.policy, &rc.coordinator),
            selector: rc.selector.name(),
            selector_params: rc.selector.params(),
            latency_ns: self.latency,
            summary,
            requests: n_req,
            ops: self.n_ops,
            events: self.events,
            sim_wall_s: self.started.elapsed().as_secs_f64(),
            bytes_per_op: (wl.bytes() + run_bytes) as f64 / self.n_ops.max(1) as f64,
            records: self.rec,
            held: self.held,
            copies: self.copies,
            writes: self.writes,
            timeouts: self.timeouts,
            served_ops: self.served_ops,
            makespan_ns,
            arrival_ns: self.arrival_rt,
            // A stall schedule's stalled fraction over the span the offered load is measured over.
            capacity_factor: rc
                .servers
                .capacity_factor_over(self.n_servers, Some(window)),
            stopped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_bits() {
        let mut f = Flags::new(130);
        assert!(!f.is_empty() && Flags::new(0).is_empty());
        f.set(0);
        f.set(64);
        f.set(129);
        let on: Vec<usize> = (0..130).filter(|&i| f.get(i)).collect();
        assert_eq!(on, vec![0, 64, 129]);
    }

    #[test]
    fn answers_keep_the_time_since_arrival_and_far_times_whole() {
        let mut a = Answers::new(3);
        assert!(!a.answered(0) && a.at(0, 5) == u64::MAX);
        a.set(0, 1_000, 1_250);
        let far = 1_000 + u32::MAX as u64 + 7;
        a.set(1, 1_000, far);
        a.set(2, 1_000, 1_000 + FAR as u64 - 1);
        assert!(a.answered(0) && a.answered(1) && a.answered(2));
        assert_eq!((a.at(0, 1_000), a.at(1, 1_000)), (1_250, far));
        assert_eq!(a.at(2, 1_000), 1_000 + FAR as u64 - 1);
        assert_eq!(a.far.len(), 1);
    }

    #[test]
    fn opset_tags_keep_the_fields_set_per_opset_or_per_request() {
        let tags = [
            Tag {
                prio: 2.5,
                queue: 3,
            },
            Tag {
                prio: -1.0,
                queue: 1,
            },
        ];
        let opset_req = [0, 0, 1, 1];
        let mut all = OpsetTags::new(TagFields::ALL, 4, 2);
        all.set(1, 2, &tags);
        assert_eq!(
            (all.get(2, &opset_req), all.get(3, &opset_req)),
            (tags[0], tags[1])
        );
        let mut queue = OpsetTags::new(TagFields::QUEUE, 4, 2);
        queue.set(1, 2, &tags.map(|t| Tag { prio: 0.0, ..t }));
        assert_eq!(
            queue.get(3, &opset_req),
            Tag {
                prio: 0.0,
                queue: 1
            }
        );
        let none = OpsetTags::new(TagFields::NONE, 4, 2);
        assert_eq!(none.get(3, &opset_req), Tag::default());
        assert!(none.prio.is_empty() && none.queue.is_empty());
        let mut req = OpsetTags::new(TagFields::REQUEST_PRIO, 4, 2);
        assert_eq!(req.prio.len(), 2);
        let same = [Tag {
            prio: 4.0,
            queue: 0,
        }; 2];
        req.set(1, 2, &same);
        assert_eq!(
            (req.get(2, &opset_req), req.get(3, &opset_req)),
            (same[0], same[1])
        );
        assert_eq!(req.get(0, &opset_req), Tag::default());
    }
}
