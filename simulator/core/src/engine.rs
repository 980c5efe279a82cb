//! The deterministic event core.
//!
//! Time is integer nanoseconds (`u64`): exact, platform-independent, and trivially reproduced by the Python
//! reference model. Events are ordered by (time, sequence number): request arrivals are pre-scheduled with
//! sequence numbers 0..R−1 (in arrival order), every event created during the run gets the next number.
//! Three event kinds:
//! 1. request arrival at its client — replica choice per opset, tagging by the policy, ops sent;
//! 2. a request's opsets reach their servers (arrival + one-way latency) — ops enqueued;
//! 3. an op finishes at a server slot — slot freed, request completes when its last op is done
//!    (response reaches the client one network latency later).
//!
//! Servers pick ops for free slots only after every event of the current instant has been applied, so ops that
//! reach a server at the same instant compete for its slots (the hand-worked paper examples rely on this).
//! Free slots are taken lowest index first.
use std::collections::VecDeque;
use std::time::Instant;

use crate::cluster::Cluster;
use crate::config::{ClientModel, ReplayConfig};
use crate::error::SimError;
use crate::held::HeldOpsets;
use crate::policy::speculative::LatencyEstimator;
use crate::policy::{Policy, PolicyConfig, PolicyVisitor, QItem, Scheduler, Tag, TagCtx, TailxConfig};
use crate::prefetch::prefetch;
use crate::replica::{Feedback, HeldRetry, ReplicaSelector, SelectCtx, Selector, SelectorEnv, SelectorVisitor};
use crate::result::{CopyStats, HeldStats, OpRecords, RunResult, WriteStats};
use crate::runs::RunQueue;
use crate::server_model::ServerModel;
use crate::stats::summarize;
use crate::timers::{event_key, key_time, SlotTimers};
use crate::workload::Workload;

/// When an opset was sent to its server, by which request and client.
#[derive(Debug, Clone, Copy, Default)]
struct Sent {
    at: u64,
    client: u32,
    req: u32,
}

/// Marks an `at_servers` entry that carries one late opset (sent after being held) instead of a request.
const LATE_OPSET: u32 = 1 << 31;
/// With `LATE_OPSET`: the entry carries the copy of an opset (duplication / speculative retry).
const COPY_OPSET: u32 = 1 << 30;

/// Replays `wl` on `cluster` as `cfg` says. Deterministic: same inputs, same result (except wall time).
pub fn replay(cluster: &Cluster, wl: &Workload, cfg: &ReplayConfig) -> Result<RunResult, SimError> {
    crate::error::check_range(
        "warmup",
        cfg.warmup,
        0.0,
        0.99,
        "[0, 0.99] (fraction of requests)",
    )?;
    let policy = &cfg.policy;
    policy.validate()?;
    wl.validate(cluster)?;
    let ccfg = &cluster.config;
    let n_servers = ccfg.servers as usize;
    let n_ops = wl.ops();
    let started = Instant::now();

    for (what, v) in [("large_est", &cfg.sizes.large_est), ("large_true", &cfg.sizes.large_true), ("write", &cfg.writes)] {
        if !v.is_empty() && v.len() != n_ops {
            return Err(SimError::BadInput(format!("{what} has {} flags for {n_ops} ops", v.len())));
        }
    }
    // TailX: TL / TS derived from the demand model where not given; opsets procrastinated at the client.
    let tailx_resolved;
    let (policy, tailx) = if let PolicyConfig::Tailx(c) = policy {
        let dem: Vec<f64> = if wl.mean_demand.is_empty() {
            vec![1e9 / ccfg.service_rate; n_ops]
        } else {
            wl.mean_demand.iter().map(|&m| m as f64).collect()
        };
        let large = if cfg.sizes.large_true.is_empty() { &cfg.sizes.large_est } else { &cfg.sizes.large_true };
        let c = c.resolved(&dem, large, ccfg.service_rate);
        tailx_resolved = PolicyConfig::Tailx(c.clone());
        (&tailx_resolved, Some(c))
    } else {
        (policy, None)
    };
    cfg.servers.validate(n_servers)?;
    if let ClientModel::Closed(c) = &cfg.client {
        c.validate()?;
    }
    if (cfg.writes.iter().any(|&w| w) || matches!(policy, PolicyConfig::Duplicate(_) | PolicyConfig::Speculative(_)))
        && n_ops as u64 * ccfg.replication.max(2) as u64 >= u32::MAX as u64
    {
        return Err(SimError::BadInput(format!(
            "{n_ops} ops × {} copies do not fit the engine's 32-bit op ids",
            ccfg.replication.max(2)
        )));
    }
    let sched = policy.instantiate(n_servers, n_ops);
    // Round-robin replicas on the core model run the plain loop: compiled without the general loop's branches
    // (selector feedback, held opsets, delay queue, copies, server speeds, writes, closed loop), monomorphized
    // per `fast` policy. Everything else runs the general loop, monomorphized per `fast` policy and `fast`
    // selector (the registries' event-loop column; the others run over the `Policy` / `Selector` enums).
    let plain = cfg.selector.is_round_robin() && cfg.plain_model();
    let a = Args {
        cluster,
        wl,
        policy,
        rc: cfg,
        tailx,
        started,
    };
    let env = SelectorEnv {
        clients: cluster.config.clients as usize,
        groups: cluster.groups(),
        rf: cluster.config.replication as usize,
        servers: n_servers,
        slots: cluster.config.slots,
        mean_service_ns: if wl.ops() > 0 {
            wl.demand.iter().map(|&x| x as f64).sum::<f64>() / wl.ops() as f64
        } else {
            1e9 / cluster.config.service_rate
        },
        net_latency_ns: cluster.config.net_latency_ns,
        seed: cfg.seed,
    };
    let sel = cfg.selector.instantiate(&env);
    sched.visit(ByPolicy { a, sel, plain })
}

/// Picks the event loop for the policy (see [`replay`]).
struct ByPolicy<'a> {
    a: Args<'a>,
    sel: Selector,
    plain: bool,
}

impl PolicyVisitor for ByPolicy<'_> {
    type Output = Result<RunResult, SimError>;
    fn fast<S: Scheduler>(self, sched: S) -> Self::Output {
        if self.plain {
            return event_loop::<false, S, Selector>(self.a, sched, self.sel);
        }
        // Per (policy, feedback selector) as well: the selector's calls inline into the loop instead of going
        // through the enum (c3 −5%, ds −2…5%, least-outstanding −2.5% wall; bench/RESULTS.md § Speed pass
        // 2026-11-24).
        self.sel.visit(BySelector { a: self.a, sched })
    }
    fn generic(self, sched: Policy) -> Self::Output {
        event_loop::<true, Policy, Selector>(self.a, sched, self.sel)
    }
}

/// Picks the event loop for the selector, the policy's scheduler type known (see [`replay`]).
struct BySelector<'a, S> {
    a: Args<'a>,
    sched: S,
}

impl<S: Scheduler> SelectorVisitor for BySelector<'_, S> {
    type Output = Result<RunResult, SimError>;
    fn fast<R: ReplicaSelector>(self, sel: R) -> Self::Output {
        event_loop::<true, S, R>(self.a, self.sched, sel)
    }
    fn generic(self, sel: Selector) -> Self::Output {
        event_loop::<true, S, Selector>(self.a, self.sched, sel)
    }
}

/// Inputs of one replay, validated.
struct Args<'a> {
    cluster: &'a Cluster,
    wl: &'a Workload,
    policy: &'a PolicyConfig,
    rc: &'a ReplayConfig,
    tailx: Option<TailxConfig>,
    started: Instant,
}

/// The event loop. `EXT = false` (the plain loop) compiles it without the general loop's branches (selector
/// feedback, held opsets, TailX delay queue, copies, server speeds, writes, closed-loop clients): only valid for
/// round-robin replicas, the core model and `fast` policies (the caller checks). Both instances apply the same
/// events in the same order. `selector` is the run's replica selector, instantiated by the caller (a concrete
/// selector type or the `Selector` enum).
#[allow(clippy::needless_range_loop)]
fn event_loop<const EXT: bool, S: Scheduler, R: ReplicaSelector>(
    a: Args<'_>,
    mut sched: S,
    mut selector: R,
) -> Result<RunResult, SimError> {
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
    let d = cfg.net_latency_ns;
    let size_aware = rc.size_aware_cost && !wl.mean_demand.is_empty();
    let cost_unit = cfg.service_rate / 1e9;
    let mut delay_q: std::collections::BinaryHeap<std::cmp::Reverse<(u128, u32)>> = Default::default();
    // Duplication / speculative retry (Rein §5.1): copies of opsets go to the next replica of the group; a copy
    // of op i runs as op n_ops + i; the first answer of each op counts, the other copy is served anyway.
    let dup = EXT && matches!(policy, PolicyConfig::Duplicate(_));
    let mut spec = match policy {
        PolicyConfig::Speculative(c) if EXT => Some(LatencyEstimator::new(c, cfg.clients as usize)),
        _ => None,
    };
    let redundant = EXT && (dup || spec.is_some());
    let write_on = EXT && rc.writes.iter().any(|&w| w);
    if redundant && cfg.replication < 2 {
        return Err(SimError::BadInput(format!(
            "policy '{}' needs replication >= 2 (a second replica to send copies to)",
            policy.name()
        )));
    }
    let n_ops32 = n_ops as u32;
    let mut copy_server = vec![u32::MAX; if redundant { wl.opsets() } else { 0 }];
    let mut copied = vec![false; if redundant { n_ops } else { 0 }];
    let mut answered_at = vec![u64::MAX; if redundant || write_on { n_ops } else { 0 }];
    let mut opset_left: Vec<u32> = if spec.is_some() {
        wl.opset_ops.windows(2).map(|w| w[1] - w[0]).collect()
    } else {
        Vec::new()
    };
    // Speculative timers, one run of deadlines per client (a k-way merge: `runs.rs`).
    let mut spec_q = RunQueue::new(if spec.is_some() { cfg.clients as usize } else { 0 });
    let next_replica = |g: u32, s: u32| -> u32 {
        let reps = cluster.replicas(g);
        let i = reps.iter().position(|&x| x == s).unwrap_or(0);
        reps[(i + 1) % reps.len()]
    };
    // Replica-selection state, allocated only for selectors that use it.
    let plain = !EXT || rc.selector.is_round_robin();
    let fb_on = EXT && selector.wants_feedback();
    let tailx_on = EXT && tailx.is_some();
    let mut late: Vec<bool> = if plain && !tailx_on {
        Vec::new()
    } else {
        vec![false; wl.opsets()]
    };
    // When each opset was sent, with its request and client: the op-completion path reads all three from one
    // place (with long server queues every separate array read there is a cache miss).
    let mut sent: Vec<Sent> = if fb_on || redundant { vec![Sent::default(); wl.opsets()] } else { Vec::new() };
    let mut resident = vec![0u32; if fb_on { n_servers } else { 0 }];
    let mut large_resident = vec![0u32; if fb_on { n_servers } else { 0 }];
    let mut backlog = HeldOpsets::new(if plain { 0 } else { cluster.groups() });
    let (mut freed, mut cand_groups) = (Vec::new(), Vec::new());
    // Replica groups of each server (a retry after servers turned available visits only their groups).
    let mut server_groups: Vec<Vec<u32>> = Vec::new();
    let mut retries: std::collections::BinaryHeap<std::cmp::Reverse<u128>> = Default::default();
    let mut held = HeldStats::default();
    let mut copies = CopyStats::default();
    let mut writes = WriteStats::default();
    let mut served_ops = 0u64;
    let mut held_wait_ns = 0u128;
    let (mut last_wakeup, mut last_feedback_retry) = (u64::MAX, u64::MAX);
    // Large ops per opset (client estimate / truth), counted once: held opsets ask again at every retry.
    let count_large = |flags: &[bool]| -> Vec<u32> {
        if flags.is_empty() {
            return Vec::new();
        }
        wl.opset_ops
            .windows(2)
            .map(|w| flags[w[0] as usize..w[1] as usize].iter().filter(|&&b| b).count() as u32)
            .collect()
    };
    let large_est_of = if EXT { count_large(&rc.sizes.large_est) } else { Vec::new() };
    let large_true_of = if fb_on { count_large(&rc.sizes.large_true) } else { Vec::new() };
    let large_ops_of = |o: usize| -> u32 { large_est_of.get(o).copied().unwrap_or(0) };

    // Server speeds / slowdowns, writes at every replica, closed-loop clients (`ReplayConfig::plain_model`).
    let mut smodel = if EXT && !rc.servers.is_uniform() {
        Some(ServerModel::new(&rc.servers, n_servers, rc.seed)?)
    } else {
        None
    };
    // Actual service time of the op in each busy slot (with speeds it differs from the demand). Read back when
    // the op ends, so the workload's demand array is not touched again (a cache miss with long queues).
    let mut slot_svc = vec![0u64; n_servers * cfg.slots as usize];
    let multi = redundant || write_on;
    let is_write = |op: usize| write_on && rc.writes[op];
    let closed = if EXT { rc.client.closed() } else { None };
    let closed_on = EXT && closed.is_some();
    let think: Vec<u64> = closed.map_or(Vec::new(), |c| c.think_times(n_req, rc.seed));
    let mut arrival_rt = vec![0u64; if closed_on { n_req } else { 0 }];
    let mut thread_of = vec![0u32; if closed_on { n_req } else { 0 }];
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u64, u32)>> = Default::default();
    if let Some(c) = closed {
        for th in 0..c.threads.min(n_req as u32) {
            ready.push(std::cmp::Reverse((0, th as u64, th)));
        }
    }
    let mut last_done = 0u64;

    let mut opset_server = vec![0u32; wl.opsets()];
    let mut opset_tag = vec![Tag::default(); wl.opsets()];
    let mut remaining: Vec<u32> = (0..n_req)
        .map(|r| {
            wl.opset_ops[wl.req_opsets[r + 1] as usize] - wl.opset_ops[wl.req_opsets[r] as usize]
        })
        .collect();
    let mut latency = vec![0u64; n_req];
    let all_free: u64 = if cfg.slots == 64 {
        u64::MAX
    } else {
        (1u64 << cfg.slots) - 1
    };
    let mut free = vec![all_free; n_servers];
    let mut outstanding = vec![0u32; n_servers];
    let mut server_demand = vec![0u64; n_servers];
    let mut dirty: Vec<u32> = Vec::with_capacity(n_servers);
    let mut is_dirty = vec![false; n_servers];
    let mut rec = rc.record_ops.then(|| OpRecords {
        request: vec![0; n_ops],
        opset: vec![0; n_ops],
        server: vec![0; n_ops],
        slot: vec![0; n_ops],
        enqueue: vec![0; n_ops],
        start: vec![0; n_ops],
        end: vec![0; n_ops],
        demand: wl.demand.clone(),
    });

    // Pending events: request arrivals (pre-sorted, seq = index), opsets reaching their servers (created in
    // arrival order at arrival + d, so a FIFO is already sorted by (time, seq)) and op completions (slot timers).
    // The next event is the least (time, seq) of the three heads: the order of one global event queue.
    let mut at_servers: VecDeque<(u128, u32)> = VecDeque::with_capacity(1024);
    let mut timers = SlotTimers::new(n_servers, cfg.slots as usize);
    let mut seq = n_req as u64;
    let mut next_req = 0usize;
    let mut events = 0u64;
    let mut sizes: Vec<u32> = Vec::new();
    let mut costs: Vec<f64> = Vec::new();
    let mut servers: Vec<u32> = Vec::new();
    let mut tags: Vec<Tag> = Vec::new();

    loop {
        let arrival_key = if next_req >= n_req {
            u128::MAX
        } else if closed_on {
            // Closed loop: the next request goes to the thread that becomes free first.
            ready.peek().map_or(u128::MAX, |k| event_key(k.0 .0, k.0 .1))
        } else {
            event_key(wl.arrival[next_req], next_req as u64)
        };
        let srv_key = at_servers.front().map_or(u128::MAX, |e| e.0);
        let done_key = timers.peek_key().unwrap_or(u128::MAX);
        // Without the extensions these queues stay empty: their keys are constant ∞ and the branches fold away.
        let (retry_key, delay_key, spec_key) = if EXT {
            (
                retries.peek().map_or(u128::MAX, |k| k.0),
                delay_q.peek().map_or(u128::MAX, |k| k.0 .0),
                spec_q.peek_key().unwrap_or(u128::MAX),
            )
        } else {
            (u128::MAX, u128::MAX, u128::MAX)
        };
        let now;
        if spec_key < delay_key
            && spec_key < retry_key
            && spec_key < arrival_key
            && spec_key < srv_key
            && spec_key < done_key
        {
            // Speculative retry: the opset's ops whose answers have not reached the client are re-issued.
            let (_, o) = spec_q.pop().expect("head exists");
            now = key_time(spec_key);
            let o = o as usize;
            let mut n = 0;
            for op in wl.opset_ops[o] as usize..wl.opset_ops[o + 1] as usize {
                if answered_at[op] > now && !is_write(op) {
                    copied[op] = true;
                    n += 1;
                }
            }
            if n > 0 {
                let c = next_replica(wl.opset_group[o], opset_server[o]);
                copy_server[o] = c;
                outstanding[c as usize] += n;
                copies.ops += n as u64;
                at_servers.push_back((event_key(now + d, seq), o as u32 | LATE_OPSET | COPY_OPSET));
                seq += 1;
            }
        } else if delay_key < retry_key && delay_key < arrival_key && delay_key < srv_key && delay_key < done_key {
            // TailX Algorithm 2: a procrastinated opset's time has come; it is sent to its replica.
            let std::cmp::Reverse((_, o)) = delay_q.pop().expect("head exists");
            now = key_time(delay_key);
            if fb_on {
                let r = wl.opset_req[o as usize];
                sent[o as usize] = Sent { at: now, client: wl.client[r as usize], req: r };
            }
            at_servers.push_back((event_key(now + d, seq), o | LATE_OPSET));
            seq += 1;
        } else if retry_key < arrival_key && retry_key < srv_key && retry_key < done_key {
            // Held opsets try again (FIFO); the ones still refused stay held in order.
            retries.pop();
            now = key_time(retry_key);
            // (A selector may know that every held opset would be refused again, or all but those of some
            // servers: the others are not visited.)
            freed.clear();
            let mode = selector.held_retry(now, &mut freed);
            match mode {
                HeldRetry::All => backlog.begin(None),
                HeldRetry::Skip => {}
                HeldRetry::Freed => {
                    if server_groups.is_empty() {
                        server_groups = vec![Vec::new(); n_servers];
                        for g in 0..cluster.groups() as u32 {
                            for &s in cluster.replicas(g) {
                                server_groups[s as usize].push(g);
                            }
                        }
                    }
                    cand_groups.clear();
                    cand_groups.extend(freed.iter().flat_map(|&s| server_groups[s as usize].iter().copied()));
                    cand_groups.sort_unstable();
                    cand_groups.dedup();
                    backlog.begin(Some(&cand_groups));
                }
            }
            while let Some((g, held)) = if mode == HeldRetry::Skip { None } else { backlog.next_held() } {
                let (_, o, since) = held;
                let o = o as usize;
                if mode == HeldRetry::Freed && !selector.may_place_in(cluster.replicas(g)) {
                    // Nothing more fits this group in this retry: its queue is left as it is.
                    backlog.refuse(g, held);
                    backlog.close(g);
                    continue;
                }
                let size = wl.opset_ops[o + 1] - wl.opset_ops[o];
                let req = wl.opset_req[o];
                let client = wl.client[req as usize];
                let ctx = SelectCtx {
                    now,
                    client,
                    group: g,
                    replicas: cluster.replicas(g),
                    outstanding: &outstanding,
                    size,
                    large_ops: large_ops_of(o),
                };
                match selector.choose(&ctx) {
                    Some(s) => {
                        opset_server[o] = s;
                        outstanding[s as usize] += size;
                        if fb_on {
                            sent[o] = Sent { at: now, client, req };
                        }
                        held_wait_ns += (now - since) as u128;
                        at_servers.push_back((event_key(now + d, seq), o as u32 | LATE_OPSET));
                        seq += 1;
                    }
                    None => backlog.refuse(g, held),
                }
            }
            backlog.end();
            if !backlog.is_empty() {
                if let Some(t) = selector.wakeup(now) {
                    let t = t.max(now + 1);
                    if t != last_wakeup {
                        last_wakeup = t;
                        retries.push(std::cmp::Reverse(event_key(t, seq)));
                        seq += 1;
                    }
                }
            }
        } else if arrival_key < srv_key && arrival_key < done_key {
            let r = next_req;
            next_req += 1;
            if closed_on {
                let std::cmp::Reverse((t, _, th)) = ready.pop().expect("head exists");
                now = t;
                arrival_rt[r] = t;
                thread_of[r] = th;
            } else {
                now = wl.arrival[r];
            }
            let (o0, o1) = (wl.req_opsets[r] as usize, wl.req_opsets[r + 1] as usize);
            let client = wl.client[r];
            sizes.clear();
            costs.clear();
            servers.clear();
            if !plain {
                // The selector's state for every choice of this request, fetched at once (misses overlap).
                for o in o0..o1 {
                    let g = wl.opset_group[o];
                    selector.prefetch_choice(now, client, g, cluster.replicas(g));
                }
            }
            for o in o0..o1 {
                let size = wl.opset_ops[o + 1] - wl.opset_ops[o];
                let g = wl.opset_group[o];
                let s = if plain {
                    selector.select(client, g, cluster.replicas(g), &outstanding)
                } else {
                    let ctx = SelectCtx {
                        now,
                        client,
                        group: g,
                        replicas: cluster.replicas(g),
                        outstanding: &outstanding,
                        size,
                        large_ops: large_ops_of(o),
                    };
                    match selector.choose(&ctx) {
                        Some(s) => {
                            if fb_on {
                                sent[o] = Sent { at: now, client, req: r as u32 };
                            }
                            s
                        }
                        None => {
                            // Held at the client: tagged with its primary as provisional server.
                            late[o] = true;
                            backlog.hold(g, o as u32, now);
                            held.opsets += 1;
                            held.max = held.max.max(backlog.len() as u64);
                            if let Some(t) = selector.wakeup(now) {
                                let t = t.max(now + 1);
                                if t != last_wakeup {
                                    last_wakeup = t;
                                    retries.push(std::cmp::Reverse(event_key(t, seq)));
                                    seq += 1;
                                }
                            }
                            u32::MAX
                        }
                    }
                };
                opset_server[o] = s;
                let s = if s == u32::MAX { cluster.replicas(g)[0] } else { s };
                if opset_server[o] != u32::MAX {
                    outstanding[s as usize] += size;
                }
                sizes.push(size);
                costs.push(if let Some(t) = tailx.as_ref().filter(|_| EXT) {
                    t.opset_cost_ns(size, large_ops_of(o))
                } else if size_aware {
                    let (a, b) = (wl.opset_ops[o] as usize, wl.opset_ops[o + 1] as usize);
                    wl.mean_demand[a..b].iter().map(|&m| m as f64).sum::<f64>() * cost_unit
                } else {
                    size as f64
                });
                servers.push(s);
            }
            tags.clear();
            tags.resize(o1 - o0, Tag::default());
            let ctx = TagCtx {
                now,
                sizes: &sizes,
                costs: &costs,
                servers: &servers,
                outstanding: &outstanding,
                slots: cfg.slots,
                service_rate: cfg.service_rate,
            };
            sched.tag(&ctx, &mut tags);
            opset_tag[o0..o1].copy_from_slice(&tags);
            if tailx_on {
                // TailX Algorithm 1: opsets with a delay allowance wait in the client's delay queue.
                for (i, t) in tags.iter().enumerate() {
                    let o = o0 + i;
                    let dl = sched.release_delay_ns(t);
                    if dl > 0 && opset_server[o] != u32::MAX {
                        late[o] = true;
                        delay_q.push(std::cmp::Reverse((event_key(now + dl, seq), o as u32)));
                        seq += 1;
                    }
                }
            }
            at_servers.push_back((event_key(now + d, seq), r as u32));
            seq += 1;
            if redundant {
                for o in o0..o1 {
                    if opset_server[o] == u32::MAX {
                        continue; // held by the selector: no copy
                    }
                    sent[o] = Sent { at: now, client, req: r as u32 };
                    if dup {
                        let c = next_replica(wl.opset_group[o], opset_server[o]);
                        copy_server[o] = c;
                        // Writes are at every replica already: only the reads get a copy.
                        let mut size = 0;
                        for op in wl.opset_ops[o] as usize..wl.opset_ops[o + 1] as usize {
                            if !is_write(op) {
                                copied[op] = true;
                                size += 1;
                            }
                        }
                        outstanding[c as usize] += size;
                        copies.ops += size as u64;
                        at_servers.push_back((event_key(now + d, seq), o as u32 | LATE_OPSET | COPY_OPSET));
                        seq += 1;
                    } else if let Some(t) = spec.as_ref().and_then(|e| e.timeout_ns(client as usize)) {
                        spec_q.push(client as usize, event_key(now + t, seq), o as u32);
                        seq += 1;
                    }
                }
            }
            if !plain {
                if r + 1 == n_req / 2 + 1 {
                    held.at_half = backlog.len() as u64;
                }
                if r + 1 == n_req {
                    held.at_end = backlog.len() as u64;
                }
            }
        } else if srv_key != u128::MAX || done_key != u128::MAX {
            if srv_key < done_key {
                let (key, r) = at_servers.pop_front().expect("head exists");
                now = key_time(key);
                let r = r as usize;
                let copy = EXT && r as u32 & COPY_OPSET != 0;
                let (o_lo, o_hi) = if EXT && r as u32 & LATE_OPSET != 0 {
                    let o = r & !((LATE_OPSET | COPY_OPSET) as usize);
                    (o, o + 1)
                } else {
                    (wl.req_opsets[r] as usize, wl.req_opsets[r + 1] as usize)
                };
                for o in o_lo..o_hi {
                    if EXT && r as u32 & LATE_OPSET == 0 && !late.is_empty() && late[o] {
                        continue;
                    }
                    let s = if copy { copy_server[o] } else { opset_server[o] } as usize;
                    if fb_on && !copy {
                        resident[s] += wl.opset_ops[o + 1] - wl.opset_ops[o];
                        if !large_true_of.is_empty() {
                            large_resident[s] += large_true_of[o];
                        }
                    }
                    let tag = opset_tag[o];
                    for op in wl.opset_ops[o]..wl.opset_ops[o + 1] {
                        if copy {
                            if !copied[op as usize] {
                                continue;
                            }
                            if fb_on {
                                resident[s] += 1;
                                if !rc.sizes.large_true.is_empty() && rc.sizes.large_true[op as usize] {
                                    large_resident[s] += 1;
                                }
                            }
                            sched.enqueue(s, QItem::new(op + n_ops32, o as u32, now, tag, wl.demand[op as usize]));
                            continue;
                        }
                        sched.enqueue(s, QItem::new(op, o as u32, now, tag, wl.demand[op as usize]));
                        if let Some(rec) = rec.as_mut() {
                            rec.enqueue[op as usize] = now;
                        }
                    }
                    if !is_dirty[s] {
                        is_dirty[s] = true;
                        dirty.push(s as u32);
                    }
                    if write_on && !copy {
                        // A write is served at every replica of its group: copies k = 1.. (op id op + k·n_ops)
                        // to the other replicas, in replica order.
                        for op in wl.opset_ops[o]..wl.opset_ops[o + 1] {
                            if !rc.writes[op as usize] {
                                continue;
                            }
                            writes.ops += 1;
                            let mut k = 0u32;
                            for &t in cluster.replicas(wl.opset_group[o]) {
                                let t = t as usize;
                                if t == s {
                                    continue;
                                }
                                k += 1;
                                writes.copies += 1;
                                outstanding[t] += 1;
                                if fb_on {
                                    resident[t] += 1;
                                    if !rc.sizes.large_true.is_empty() && rc.sizes.large_true[op as usize] {
                                        large_resident[t] += 1;
                                    }
                                }
                                sched.enqueue(
                                    t,
                                    QItem::new(op + k * n_ops32, o as u32, now, tag, wl.demand[op as usize]),
                                );
                                if !is_dirty[t] {
                                    is_dirty[t] = true;
                                    dirty.push(t as u32);
                                }
                            }
                        }
                    }
                }
            } else {
                let c = timers.pop().expect("head exists");
                now = c.time;
                let (op, o, slot) = (c.op as usize, c.opset as usize, c.slot);
                let is_copy = EXT && op >= n_ops;
                let op = if is_copy { op % n_ops } else { op };
                let s = c.server as usize;
                free[s] |= 1u64 << slot;
                outstanding[s] -= 1;
                let svc = slot_svc[s * cfg.slots as usize + slot as usize];
                server_demand[s] += svc;
                if EXT {
                    served_ops += 1;
                }
                sched.on_done(s, op as u32, now);
                let st = if fb_on || redundant { sent[o] } else { Sent::default() };
                if fb_on {
                    resident[s] -= 1;
                    let big = !rc.sizes.large_true.is_empty() && rc.sizes.large_true[op];
                    if big {
                        large_resident[s] -= 1;
                    }
                    let fb = Feedback {
                        client: st.client,
                        server: s as u32,
                        at: now + d,
                        queue: resident[s],
                        service_ns: svc,
                        response_ns: now + d - st.at,
                        large_resident: large_resident[s],
                        large_est: !rc.sizes.large_est.is_empty() && rc.sizes.large_est[op],
                    };
                    selector.on_op_response(&fb);
                    if !backlog.is_empty() && now + d != last_feedback_retry {
                        // Held opsets get another chance when this response reaches the client.
                        last_feedback_retry = now + d;
                        retries.push(std::cmp::Reverse(event_key(now + d, seq)));
                        seq += 1;
                    }
                }
                let r = if fb_on { st.req } else { wl.opset_req[o] } as usize;
                // With copies (and writes at every replica), only an op's first answer counts.
                let first = !multi || answered_at[op] == u64::MAX;
                if multi && first {
                    answered_at[op] = now + d;
                    copies.wins += (is_copy && !is_write(op)) as u64;
                    if let Some(e) = spec.as_mut().filter(|_| redundant) {
                        opset_left[o] -= 1;
                        if opset_left[o] == 0 {
                            e.observe(wl.client[r] as usize, now + d - st.at);
                        }
                    }
                }
                if first {
                    remaining[r] -= 1;
                    if remaining[r] == 0 {
                        let arrived = if closed_on { arrival_rt[r] } else { wl.arrival[r] };
                        latency[r] = now + d - arrived;
                        if EXT {
                            last_done = last_done.max(now + d);
                        }
                        if closed_on {
                            // The thread thinks, then issues the next request in workload order.
                            ready.push(std::cmp::Reverse((now + d + think[r], seq, thread_of[r])));
                            seq += 1;
                        }
                        selector.on_response(wl.client[r], s as u32, now + d);
                    }
                }
                if !is_dirty[s] {
                    is_dirty[s] = true;
                    dirty.push(s as u32);
                }
            }
        } else {
            break;
        }
        events += 1;

        if !dirty.is_empty() {
            let next_arrival = if next_req >= n_req {
                u64::MAX
            } else if closed_on {
                ready.peek().map_or(u64::MAX, |k| k.0 .0)
            } else {
                wl.arrival[next_req]
            };
            let mut next_event = at_servers
                .front()
                .map_or(u128::MAX, |e| e.0)
                .min(timers.peek_key().unwrap_or(u128::MAX));
            if EXT {
                next_event = next_event
                    .min(delay_q.peek().map_or(u128::MAX, |k| k.0 .0))
                    .min(spec_q.peek_key().unwrap_or(u128::MAX));
            }
            let next_t = if next_event == u128::MAX {
                next_arrival
            } else {
                key_time(next_event).min(next_arrival)
            };
            if next_t > now {
                for &s in &dirty {
                    let s = s as usize;
                    is_dirty[s] = false;
                    while free[s] != 0 {
                        let Some(item) = sched.pick(s, now) else {
                            break;
                        };
                        let slot = free[s].trailing_zeros();
                        free[s] &= !(1u64 << slot);
                        let real = if EXT && item.op >= n_ops32 { item.op % n_ops32 } else { item.op };
                        let dem = item.demand(real as usize, &wl.demand);
                        let end = match smodel.as_mut().filter(|_| EXT) {
                            Some(m) => m.end(s, now, dem),
                            None => now + dem,
                        };
                        slot_svc[s * cfg.slots as usize + slot as usize] = end - now;
                        timers.start(s, slot, end, seq, item.op, item.opset);
                        // What the op's end reads first (it is cold when the op waited long in the queue).
                        if EXT && (fb_on || redundant) {
                            prefetch(sent.as_ptr().wrapping_add(item.opset as usize));
                        } else {
                            prefetch(wl.opset_req.as_ptr().wrapping_add(item.opset as usize));
                        }
                        seq += 1;
                        if let Some(rec) = rec.as_mut().filter(|_| item.op < n_ops32) {
                            let i = item.op as usize;
                            rec.request[i] = wl.opset_req[item.opset as usize];
                            rec.opset[i] = item.opset;
                            rec.server[i] = s as u32;
                            rec.slot[i] = slot;
                            rec.start[i] = now;
                            rec.end[i] = end;
                        }
                    }
                }
                dirty.clear();
            }
        }
    }

    if let Some(r) = remaining.iter().position(|&x| x != 0) {
        return Err(SimError::BadInput(format!(
            "internal: request {r} never completed"
        )));
    }
    // A closed loop offers no external rate: its offered load is measured over the makespan (first issue → last
    // response), so a saturated bottleneck server reads just under 1 and steady state rests on the half ratio.
    let span = if closed_on {
        last_done.saturating_sub(arrival_rt[0])
    } else {
        wl.arrival[n_req - 1] - wl.arrival[0]
    };
    let summary = summarize(&latency, rc.warmup, &server_demand, cfg.slots, span);
    let run_bytes =
        opset_server.len() * 4 + opset_tag.len() * std::mem::size_of::<Tag>() + n_req * 12;
    let mut makespan_ns = 0;
    if held.opsets > 0 {
        held.mean_ms = held_wait_ns as f64 / held.opsets as f64 / 1e6;
    }
    held.unstable = held.at_end >= 10 && 2 * held.at_end >= 3 * held.at_half;
    if EXT {
        let first = if closed_on { arrival_rt[0] } else { wl.arrival[0] };
        makespan_ns = last_done.saturating_sub(first);
    }
    Ok(RunResult {
        policy: policy.name(),
        params: policy.params(),
        selector: rc.selector.name(),
        selector_params: rc.selector.params(),
        latency_ns: latency,
        summary,
        requests: n_req,
        ops: n_ops,
        events,
        sim_wall_s: started.elapsed().as_secs_f64(),
        bytes_per_op: (wl.bytes() + run_bytes) as f64 / n_ops.max(1) as f64,
        records: rec,
        held,
        copies,
        writes,
        served_ops,
        makespan_ns,
        arrival_ns: arrival_rt,
        capacity_factor: rc.servers.capacity_factor(n_servers),
    })
}
