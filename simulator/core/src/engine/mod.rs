//! The deterministic event core.
//!
//! Time is integer nanoseconds (`u64`): exact, platform-independent, and trivially reproduced by the Python
//! reference model. Events are ordered by (time, sequence number): request arrivals are pre-scheduled with
//! sequence numbers 0..R−1 (in arrival order), every event created during the run gets the next number.
//! The core model has three event kinds:
//! 1. request arrival at its client — replica choice per opset, tagging by the policy, ops sent;
//! 2. a request's opsets reach their servers (arrival + one-way latency) — ops enqueued;
//! 3. an op finishes at a server slot — slot freed, request completes when its last op is done
//!    (response reaches the client one network latency later; with a measured client round trip,
//!    `Cluster::with_client_rtt`, the reported latency takes the request's drawn round trip in place of the two
//!    client hops, the events themselves unchanged; with a per-partition cost, `Cluster::with_client_key`, it
//!    grows by (keys − 1) × that cost).
//!
//! Replica selection, TailX and redundancy add client-side timers: held opsets retried, procrastinated opsets
//! released, speculative retries. Closed-loop clients turn arrivals into "a thread issues its next request".
//!
//! Servers pick ops for free slots only after every event of the current instant has been applied, so ops that
//! reach a server at the same instant compete for its slots (the hand-worked paper examples rely on this).
//! Free slots are taken lowest index first.
//!
//! Layout: this file validates the inputs and picks the monomorphized event loop; `state.rs` holds the replay's
//! state (one struct, built once per replay) and turns it into the result; `handlers.rs` is the loop and one
//! handler per event kind.
use std::mem::ManuallyDrop;
use std::time::Instant;

use crate::cluster::Cluster;
use crate::config::{ClientModel, ReplayConfig};
use crate::error::SimError;
use crate::policy::{Policy, PolicyConfig, PolicyVisitor, Scheduler, TailxConfig};
use crate::replica::{ReplicaSelector, Selector, SelectorEnv, SelectorVisitor};
use crate::result::RunResult;
use crate::workload::Workload;

mod handlers;
mod state;

use state::{Parts, Sim};

/// Replays `wl` on `cluster` as `cfg` says. Deterministic: same inputs, same result (except wall time).
pub fn replay(cluster: &Cluster, wl: &Workload, cfg: &ReplayConfig) -> Result<RunResult, SimError> {
    crate::error::check_range(
        "warmup",
        cfg.warmup,
        0.0,
        0.99,
        "[0, 0.99] (fraction of requests)",
    )?;
    if let Some(stop) = &cfg.stop {
        stop.validate()?;
    }
    let policy = &cfg.policy;
    policy.validate()?;
    wl.validate(cluster)?;
    let ccfg = &cluster.config;
    let n_servers = ccfg.servers as usize;
    let n_ops = wl.ops();
    let started = Instant::now();

    for (what, v) in [
        ("large_est", &cfg.sizes.large_est),
        ("large_true", &cfg.sizes.large_true),
        ("write", &cfg.writes),
    ] {
        if !v.is_empty() && v.len() != n_ops {
            return Err(SimError::BadInput(format!(
                "{what} has {} flags for {n_ops} ops",
                v.len()
            )));
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
        let large = if cfg.sizes.large_true.is_empty() {
            &cfg.sizes.large_est
        } else {
            &cfg.sizes.large_true
        };
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
    let co = &cfg.coordinator;
    crate::coordinator::check(policy, co)?;
    check_history(cfg)?;
    // Copies of op i run as i + k·n_ops: k < RF for writes, k = 1 for a coordinator retry, k = e for the e-th
    // driver execution.
    let copy_ids = ccfg.replication.max(2).max(co.se_max as u32 + 1);
    if (cfg.writes.iter().any(|&w| w)
        || co.active()
        || matches!(
            policy,
            PolicyConfig::Duplicate(_) | PolicyConfig::Speculative(_) | PolicyConfig::Stock(_)
        ))
        && n_ops as u64 * copy_ids as u64 >= u32::MAX as u64
    {
        return Err(SimError::BadInput(format!(
            "{n_ops} ops × {copy_ids} copies do not fit the engine's 32-bit op ids"
        )));
    }
    if (co.active() || matches!(policy, PolicyConfig::Stock(_)))
        && wl.requests().max(n_ops) >= 1 << 29
    {
        return Err(SimError::BadInput(format!(
            "the coordinator section replays fewer than 2^29 requests and ops ({n_ops} ops)"
        )));
    }
    // The per-partition shape: every key is its own query, routed on its own (one opset per op).
    let split;
    let wl = if co.per_partition() {
        split = crate::policy::stock_driver::split_partitions(wl);
        &split
    } else {
        wl
    };
    let sched = policy.instantiate(n_servers, n_ops);
    // Round-robin replicas on the core model (coordinator section off) run the plain loop: compiled without the
    // general loop's branches (selector feedback, held opsets, delay queue, copies, coordinator, server speeds,
    // writes, closed loop), monomorphized
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
    // The per-partition shape's coordinators are nodes, each with its own selector state: selector clients
    // 0..clients are the clients' coordinators, clients + n node n (see `Sim::selector_client`).
    let env = SelectorEnv {
        clients: cluster.config.clients as usize
            + if co.per_partition() { n_servers } else { 0 },
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

/// The coordinators' latency history: one count per bucket of Cassandra's histogram (with or without the
/// overflow bucket), read by the decaying histogram only.
fn check_history(cfg: &ReplayConfig) -> Result<(), SimError> {
    use crate::decaying_histogram::BUCKETS;
    let h = &cfg.latency_history;
    if h.is_empty() {
        return Ok(());
    }
    if h.len() != BUCKETS && h.len() != BUCKETS + 1 {
        return Err(SimError::BadInput(format!(
            "latency_history has {} counts: one per bucket of Cassandra's microsecond histogram, {BUCKETS} (or {} \
             with the overflow bucket)",
            h.len(),
            BUCKETS + 1
        )));
    }
    if cfg.coordinator.spec_histogram < 0.5 {
        return Err(SimError::BadInput(
            "latency_history needs the decaying histogram (coordinator parameter spec_histogram: 1)".into(),
        ));
    }
    Ok(())
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
            return run::<false, S, Selector>(self.a, sched, self.sel);
        }
        // Per (policy, feedback selector) as well: the selector's calls inline into the loop instead of going
        // through the enum (c3 −5%, ds −2…5%, least-outstanding −2.5% wall; bench/RESULTS.md § Speed pass
        // 2026-11-24).
        self.sel.visit(BySelector { a: self.a, sched })
    }
    fn generic(self, sched: Policy) -> Self::Output {
        run::<true, Policy, Selector>(self.a, sched, self.sel)
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
        run::<true, S, R>(self.a, self.sched, sel)
    }
    fn generic(self, sel: Selector) -> Self::Output {
        run::<true, S, Selector>(self.a, self.sched, sel)
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

/// One replay with the event loop `EXT`: `false` (the plain loop) compiles it without the general loop's
/// branches (selector feedback, held opsets, TailX delay queue, copies, server speeds, writes, closed-loop
/// clients), only valid for round-robin replicas, the core model and `fast` policies (the caller checks). Both
/// instances apply the same events in the same order. `selector` is the run's replica selector, instantiated by
/// the caller (a concrete selector type or the `Selector` enum).
#[inline(never)]
fn run<const EXT: bool, S: Scheduler, R: ReplicaSelector>(
    a: Args<'_>,
    sched: S,
    selector: R,
) -> Result<RunResult, SimError> {
    let mut parts = Parts::new::<EXT>(&a, sched, selector)?;
    // Not dropped if the loop panics (a bug): an unwinding drop of the whole state would be the one use of its
    // address outside the inlined loop, and the optimizer would then keep every field in memory.
    let mut sim = ManuallyDrop::new(Sim::<EXT, S, R>::new(a, &mut parts));
    sim.run();
    ManuallyDrop::into_inner(sim).finish()
}
