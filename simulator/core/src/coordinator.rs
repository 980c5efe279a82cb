//! The coordinator section of a [`ReplayConfig`](crate::ReplayConfig): the Cassandra-wide machinery every
//! Cassandra queue policy runs under, whatever its server queues — the coordinator's speculative retry
//! (`speculative_retry`, read with `SpeculativeRetryPolicy`, `AbstractReadExecutor` and `ColumnFamilyStore`'s
//! threshold update; sources cited in docs/stock-cassandra.md), the driver's routing and speculative executions,
//! and the application's multiget shape. The engine makes the extra reads (real load at the next replica); the
//! client side is in `policy/stock_driver.rs`; this file holds the configuration and the threshold rule. The
//! dynamic-snitch settings belong to the `dynamic-snitch` selector, not to this section.
//!
//! **Defaults.** [`CoordinatorConfig::default`] is the machinery off (speculative retry NEVER, one driver
//! execution, the `in` shape with the whole multiget in one query): a replay under it is the policy's replay
//! without a coordinator section, bit for bit, and the monomorphised loops do no extra work. The `stock` policy
//! (FIFO queues) starts from [`CoordinatorConfig::cassandra`] instead: Cassandra 5.0's and the Java driver 4's
//! defaults (`99p`). [`build_policy`] sends each named parameter to the policy when it has it, else to this
//! section; `duplicate` and `speculative` make their own client-side copies and refuse the section.
//!
//! **The Java driver's timer** (`se_tick_ms`, ms; 0 = exact). The Java driver 4 schedules each speculative
//! execution on its Netty `HashedWheelTimer` (`CqlRequestHandler.NodeResponseCallback.scheduleSpeculativeExecution`:
//! `timer.newTimeout(task, delay, MILLISECONDS)` once the previous execution's request is written), whose tick is
//! `advanced.netty.timer.tick-duration` (default 100 ms, global: not overridable in a profile). The timer's rule
//! (`newTimeout`, `Worker.run`, `transferTimeoutsToBuckets`, `HashedWheelBucket.expireTimeouts`; cited in
//! docs/stock-cassandra.md): a timeout's deadline D is taken relative to the timer's start; the worker's
//! iteration k runs once (k + 1) × tick has passed and expires the timeouts of bucket k, where a timeout lands in
//! bucket ⌊D / tick⌋ (never one already past). So it fires at (⌊D / tick⌋ + 1) × tick: always after D, by up to
//! one tick (a D on a tick boundary waits a whole tick). The model: the timer starts at the replay's time 0
//! (the driver starts it when its session opens, before the first request: a real phase is unknown), and
//! executions fire on that rule, the next one armed from the firing time ([`crate::policy::stock_driver::
//! timer_fires_at`]); the worker's wake-up jitter (it sleeps in whole ms, rounded up, and wakes late by the OS's
//! scheduling) is not modelled. The Python driver's executions are timers of its event loop: 0.
//!
//! The text of `speculative_retry` is parsed by the Python layer (`simulation.stock`) and reaches the
//! core as numbers: `spec_kind` (0 NEVER, 1 ALWAYS, 2 PERCENTILE, 3 FIXED, 4 MIN, 5 MAX), `spec_percentile`,
//! `spec_fixed_ms` (whole ms, as Cassandra keeps it).
//!
//! Threshold (per coordinator = per client): FIXED is `spec_fixed_ms`; PERCENTILE / MIN / MAX start at half the
//! read timeout (Cassandra's initial `sampleReadLatency`; `spec_initial_ms` instead: the threshold a running
//! coordinator has when the replay begins; with a latency history and no `spec_initial_ms`, the history's
//! percentile) and are recomputed by each coordinator's timer every `spec_refresh_ms` of simulated time (0 = the
//! read timeout, Cassandra's period; the first update at `spec_refresh_first_ms`, 0 = one period in; an update at
//! T runs after every other event at T) from the coordinator's read latencies, as Cassandra reads them: the
//! percentile of its `CoordinatorReadLatency` histogram (`spec_histogram` = 1, [`crate::decaying_histogram`]):
//! forward-decayed with a 60 s half-life in whole-second, rounded weights from a landmark set
//! `spec_landmark_ms` before time 0 (0: the table opens at time 0) and moved at the first access more than 30
//! minutes after it; an empty snapshot keeps the threshold. `ReplayConfig::latency_history` warms every
//! coordinator's histogram with bucket counts at time 0. `spec_histogram` = 0 takes the exact nearest rank over
//! the last `window` samples instead. Warm start (a replay covers seconds, a real coordinator has run for
//! minutes), `spec_warm` = 1: the replay's warm-up cut (requests before the first measured one, open loop) runs
//! under the initial threshold and each coordinator takes, at its first sample at or after the first measured
//! request's arrival, the percentile of every coordinator's samples so far (pooled, once); the timer's updates
//! go on meanwhile. `spec_warm` = 0 is Cassandra's rule as it is (the warm-up cut — minutes of the trace before
//! the measured part — then warms the histograms as a running node's are). A threshold above the read timeout
//! means no speculation (`shouldSpeculateAndMaybeWait`), so `MAX(99p,100000ms)` ≡ `NEVER`. ALWAYS sends the
//! extra read at once.
//!
//! Every read carries its request's start (`Dispatcher.RequestTime`; engine `Sim::read_start`): the client's
//! send of its opset for the first read and its coordinator retry, the request's arrival for every partition of
//! a paged query, a driver execution's own start for that execution's reads. A coordinator retry is due at that
//! start + the threshold (`awaitUntil(startedAtNanos + T)`: a read sent later is retried at once; none when
//! now + T passes the 12 s client deadline); a read message expires at that start + the read timeout; the
//! dynamic snitch samples its answer's time since that start.
//!
//! Paged `IN` queries (`paged` = 1; `MultiPartitionPager`): the request's ops are read one at a time, in op
//! order — op k+1 leaves when op k's first answer reaches the coordinator; each op is one `readRegular`, its
//! latency (its send → its first answer) one threshold sample; a partition due after the request's start + read
//! timeout times the request out at once (sample 0) (engine: `page_send`, `page_answer`). Off (0, the default)
//! a query's ops are read at once and its latency is sampled once per key.
//!
//! Coordinators that are nodes (the `per-partition` shape's, `dynamic-snitch`'s `local` = 1) read the replica
//! their own snitch puts first (`SimpleSnitch`: the ring order, no preference for themselves); a read of
//! themselves is local: no network hop either way, no selector feedback, and when the node has a free slot
//! beyond the ops waiting it runs inline (`Stage.READ.maybeExecuteImmediately`): no coordinator retry.
//!
//! Read timeouts (`drop_expired` = 1; `stock`, and any policy given a coordinator parameter): a read message
//! expires `read_timeout_ms` after its request's start (above); a replica whose stage reaches an expired read
//! drops it unserved (`InboundMessageHandler.ProcessMessage.run`: `onExpired` when the start is after
//! `expiresAtNanos`; Cassandra's dropped-READ count). The coordinator answers a request it has not answered by
//! its deadline (arrival + read timeout) with a timeout: its latency is the read timeout, and the coordinator's
//! latency histogram records a latency past the timeout (`StorageProxy.readRegular` records timeouts too, after
//! the wait ends), so a percentile landing there means no speculation. A dropped read is after its
//! request's deadline, so the request is answered with a timeout then (a closed-loop thread learns it at the
//! drop); a request answered after its deadline by reads that started in time takes the read timeout as its
//! latency. Writes are always served. A read that starts before its expiry is served whole (Cassandra also
//! aborts a read that runs past it, between rows: at most one service time's difference).
use crate::error::SimError;
use crate::params::{Params, Search};
use crate::policy::PolicyConfig;

/// `spec_kind` values.
pub const NEVER: u8 = 0;
pub const ALWAYS: u8 = 1;
pub const PERCENTILE: u8 = 2;
pub const FIXED: u8 = 3;
pub const MIN: u8 = 4;
pub const MAX: u8 = 5;

crate::params! {
    pub struct CoordinatorConfig for "the coordinator" {
        /// speculative_retry kind: 0 NEVER, 1 ALWAYS, 2 PERCENTILE, 3 FIXED, 4 MIN, 5 MAX (default NEVER; `stock`: 99p).
        spec_kind: f64 = 0.0, Rounded(0.0, 5.0, "0..=5 (NEVER, ALWAYS, PERCENTILE, FIXED, MIN, MAX)"), Search::Fixed;
        /// The percentile of PERCENTILE, MIN and MAX.
        spec_percentile: f64 = 99.0, Real(0.0, 100.0, "(0, 100)"), Search::Fixed;
        /// The fixed time of FIXED, MIN and MAX, whole ms.
        spec_fixed_ms: f64 = 0.0, Rounded(0.0, 2147483647.0, "0..=2147483647 ms"), Search::Fixed;
        /// read_request_timeout, ms (Cassandra 5.0: 5000).
        read_timeout_ms: f64 = 5000.0, Real(1.0, 1e9, "[1, 1e9] ms"), Search::Fixed;
        /// Period of the threshold update, ms of simulated time; 0 = the read timeout.
        spec_refresh_ms: f64 = 0.0, Real(0.0, 1e9, "[0, 1e9] ms (0 = the read timeout)"), Search::Fixed;
        /// The threshold each coordinator starts from, ms (PERCENTILE, MIN, MAX); 0 = half the read timeout,
        /// Cassandra's initial `sampleReadLatency` of a table just opened. A running coordinator's current one is
        /// its table's `SpeculativeSampleLatencyNanos` (JMX).
        spec_initial_ms: f64 = 0.0, Real(0.0, 1e9, "[0, 1e9] ms (0 = half the read timeout)"), Search::Fixed;
        /// The time of each coordinator's first threshold update, ms (then one every `spec_refresh_ms`); 0 = one
        /// period in (a node started at time 0: `CassandraDaemon` schedules the update a read timeout after start).
        spec_refresh_first_ms: f64 = 0.0, Real(0.0, 1e9, "[0, 1e9] ms (0 = one period in)"), Search::Fixed;
        /// How long before the replay's time 0 the histograms' decay landmark was set, ms: 0 = the table opens at
        /// time 0; Cassandra moves the landmark at the first access more than 30 minutes after it.
        spec_landmark_ms: f64 = 0.0, Real(0.0, 1.8e6, "[0, 1800000] ms (30 minutes)"), Search::Fixed;
        /// Warm start: 1 = recompute at the end of the replay's warm-up cut (see the module doc); 0 = Cassandra's rule.
        spec_warm: f64 = 1.0, Rounded(0.0, 1.0, "0 or 1"), Search::Fixed;
        /// Samples of the latency window (the last ones) when `spec_histogram` = 0.
        window: f64 = 10000.0, Rounded(1.0, 1e7, "1..=1e7 samples"), Search::Fixed;
        /// The latencies the percentile is read from: 1 = Cassandra's decaying histogram (60 s half-life, ~20 %
        /// buckets; `decaying_histogram.rs`), 0 = exact nearest rank over the last `window` samples.
        spec_histogram: f64 = 1.0, Rounded(0.0, 1.0, "0 (window) or 1 (decaying histogram)"), Search::Fixed;
        /// The client's driver: 0 = Java driver 4, 1 = Python cassandra-driver.
        driver: f64 = 0.0, Rounded(0.0, 1.0, "0 (java4) or 1 (python)"), Search::Fixed;
        /// Driver speculative execution: delay between executions, ms (ConstantSpeculativeExecutionPolicy).
        se_delay_ms: f64 = 100.0, Real(0.0, 1e9, "[0, 1e9] ms"), Search::Fixed;
        /// Driver speculative execution: executions at most, counting the first (1 = none; Java's max-executions).
        se_max: f64 = 1.0, Rounded(1.0, 16.0, "1..=16 executions"), Search::Fixed;
        /// Java driver 4: the tick of the timer its speculative executions are scheduled on, ms
        /// (`advanced.netty.timer.tick-duration`; Netty's `HashedWheelTimer`, see the module doc); 0 = exact timing
        /// (the Python driver, and the default: the Python layer sets the tick the rendered driver config runs).
        se_tick_ms: f64 = 0.0, Real(0.0, 3.6e6, "0 (exact) or [1, 3600000] ms"), Search::Fixed;
        /// Java driver 4: DefaultLoadBalancingPolicy's slow-replica avoidance (acts with 3 or more replicas).
        slow_avoid: f64 = 1.0, Rounded(0.0, 1.0, "0 or 1"), Search::Fixed;
        /// Python driver: TokenAwarePolicy(shuffle_replicas=...) (the Java driver 4 always shuffles).
        shuffle: f64 = 0.0, Rounded(0.0, 1.0, "0 or 1"), Search::Fixed;
        /// Multiget shape: 0 = one `SELECT ... IN (...)` per chunk, 1 = one token-aware query per partition.
        shape: f64 = 0.0, Rounded(0.0, 1.0, "0 (in) or 1 (per-partition)"), Search::Fixed;
        /// Keys per query of the `in` shape (0 = all the multiget's keys in one query).
        chunk: f64 = 0.0, Rounded(0.0, 1e9, "0 (all) or keys per query"), Search::Fixed;
        /// Read timeouts as Cassandra has them: 1 = a replica drops a read whose message outlived the read
        /// timeout when its turn comes, and a request unanswered by its deadline is answered with a timeout
        /// (see the module doc); 0 = every read is served, however late (the papers' model).
        drop_expired: f64 = 0.0, Rounded(0.0, 1.0, "0 or 1"), Search::Fixed;
        /// Paged `IN` queries (the driver's fetch size below the query's LIMIT): 1 = the coordinator reads the
        /// query's partitions one at a time (Cassandra's `MultiPartitionPager`), each its own read with its own
        /// latency sample, all carrying the request's start; 0 = all at once.
        paged: f64 = 0.0, Rounded(0.0, 1.0, "0 or 1"), Search::Fixed;
    }
    validate = validate_coordinator;
}

fn validate_coordinator(c: &CoordinatorConfig) -> Result<(), SimError> {
    if c.se_tick_ms > 0.0 && c.se_tick_ms < 1.0 {
        return Err(SimError::param(
            "se_tick_ms",
            c.se_tick_ms,
            "0 (exact) or at least 1 ms (Netty's HashedWheelTimer runs a shorter tick as 1 ms)",
        ));
    }
    let uses_pct = matches!(c.spec_kind as u8, PERCENTILE | MIN | MAX);
    if uses_pct && !(c.spec_percentile > 0.0 && c.spec_percentile < 100.0) {
        return Err(SimError::param(
            "spec_percentile",
            c.spec_percentile,
            "(0, 100) exclusive, as Cassandra",
        ));
    }
    if c.shape >= 0.5 && c.chunk > 1.0 {
        return Err(SimError::param(
            "chunk",
            c.chunk,
            "0 or 1 with shape 1 (per-partition: one key per query)",
        ));
    }
    if c.paged() {
        // Paging reads the `in` shape's one query of every key, with one driver execution.
        let bad = if c.per_partition() {
            Some(("shape", c.shape, "0 (in) with paged 1"))
        } else if c.chunk >= 0.5 {
            Some(("chunk", c.chunk, "0 (one query of every key) with paged 1"))
        } else if c.hedges() {
            Some(("se_max", c.se_max, "1 (no driver executions) with paged 1"))
        } else {
            None
        };
        if let Some((name, value, valid)) = bad {
            return Err(SimError::param(name, value, valid));
        }
    }
    Ok(())
}

impl CoordinatorConfig {
    /// Cassandra 5.0's and the Java driver 4's defaults (`speculative_retry = 99p`): the `stock` policy's section.
    pub fn cassandra() -> Self {
        CoordinatorConfig {
            spec_kind: PERCENTILE as f64,
            drop_expired: 1.0,
            ..CoordinatorConfig::default()
        }
    }

    /// The section `policy` starts from: [`CoordinatorConfig::cassandra`] for `stock`, the machinery off
    /// ([`CoordinatorConfig::default`]) for the others.
    pub fn for_policy(policy: &PolicyConfig) -> Self {
        match policy {
            PolicyConfig::Stock(_) => CoordinatorConfig::cassandra(),
            _ => CoordinatorConfig::default(),
        }
    }

    pub fn kind(&self) -> u8 {
        self.spec_kind as u8
    }

    /// The replay makes extra reads (NEVER makes none: a plain replay).
    pub fn speculates(&self) -> bool {
        self.kind() != NEVER && !(self.kind() == FIXED && self.fixed_ns() > self.timeout_ns())
    }

    /// The driver makes speculative executions (max executions > 1).
    pub fn hedges(&self) -> bool {
        self.se_max >= 1.5
    }

    /// The `per-partition` shape: every key is its own query, routed by the driver.
    pub fn per_partition(&self) -> bool {
        self.shape >= 0.5
    }

    /// The replay runs the coordinator's client side (queries, speculative retry, driver executions or routing).
    /// Off, the replay is the policy's own; `chunk` alone changes nothing (queries matter only to the others).
    pub fn active(&self) -> bool {
        self.speculates()
            || self.hedges()
            || self.per_partition()
            || self.drops_expired()
            || self.paged()
    }

    /// Paged `IN` queries: the query's partitions are read one at a time.
    pub fn paged(&self) -> bool {
        self.paged >= 0.5
    }

    /// Replicas drop expired reads and requests time out at the read timeout.
    pub fn drops_expired(&self) -> bool {
        self.drop_expired >= 0.5
    }

    /// The driver timer's tick, ns (0: exact timing).
    pub fn tick_ns(&self) -> u64 {
        (self.se_tick_ms * 1e6).round() as u64
    }

    pub fn fixed_ns(&self) -> u64 {
        self.spec_fixed_ms as u64 * 1_000_000
    }

    pub fn timeout_ns(&self) -> u64 {
        (self.read_timeout_ms * 1e6).round() as u64
    }

    /// The threshold a coordinator starts from: `spec_initial_ms`, or half the read timeout when it is 0.
    pub fn initial_ns(&self) -> u64 {
        if self.spec_initial_ms > 0.0 {
            (self.spec_initial_ms * 1e6).round() as u64
        } else {
            self.timeout_ns() / 2
        }
    }

    pub fn refresh_ns(&self) -> u64 {
        if self.spec_refresh_ms > 0.0 {
            (self.spec_refresh_ms * 1e6).round() as u64
        } else {
            self.timeout_ns()
        }
    }

    /// The time of each coordinator's first threshold update: `spec_refresh_first_ms`, or one period in.
    pub fn first_refresh_ns(&self) -> u64 {
        if self.spec_refresh_first_ms > 0.0 {
            (self.spec_refresh_first_ms * 1e6).round() as u64
        } else {
            self.refresh_ns()
        }
    }

    /// How long before time 0 the histograms' landmark was set, ns.
    pub fn landmark_ns(&self) -> u64 {
        (self.spec_landmark_ms * 1e6).round() as u64
    }

    /// Cassandra's `calculateThreshold` given the histogram's value at the percentile; then `None` (no
    /// speculation) when above the read timeout.
    pub fn threshold(&self, pct_ns: u64) -> Option<u64> {
        let t = match self.kind() {
            NEVER => return None,
            ALWAYS => 0,
            FIXED => self.fixed_ns(),
            PERCENTILE => pct_ns,
            MIN => pct_ns.min(self.fixed_ns()),
            _ => pct_ns.max(self.fixed_ns()),
        };
        (t <= self.timeout_ns()).then_some(t)
    }
}

/// Why `policy` refuses a coordinator section that is not off (None: it takes one).
pub fn refusal(policy: &PolicyConfig) -> Option<&'static str> {
    match policy {
        PolicyConfig::Duplicate(_) | PolicyConfig::Speculative(_) => Some(
            "its own client-side copies stand in for the coordinator's speculative retry and the driver's executions",
        ),
        _ => None,
    }
}

/// Checks `co` against `policy`: a policy that refuses the section takes it only off.
pub fn check(policy: &PolicyConfig, co: &CoordinatorConfig) -> Result<(), SimError> {
    co.validate()?;
    match refusal(policy) {
        Some(why) if *co != CoordinatorConfig::default() => {
            let (name, value) = co
                .params()
                .into_iter()
                .zip(CoordinatorConfig::default().params())
                .find(|(a, b)| a.1 != b.1)
                .map_or(("spec_kind", co.spec_kind), |(a, _)| a);
            Err(SimError::param(
                name,
                value,
                &format!(
                    "unset: policy '{}' takes no coordinator parameters ({why})",
                    policy.name()
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// The named policy and its coordinator section: each parameter goes to the policy when the policy has it,
/// else to the section (which starts from [`CoordinatorConfig::for_policy`]); both validated. A policy given
/// any coordinator parameter is a Cassandra node with a coordinator: its reads time out as Cassandra's do
/// (`drop_expired` = 1 unless given).
pub fn build_policy(
    name: &str,
    params: &[(String, f64)],
) -> Result<(PolicyConfig, CoordinatorConfig), SimError> {
    let mut policy = PolicyConfig::from_name(name)?;
    let mut co = CoordinatorConfig::for_policy(&policy);
    let own = policy.entry().params;
    let mut to_section = false;
    for (k, v) in params {
        let to_policy = own.iter().any(|s| s.name == k)
            || !CoordinatorConfig::SPECS.iter().any(|s| s.name == k);
        if to_policy {
            policy.set(k, *v)?;
        } else {
            to_section = true;
            co.set(k, *v)?;
        }
    }
    if to_section && refusal(&policy).is_none() && !params.iter().any(|(k, _)| k == "drop_expired")
    {
        co.drop_expired = 1.0;
    }
    policy.validate()?;
    check(&policy, &co)?;
    Ok((policy, co))
}

/// The parameters a replay reports: the policy's own, then the coordinator section's when the policy starts from
/// Cassandra's defaults (`stock`) or the section is not off.
pub fn reported_params(policy: &PolicyConfig, co: &CoordinatorConfig) -> Vec<(&'static str, f64)> {
    let mut out = policy.params();
    if matches!(policy, PolicyConfig::Stock(_)) || *co != CoordinatorConfig::default() {
        out.extend(co.params());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_go_to_the_policy_first_then_to_the_section() {
        let p = |k: &str, v: f64| (k.to_string(), v);
        let (rein, co) = build_policy("rein", &[p("k", 3.0), p("spec_kind", 3.0)]).unwrap();
        assert_eq!(rein.params()[0], ("k", 3.0));
        assert_eq!((co.kind(), co.active()), (FIXED, true));
        let (_, off) = build_policy("rein", &[]).unwrap();
        assert_eq!(off, CoordinatorConfig::default());
        assert!(!off.active());
        let (stock, co) = build_policy("stock", &[]).unwrap();
        assert_eq!(co.kind(), PERCENTILE);
        assert_eq!(
            reported_params(&stock, &co).len(),
            CoordinatorConfig::SPECS.len()
        );
        // speculative's own `window`; its coordinator section must stay off
        let (spec, co) = build_policy("speculative", &[p("window", 10.0)]).unwrap();
        assert_eq!((spec.params()[2], co.window), (("window", 10.0), 10000.0));
        let e = build_policy("duplicate", &[p("se_max", 2.0)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("se_max") && e.contains("duplicate"), "{e}");
        assert!(build_policy("rein", &[p("nope", 1.0)]).is_err());
        // the driver's timer tick: 0 (exact) or at least Netty's 1 ms
        let e = build_policy("stock", &[p("se_tick_ms", 0.5)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("se_tick_ms") && e.contains("1 ms"), "{e}");
        let (_, co) = build_policy("stock", &[p("se_tick_ms", 100.0)]).unwrap();
        assert_eq!(co.tick_ns(), 100_000_000);
    }
}
