//! Issue 4's additions to a replay, kept out of `RunOptions` so the core's API stays as it was: the replica
//! selector, the per-op size classes, and what the run reports about opsets held at the clients.
use crate::replica::SelectorConfig;

/// Extra inputs of a replay (`engine::run_with`). The default is the core issue's model exactly.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunExt {
    pub selector: SelectorConfig,
    /// Per op (workload order): the client's size estimate (Bloom filter answer) says "large". Empty = none.
    pub large_est: Vec<bool>,
    /// Per op (workload order): the value really exceeds THR_L (what a server reports). Empty = none.
    pub large_true: Vec<bool>,
    /// Seed of the selectors' random stream.
    pub seed: u64,
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
}
