//! Issue 4's additions to a replay, kept out of `RunOptions` so the core's API stays as it was: the replica
//! selector, the per-op size classes, and what the run reports about opsets held at the clients.
use crate::client_model::ClosedLoop;
use crate::replica::SelectorConfig;
use crate::server_model::ServerModelConfig;

/// Extra inputs of a replay (`engine::run_with`). The default is the core issue's model exactly.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunExt {
    pub selector: SelectorConfig,
    /// Per op (workload order): the client's size estimate (Bloom filter answer) says "large". Empty = none.
    pub large_est: Vec<bool>,
    /// Per op (workload order): the value really exceeds THR_L (what a server reports). Empty = none.
    pub large_true: Vec<bool>,
    /// Seed of the selectors' random stream (also of the slowdown schedule and the think times).
    pub seed: u64,
    /// Per-server speed factors and time-varying slowdowns (default: every server at speed 1).
    pub servers: ServerModelConfig,
    /// Per op (workload order): the op is a write (served at every replica of its group, answered by the first
    /// replica done: consistency ONE). Empty = reads only.
    pub write: Vec<bool>,
    /// Closed-loop clients instead of the workload's open-loop arrivals.
    pub closed: Option<ClosedLoop>,
}

impl RunExt {
    /// True when none of the server, write or client-model extensions is on (the engine's plain loop may run).
    pub fn plain_model(&self) -> bool {
        self.servers.is_uniform() && !self.write.iter().any(|&w| w) && self.closed.is_none()
    }
}

/// Opsets held at the clients (C3 backlog, Héron's blocked large requests).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExtStats {
    /// Opsets that were held at least once.
    pub held_opsets: u64,
    /// Largest number of opsets held at once.
    pub held_max: u64,
    /// Mean hold time of the held opsets, ms.
    pub held_mean_ms: f64,
    /// Opsets held when the middle request arrived / when the last request arrived.
    pub held_at_half: u64,
    pub held_at_end: u64,
    /// The backlog keeps growing: ≥ 10 held at the last arrival and at least 1.5× as many as at the middle
    /// one (a backlog growing linearly from 0 doubles) — the selector cannot keep up with open-loop arrivals (Héron's busy rule at high large shares).
    pub unstable: bool,
    /// Duplication / speculative retry: op copies sent, and copies whose answer came first.
    pub copy_ops: u64,
    pub copy_wins: u64,
    /// Writes: write ops, and their extra copies served at the other replicas ((RF − 1) per write).
    pub write_ops: u64,
    pub write_copy_ops: u64,
    /// Op services completed (originals + copies of any kind); counted by the extension loop only (0 otherwise).
    pub served_ops: u64,
    /// Last response at a client − first arrival, ns (extension loop only; 0 otherwise).
    pub makespan_ns: u64,
    /// Closed loop: the arrival time of each request (when its thread issued it), ns; empty in open loop.
    pub arrival_ns: Vec<u64>,
}
