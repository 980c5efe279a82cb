//! What a replay reports: one [`RunResult`].
use crate::stats::Summary;

/// Per-op record, indexed like the workload's ops (times in ns).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpRecords {
    pub request: Vec<u32>,
    pub opset: Vec<u32>,
    pub server: Vec<u32>,
    pub slot: Vec<u32>,
    pub enqueue: Vec<u64>,
    pub start: Vec<u64>,
    pub end: Vec<u64>,
    pub demand: Vec<u64>,
}

/// Opsets held at the clients (C3's backlog, Héron's blocked large requests); all zero for selectors that never
/// hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeldStats {
    /// Opsets that were held at least once.
    pub opsets: u64,
    /// Largest number of opsets held at once.
    pub max: u64,
    /// Mean hold time of the held opsets, ms.
    pub mean_ms: f64,
    /// Opsets held when the middle request arrived / when the last request arrived.
    pub at_half: u64,
    pub at_end: u64,
    /// The backlog keeps growing: ≥ 10 held at the last arrival and at least 1.5× as many as at the middle
    /// one (a backlog growing linearly from 0 doubles) — the selector cannot keep up with open-loop arrivals
    /// (Héron's busy rule at high large shares).
    pub unstable: bool,
}

/// Duplication / speculative retry: op copies sent, and copies whose answer came first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CopyStats {
    pub ops: u64,
    pub wins: u64,
}

/// Writes: write ops, and their extra copies served at the other replicas ((RF − 1) per write).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteStats {
    pub ops: u64,
    pub copies: u64,
}

/// Read timeouts (coordinator section with `drop_expired`): requests answered with a timeout, and reads their
/// replica dropped unserved because they had expired.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimeoutStats {
    /// The replay modelled read timeouts.
    pub on: bool,
    pub requests: u64,
    pub dropped_reads: u64,
}

/// Result of one replay.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub policy: &'static str,
    /// The policy's parameters in use.
    pub params: Vec<(&'static str, f64)>,
    pub selector: &'static str,
    /// The selector's parameters in use.
    pub selector_params: Vec<(&'static str, f64)>,
    /// Latency of every request (client arrival → last response at the client), ns, in arrival order.
    pub latency_ns: Vec<u64>,
    pub summary: Summary,
    pub requests: usize,
    pub ops: usize,
    pub events: u64,
    pub sim_wall_s: f64,
    /// Bytes of workload + per-run state per op.
    pub bytes_per_op: f64,
    pub records: Option<OpRecords>,
    pub held: HeldStats,
    pub copies: CopyStats,
    pub writes: WriteStats,
    pub timeouts: TimeoutStats,
    /// Op services completed (originals + copies of any kind). Counted by the general event loop only: 0 when
    /// the plain loop ran (round-robin replicas, core model), where it would equal `ops`.
    pub served_ops: u64,
    /// Last response at a client − first arrival, ns (general event loop only; 0 otherwise).
    pub makespan_ns: u64,
    /// Closed loop: the arrival time of each request (when its thread issued it), ns; empty in open loop.
    pub arrival_ns: Vec<u64>,
    /// Time-averaged capacity of the servers relative to all at speed 1 (1 without speeds and slowdowns).
    pub capacity_factor: f64,
    /// The stop rule (`ReplayConfig::stop`) ended the replay: its quantile is above the rule's bound; `summary`
    /// is then over the measured requests completed by then, and `latency_ns` is 0 for the others.
    pub stopped: bool,
}
