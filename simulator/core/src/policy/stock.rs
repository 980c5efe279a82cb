//! `stock`: what stock Cassandra 5.0 does on a CL ONE read — FIFO request stages per replica, the read sent to
//! the selector's first replica, and the coordinator's speculative retry (`speculative_retry`, read with
//! `SpeculativeRetryPolicy`, `AbstractReadExecutor` and `ColumnFamilyStore`'s threshold update; sources cited in
//! docs/stock-cassandra.md). The engine makes the extra reads (real load at the next replica), as for
//! `speculative`; this file holds the configuration and the threshold rule.
//!
//! The text of `speculative_retry` is parsed by the Python layer (`tailtune.simulation.stock`) and reaches the
//! core as numbers: `spec_kind` (0 NEVER, 1 ALWAYS, 2 PERCENTILE, 3 FIXED, 4 MIN, 5 MAX), `spec_percentile`,
//! `spec_fixed_ms` (whole ms, as Cassandra keeps it).
//!
//! Threshold (per coordinator = per client): FIXED is `spec_fixed_ms`; PERCENTILE / MIN / MAX start at half the
//! read timeout (Cassandra's initial `sampleReadLatency`) and are recomputed every `spec_refresh_ms` of simulated
//! time (0 = the read timeout, Cassandra's period) from the coordinator's read latencies (an opset's send → last
//! answer; nearest rank over the last `window` samples). Warm start (a replay covers seconds, a real coordinator
//! has run for minutes), `spec_warm` = 1: the replay's warm-up cut (requests before the first measured one, open
//! loop) runs under the initial threshold — no speculation, a warm-up pass — and each coordinator recomputes at
//! its first sample at or after the first measured request's arrival, from the warm-up's samples; then on the
//! period. `spec_warm` = 0 is Cassandra's rule as it is. A threshold above the read timeout means no speculation
//! (`shouldSpeculateAndMaybeWait`), so `MAX(99p,100000ms)` ≡ `NEVER`. ALWAYS sends the extra read at once.
use super::queues::FifoQueues;
use super::{PolicyImpl, QItem, Scheduler, Tag, TagCtx};
use crate::error::SimError;
use crate::params::Search;

/// `spec_kind` values.
pub const NEVER: u8 = 0;
pub const ALWAYS: u8 = 1;
pub const PERCENTILE: u8 = 2;
pub const FIXED: u8 = 3;
pub const MIN: u8 = 4;
pub const MAX: u8 = 5;

crate::params! {
    pub struct StockConfig for "policy 'stock'" {
        /// speculative_retry kind: 0 NEVER, 1 ALWAYS, 2 PERCENTILE, 3 FIXED, 4 MIN, 5 MAX (default 99p).
        spec_kind: f64 = 2.0, Rounded(0.0, 5.0, "0..=5 (NEVER, ALWAYS, PERCENTILE, FIXED, MIN, MAX)"), Search::Fixed;
        /// The percentile of PERCENTILE, MIN and MAX.
        spec_percentile: f64 = 99.0, Real(0.0, 100.0, "(0, 100)"), Search::Fixed;
        /// The fixed time of FIXED, MIN and MAX, whole ms.
        spec_fixed_ms: f64 = 0.0, Rounded(0.0, 2147483647.0, "0..=2147483647 ms"), Search::Fixed;
        /// read_request_timeout, ms (Cassandra 5.0: 5000).
        read_timeout_ms: f64 = 5000.0, Real(1.0, 1e9, "[1, 1e9] ms"), Search::Fixed;
        /// Period of the threshold update, ms of simulated time; 0 = the read timeout.
        spec_refresh_ms: f64 = 0.0, Real(0.0, 1e9, "[0, 1e9] ms (0 = the read timeout)"), Search::Fixed;
        /// Warm start: 1 = recompute at the end of the replay's warm-up cut (see the module doc); 0 = Cassandra's rule.
        spec_warm: f64 = 1.0, Rounded(0.0, 1.0, "0 or 1"), Search::Fixed;
        /// Samples of the latency histogram (the last ones).
        window: f64 = 10000.0, Rounded(1.0, 1e7, "1..=1e7 samples"), Search::Fixed;
        /// The client's driver: 0 = Java driver 4, 1 = Python cassandra-driver.
        driver: f64 = 0.0, Rounded(0.0, 1.0, "0 (java4) or 1 (python)"), Search::Fixed;
        /// Driver speculative execution: delay between executions, ms (ConstantSpeculativeExecutionPolicy).
        se_delay_ms: f64 = 100.0, Real(0.0, 1e9, "[0, 1e9] ms"), Search::Fixed;
        /// Driver speculative execution: executions at most, counting the first (1 = none; Java's max-executions).
        se_max: f64 = 1.0, Rounded(1.0, 16.0, "1..=16 executions"), Search::Fixed;
        /// Java driver 4: DefaultLoadBalancingPolicy's slow-replica avoidance (acts with 3 or more replicas).
        slow_avoid: f64 = 1.0, Rounded(0.0, 1.0, "0 or 1"), Search::Fixed;
        /// Python driver: TokenAwarePolicy(shuffle_replicas=...) (the Java driver 4 always shuffles).
        shuffle: f64 = 0.0, Rounded(0.0, 1.0, "0 or 1"), Search::Fixed;
        /// Multiget shape: 0 = one `SELECT ... IN (...)` per chunk, 1 = one token-aware query per partition.
        shape: f64 = 0.0, Rounded(0.0, 1.0, "0 (in) or 1 (per-partition)"), Search::Fixed;
        /// Keys per query of the `in` shape (0 = all the multiget's keys in one query).
        chunk: f64 = 0.0, Rounded(0.0, 1e9, "0 (all) or keys per query"), Search::Fixed;
    }
    validate = validate_stock;
}

fn validate_stock(c: &StockConfig) -> Result<(), SimError> {
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
    Ok(())
}

impl StockConfig {
    pub fn kind(&self) -> u8 {
        self.spec_kind as u8
    }

    /// The replay makes extra reads (NEVER makes none: a plain FIFO replay).
    pub fn speculates(&self) -> bool {
        self.kind() != NEVER && !(self.kind() == FIXED && self.fixed_ns() > self.timeout_ns())
    }

    pub fn fixed_ns(&self) -> u64 {
        self.spec_fixed_ms as u64 * 1_000_000
    }

    pub fn timeout_ns(&self) -> u64 {
        (self.read_timeout_ms * 1e6).round() as u64
    }

    pub fn refresh_ns(&self) -> u64 {
        if self.spec_refresh_ms > 0.0 {
            (self.spec_refresh_ms * 1e6).round() as u64
        } else {
            self.timeout_ns()
        }
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

#[derive(Debug, Clone)]
pub struct Stock {
    q: FifoQueues,
}

impl PolicyImpl for Stock {
    type Config = StockConfig;
    fn new(_cfg: &StockConfig, servers: usize, _ops: usize) -> Self {
        Stock {
            q: FifoQueues::new(servers),
        }
    }
}

impl Scheduler for Stock {
    #[inline]
    fn tag(&mut self, _ctx: &TagCtx<'_>, _tags: &mut [Tag]) {}
    #[inline]
    fn enqueue(&mut self, server: usize, item: QItem) {
        self.q.push(server, item);
    }
    #[inline]
    fn pick(&mut self, server: usize, _now: u64) -> Option<QItem> {
        self.q.pop(server)
    }
}
