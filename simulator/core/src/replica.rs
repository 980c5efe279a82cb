//! Replica selection — a seam separate from the server queue discipline. The core issue only needs round-robin
//! (Rein §5.3); C3, dynamic snitching and Héron plug in here later via `on_response` feedback.

// Issue 4: one selector per file; the configuration (enum dispatch) is in `replica/config.rs`.
pub mod c3;
pub mod config;
pub mod dynamic_snitch;
pub mod feedback;
pub mod heron;
pub mod least_outstanding;
pub mod random;

pub use config::{SelectorConfig, SelectorEnv, REPLICA_NAMES};
pub use feedback::{Feedback, SelectCtx};

/// Chooses one replica of a replica group for an opset.
pub trait ReplicaSelector {
    /// `replicas` are the group's RF servers (primary first); `outstanding[s]` = ops in flight/queued/in service.
    /// Selectors that need more context implement `choose` instead.
    fn select(&mut self, client: u32, group: u32, replicas: &[u32], outstanding: &[u32]) -> u32 {
        let ctx = SelectCtx {
            now: 0,
            client,
            group,
            replicas,
            outstanding,
            size: 1,
            large_ops: 0,
        };
        self.choose(&ctx).unwrap_or(replicas[0])
    }
    /// The replica for an opset, or `None` to hold it at the client (C3's backlog, Héron's blocked large
    /// requests); the engine retries at `wakeup` and whenever feedback reaches a client.
    fn choose(&mut self, ctx: &SelectCtx<'_>) -> Option<u32> {
        Some(self.select(ctx.client, ctx.group, ctx.replicas, ctx.outstanding))
    }
    /// Feedback hook: an op of `client` served by `server` finished at `now` (unused by round-robin).
    fn on_response(&mut self, _client: u32, _server: u32, _now: u64) {}
    /// The selector wants `on_op_response` for every op (the engine then tracks server queues).
    fn wants_feedback(&self) -> bool {
        false
    }
    /// Per-op feedback, called when the op ends; `fb.at` is when it reaches the client.
    fn on_op_response(&mut self, _fb: &Feedback) {}
    /// When held opsets should be retried next (besides feedback arrivals), if the selector knows.
    fn wakeup(&self, _now: u64) -> Option<u64> {
        None
    }
    /// A request's opsets are about to be placed at `now`: `client` will choose among `replicas` (group
    /// `group`). Selectors whose choice reads per-(client, server) state prefetch it here, so the request's cache
    /// misses overlap instead of coming one per choice. A hint only: no state may change. Default: nothing.
    #[inline]
    fn prefetch_choice(&self, _now: u64, _client: u32, _group: u32, _replicas: &[u32]) {}
    /// Called before the held opsets are retried at `now`: which of them `choose` may place now. `Skip`
    /// promises that `choose` would refuse every one without changing any state; `Freed` that it would refuse,
    /// without changing any state, every one whose replicas are all outside the servers it pushed onto `freed`
    /// (and that placing one never lets another, refused before, through). Default: `All`.
    fn held_retry(&mut self, _now: u64, _freed: &mut Vec<u32>) -> HeldRetry {
        HeldRetry::All
    }
    /// In a `Freed` retry, before each held opset of the group with `replicas`: `false` promises that `choose`
    /// would refuse, without changing any state, every held opset of that group for the rest of this retry.
    fn may_place_in(&self, _replicas: &[u32]) -> bool {
        true
    }
}

/// Which held opsets a retry visits (see [`ReplicaSelector::held_retry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldRetry {
    All,
    Skip,
    /// Only those with a replica among the servers the selector listed.
    Freed,
}

/// Replica selection strategies (enum dispatch).
#[derive(Debug, Clone)]
pub enum Selector {
    RoundRobin(RoundRobin),
    Random(random::RandomSel),
    LeastOutstanding(least_outstanding::LeastOutstanding),
    Ds(dynamic_snitch::DynamicSnitch),
    C3(c3::C3),
    Heron(heron::Heron),
}

macro_rules! sel_dispatch {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            Selector::RoundRobin($s) => $e,
            Selector::Random($s) => $e,
            Selector::LeastOutstanding($s) => $e,
            Selector::Ds($s) => $e,
            Selector::C3($s) => $e,
            Selector::Heron($s) => $e,
        }
    };
}

impl ReplicaSelector for Selector {
    #[inline]
    fn select(&mut self, client: u32, group: u32, replicas: &[u32], outstanding: &[u32]) -> u32 {
        sel_dispatch!(self, s => s.select(client, group, replicas, outstanding))
    }
    #[inline]
    fn choose(&mut self, ctx: &SelectCtx<'_>) -> Option<u32> {
        sel_dispatch!(self, s => s.choose(ctx))
    }
    #[inline]
    fn on_response(&mut self, client: u32, server: u32, now: u64) {
        sel_dispatch!(self, s => s.on_response(client, server, now))
    }
    #[inline]
    fn wants_feedback(&self) -> bool {
        sel_dispatch!(self, s => s.wants_feedback())
    }
    #[inline]
    fn on_op_response(&mut self, fb: &Feedback) {
        sel_dispatch!(self, s => s.on_op_response(fb))
    }
    #[inline]
    fn wakeup(&self, now: u64) -> Option<u64> {
        sel_dispatch!(self, s => s.wakeup(now))
    }
    #[inline]
    fn held_retry(&mut self, now: u64, freed: &mut Vec<u32>) -> HeldRetry {
        sel_dispatch!(self, s => s.held_retry(now, freed))
    }
    #[inline]
    fn may_place_in(&self, replicas: &[u32]) -> bool {
        sel_dispatch!(self, s => s.may_place_in(replicas))
    }
    #[inline]
    fn prefetch_choice(&self, now: u64, client: u32, group: u32, replicas: &[u32]) {
        sel_dispatch!(self, s => s.prefetch_choice(now, client, group, replicas))
    }
}

/// Every client rotates over each group's replicas, one step per opset; client c starts at replica c mod RF.
#[derive(Debug, Clone)]
pub struct RoundRobin {
    next: Vec<u8>,
    groups: usize,
}

impl RoundRobin {
    pub fn new(clients: usize, groups: usize, rf: usize) -> Self {
        let mut next = vec![0u8; clients * groups];
        for c in 0..clients {
            next[c * groups..(c + 1) * groups].fill((c % rf) as u8);
        }
        RoundRobin { next, groups }
    }
}

impl ReplicaSelector for RoundRobin {
    #[inline]
    fn select(&mut self, client: u32, group: u32, replicas: &[u32], _outstanding: &[u32]) -> u32 {
        let i = client as usize * self.groups + group as usize;
        let k = self.next[i] as usize;
        self.next[i] = ((k + 1) % replicas.len()) as u8;
        replicas[k]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_rotates_per_client_and_group() {
        let mut rr = RoundRobin::new(2, 2, 3);
        let reps = [7, 8, 9];
        let c0: Vec<u32> = (0..4).map(|_| rr.select(0, 0, &reps, &[])).collect();
        assert_eq!(c0, vec![7, 8, 9, 7]);
        let c1: Vec<u32> = (0..2).map(|_| rr.select(1, 0, &reps, &[])).collect();
        assert_eq!(c1, vec![8, 9]);
        assert_eq!(rr.select(0, 1, &reps, &[]), 7);
    }
}
