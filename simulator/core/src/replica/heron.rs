//! `heron`: Héron's replica selection (Jaiman et al., SRDS'18 §IV).
//!
//! - Size estimate: an opset is large when the Bloom filter of large keys says any of its keys is large
//!   (`SelectCtx::large_ops > 0`; the engine gets the per-op answers from the filter built for the run).
//! - Scores: C3's ranking (feedback on queue size and service time piggybacked on responses, EWMA), no rate
//!   control (Héron §IV-B).
//! - Status: a replica is *busy* while it holds ≥ `busy_capacity` large ops (1 = the paper's literal rule).
//!   Coordinators share one status table fed by the responses (each carries the server's count of resident large
//!   ops) plus the large opsets sent since: a report generated at the server at t_r covers the large opsets sent
//!   up to t_r − d (they had arrived); the ones sent later are added. The view is stale by the network delay,
//!   as in the paper's best-effort propagation.
//! - Large opset: the best-scored *available* replica; none available → blocked at the coordinator until a
//!   response changes the table (the engine retries then). Small opset: the first available replica in score
//!   order; when all are busy (the paper leaves it open) the best-scored one.
use std::collections::VecDeque;

use super::c3::{C3Config, C3};
use super::feedback::{Feedback, Pending, SelectCtx};
use super::{HeldRetry, ReplicaSelector};
use crate::params::Search;
use crate::policy::THR_L_CHOICES;

crate::params! {
    /// Héron's status rule and C3's scoring parameters (same ranges as `c3`).
    pub struct HeronConfig for "replica selector 'heron'" {
        /// THR_L: values above it are large; 0 = derived from the workload's value sizes (the caller fills it in).
        thr_l_bytes: f64 = 0.0, Real(0.0, 1e15, "[0, 1e15] bytes (0 = derived)"), Search::Choices(THR_L_CHOICES);
        /// A replica is busy while it holds at least this many large ops (a whole number).
        busy_capacity: f64 = 1.0, Rounded(1.0, 1e6, "1..=1e6 large ops"), Search::Fixed;
        /// C3 scoring: exponent of the queue-size term.
        b: f64 = 3.0, Real(0.0, 10.0, "[0, 10]"), Search::Fixed;
        /// C3 scoring: EWMA weight of a new sample.
        alpha: f64 = 0.9, Real(1e-6, 1.0, "(0, 1]"), Search::Fixed;
        /// C3 scoring: concurrency compensation w; 0 = the number of clients.
        concurrency: f64 = 0.0, Real(0.0, 1e6, "[0, 1e6] (0 = number of clients)"), Search::Fixed;
    }
}

impl HeronConfig {
    fn c3(&self) -> C3Config {
        C3Config {
            b: self.b,
            alpha: self.alpha,
            concurrency: self.concurrency,
            rate_control: 0.0,
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone)]
pub struct Heron {
    c3: C3,
    pending: Pending,
    capacity: u32,
    d: u64,
    reported: Vec<u32>,
    /// Generation time (at the server) of the last report per server.
    report_gen: Vec<u64>,
    /// Large opsets sent per server not yet covered by a report: (send time, large ops).
    sends: Vec<VecDeque<(u64, u32)>>,
    /// Per server: the sum of the large ops in `sends` (kept up to date instead of summed on every view).
    sends_large: Vec<u32>,
    /// Servers that turned from busy to available since the last retry of the held opsets (views only go down
    /// in `apply`, so a held opset none of whose replicas turned is still refused).
    freed: Vec<u32>,
}

impl Heron {
    pub fn new(cfg: &HeronConfig, clients: usize, servers: usize, slots: u32, mean_service_ns: f64, d: u64) -> Self {
        Heron {
            c3: C3::new(&cfg.c3(), clients, servers, slots, mean_service_ns),
            pending: Pending::default(),
            capacity: cfg.busy_capacity as u32,
            d,
            reported: vec![0; servers],
            report_gen: vec![0; servers],
            sends: vec![VecDeque::new(); servers],
            sends_large: vec![0; servers],
            freed: Vec::new(),
        }
    }

    fn apply(&mut self, fb: &Feedback) {
        self.c3.apply(fb);
        let s = fb.server as usize;
        let gen = fb.at - self.d;
        if gen >= self.report_gen[s] {
            let was_busy = !self.available(fb.server);
            self.report_gen[s] = gen;
            self.reported[s] = fb.large_resident;
            let covered = gen.saturating_sub(self.d);
            while let Some(&(t, n)) = self.sends[s].front() {
                if t > covered {
                    break;
                }
                self.sends[s].pop_front();
                self.sends_large[s] -= n;
            }
            if was_busy && self.available(fb.server) {
                self.freed.push(fb.server);
            }
        }
    }

    /// Large ops the coordinators believe `server` holds.
    #[inline]
    pub fn view(&self, server: u32) -> u32 {
        let s = server as usize;
        self.reported[s] + self.sends_large[s]
    }

    #[inline]
    fn available(&self, server: u32) -> bool {
        self.view(server) < self.capacity
    }
}

impl ReplicaSelector for Heron {
    fn choose(&mut self, ctx: &SelectCtx<'_>) -> Option<u32> {
        while let Some(fb) = self.pending.pop_ready(ctx.now) {
            self.apply(&fb);
        }
        // A large opset with every replica busy stays blocked: decided before ranking (held opsets are retried
        // at every response, and ranking has no side effect).
        if ctx.large_ops > 0 && !ctx.replicas.iter().any(|&s| self.available(s)) {
            return None;
        }
        let (reported, sends_large, capacity) = (&self.reported, &self.sends_large, self.capacity);
        let available = |s: u32| reported[s as usize] + sends_large[s as usize] < capacity;
        let order = self.c3.rank(ctx);
        let first_free = order.iter().map(|&(_, i)| ctx.replicas[i as usize]).find(|&s| available(s));
        let best = ctx.replicas[order[0].1 as usize];
        let s = if ctx.large_ops > 0 {
            let s = first_free?;
            self.sends[s as usize].push_back((ctx.now, ctx.large_ops));
            self.sends_large[s as usize] += ctx.large_ops;
            s
        } else {
            first_free.unwrap_or(best)
        };
        self.c3.sent(ctx.client, s, ctx.size, ctx.now);
        Some(s)
    }
    fn wants_feedback(&self) -> bool {
        true
    }
    fn on_op_response(&mut self, fb: &Feedback) {
        self.pending.push(*fb);
        self.c3.prefetch_cells(fb.client, &[fb.server]); // updated when it reaches the client
    }
    #[inline]
    fn prefetch_choice(&self, _now: u64, client: u32, _group: u32, replicas: &[u32]) {
        self.c3.prefetch_cells(client, replicas);
    }
    fn wakeup(&self, _now: u64) -> Option<u64> {
        self.pending.next_at()
    }
    fn held_retry(&mut self, now: u64, freed: &mut Vec<u32>) -> HeldRetry {
        while let Some(fb) = self.pending.pop_ready(now) {
            self.apply(&fb);
        }
        // Only large opsets are held, each refused because all its replicas were busy; placing one only makes
        // servers busier.
        if self.freed.is_empty() {
            return HeldRetry::Skip;
        }
        freed.append(&mut self.freed);
        HeldRetry::Freed
    }
    fn may_place_in(&self, replicas: &[u32]) -> bool {
        // Held opsets are large: refused (before any state change) while every replica is busy, and placing
        // one never frees a server.
        replicas.iter().any(|&s| self.available(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx<'a>(now: u64, replicas: &'a [u32], outstanding: &'a [u32], large_ops: u32) -> SelectCtx<'a> {
        SelectCtx {
            now,
            client: 0,
            group: 0,
            replicas,
            outstanding,
            size: 1,
            large_ops,
        }
    }

    #[test]
    fn held_retry_is_skipped_until_a_replica_turns_available() {
        // Busy rule with capacity 1, RF 2 (servers 0, 1), one client, network delay 10 ns.
        let mut h = Heron::new(&HeronConfig::default(), 1, 2, 1, 100.0, 10);
        let (reps, out) = ([0u32, 1], [0u32, 0]);
        assert_eq!(h.choose(&ctx(0, &reps, &out, 1)), Some(0)); // equal scores: replica order
        assert_eq!(h.choose(&ctx(0, &reps, &out, 1)), Some(1)); // server 0 holds one large op: busy
        assert_eq!(h.choose(&ctx(5, &reps, &out, 1)), None); // both busy: held
        assert_eq!((h.view(0), h.view(1)), (1, 1));
        let mut freed = Vec::new();
        let mut retry = |h: &mut Heron, now: u64| {
            freed.clear();
            (h.held_retry(now, &mut freed), freed.clone())
        };
        assert_eq!(retry(&mut h, 5), (HeldRetry::Skip, vec![]));
        // Server 0 reports at 30 (reaches the client at 40): no large op resident; it covers the send at 0.
        h.on_op_response(&Feedback {
            client: 0,
            server: 0,
            at: 40,
            queue: 0,
            service_ns: 100,
            response_ns: 40,
            since_start_ns: 40,
            large_resident: 0,
            large_est: true,
        });
        assert_eq!(retry(&mut h, 39), (HeldRetry::Skip, vec![])); // still in flight
        assert_eq!(retry(&mut h, 40), (HeldRetry::Freed, vec![0])); // server 0 turned available
        assert_eq!(h.view(0), 0);
        assert_eq!(retry(&mut h, 41), (HeldRetry::Skip, vec![])); // one turn, one retry
        // A small opset never turns a server busy; a large one does, and is refused again after.
        assert_eq!(h.choose(&ctx(41, &reps, &out, 0)), Some(0));
        assert_eq!(h.choose(&ctx(41, &reps, &out, 1)), Some(0));
        assert_eq!(h.choose(&ctx(42, &reps, &out, 1)), None);
        assert_eq!(retry(&mut h, 42), (HeldRetry::Skip, vec![]));
    }
}
