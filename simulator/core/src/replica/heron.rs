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
use super::ReplicaSelector;
use crate::error::{check_range, SimError};
use crate::policy::{unknown, Params};

#[derive(Debug, Clone, PartialEq)]
pub struct HeronConfig {
    /// THR_L: values above it are large; 0 = derived from the workload's value sizes (the caller fills it in).
    pub thr_l_bytes: f64,
    /// A replica is busy while it holds at least this many large ops.
    pub busy_capacity: f64,
    /// C3 scoring parameters.
    pub b: f64,
    pub alpha: f64,
    pub concurrency: f64,
}

impl Default for HeronConfig {
    fn default() -> Self {
        HeronConfig {
            thr_l_bytes: 0.0,
            busy_capacity: 1.0,
            b: 3.0,
            alpha: 0.9,
            concurrency: 0.0,
        }
    }
}

pub(crate) const HERON_PARAMS: [&str; 5] = ["thr_l_bytes", "busy_capacity", "b", "alpha", "concurrency"];

impl Params for HeronConfig {
    fn set(&mut self, name: &str, v: f64) -> Result<(), SimError> {
        match name {
            "thr_l_bytes" => {
                check_range(name, v, 0.0, 1e15, "[0, 1e15] bytes (0 = derived)")?;
                self.thr_l_bytes = v
            }
            "busy_capacity" => {
                check_range(name, v, 1.0, 1e6, "1..=1e6 large ops")?;
                self.busy_capacity = v.round()
            }
            "b" | "alpha" | "concurrency" => {
                let mut c = self.c3();
                c.set(name, v)?;
                (self.b, self.alpha, self.concurrency) = (c.b, c.alpha, c.concurrency);
            }
            other => return Err(unknown("heron", other, &HERON_PARAMS)),
        }
        Ok(())
    }
    fn params(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("thr_l_bytes", self.thr_l_bytes),
            ("busy_capacity", self.busy_capacity),
            ("b", self.b),
            ("alpha", self.alpha),
            ("concurrency", self.concurrency),
        ]
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
    order: Vec<usize>,
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
            order: Vec::new(),
        }
    }

    fn apply(&mut self, fb: &Feedback) {
        self.c3.apply(fb);
        let s = fb.server as usize;
        let gen = fb.at - self.d;
        if gen >= self.report_gen[s] {
            self.report_gen[s] = gen;
            self.reported[s] = fb.large_resident;
            let covered = gen.saturating_sub(self.d);
            while self.sends[s].front().is_some_and(|&(t, _)| t <= covered) {
                self.sends[s].pop_front();
            }
        }
    }

    /// Large ops the coordinators believe `server` holds.
    pub fn view(&self, server: u32) -> u32 {
        let s = server as usize;
        self.reported[s] + self.sends[s].iter().map(|&(_, n)| n).sum::<u32>()
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
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        order.extend(self.c3.rank(ctx).iter().map(|&(_, i)| i));
        let first_free = order.iter().map(|&i| ctx.replicas[i]).find(|&s| self.available(s));
        let best = ctx.replicas[order[0]];
        self.order = order;
        let s = if ctx.large_ops > 0 {
            let s = first_free?;
            self.sends[s as usize].push_back((ctx.now, ctx.large_ops));
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
    }
    fn wakeup(&self, _now: u64) -> Option<u64> {
        self.pending.next_at()
    }
}
