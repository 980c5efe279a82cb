//! `least-outstanding`: the replica with the fewest outstanding ops. By default the count is the client's own
//! (ops it sent whose response has not reached it yet: what a real coordinator knows); `global = 1` uses every
//! client's ops in flight/queued/in service (an idealized, instantly shared count). Ties: a random replica
//! among the tied ones (own stream of the seed), so that equal counts do not all pile on the primary.
use super::feedback::{Feedback, Pending, SelectCtx};
use super::random::STREAM_REPLICA;
use super::ReplicaSelector;
use crate::params::Search;
use crate::rng::Rng;

crate::params! {
    pub struct LeastOutstandingConfig for "replica selector 'least-outstanding'" {
        /// 1 = every client's outstanding ops (idealized), 0 = the client's own (default).
        global: f64 = 0.0, Rounded(0.0, 1.0, "0 or 1"), Search::Fixed;
    }
}

#[derive(Debug, Clone)]
pub struct LeastOutstanding {
    global: bool,
    servers: usize,
    /// clients × servers, used when not global.
    mine: Vec<u32>,
    pending: Pending,
    rng: Rng,
}

impl LeastOutstanding {
    pub fn new(global: bool, clients: usize, servers: usize, seed: u64) -> Self {
        LeastOutstanding {
            global,
            servers,
            mine: if global { Vec::new() } else { vec![0; clients * servers] },
            pending: Pending::default(),
            rng: Rng::new(seed, STREAM_REPLICA),
        }
    }
}

/// Index of the minimum of `score` over `n` candidates, ties broken uniformly at random.
#[inline]
pub(crate) fn argmin_random_ties<F: Fn(usize) -> f64>(n: usize, score: F, rng: &mut Rng) -> usize {
    let mut best = 0;
    let mut best_v = score(0);
    let mut ties = 1u64;
    for i in 1..n {
        let v = score(i);
        if v < best_v {
            best = i;
            best_v = v;
            ties = 1;
        } else if v == best_v {
            ties += 1;
            // reservoir choice among the tied candidates
            if rng.below(ties) == 0 {
                best = i;
            }
        }
    }
    best
}

impl ReplicaSelector for LeastOutstanding {
    fn choose(&mut self, ctx: &SelectCtx<'_>) -> Option<u32> {
        let i = if self.global {
            argmin_random_ties(ctx.replicas.len(), |i| ctx.outstanding[ctx.replicas[i] as usize] as f64, &mut self.rng)
        } else {
            while let Some(fb) = self.pending.pop_ready(ctx.now) {
                let k = fb.client as usize * self.servers + fb.server as usize;
                self.mine[k] = self.mine[k].saturating_sub(1);
            }
            let base = ctx.client as usize * self.servers;
            let mine = &self.mine;
            argmin_random_ties(ctx.replicas.len(), |i| mine[base + ctx.replicas[i] as usize] as f64, &mut self.rng)
        };
        let s = ctx.replicas[i];
        if !self.global {
            self.mine[ctx.client as usize * self.servers + s as usize] += ctx.size;
        }
        Some(s)
    }
    fn wants_feedback(&self) -> bool {
        !self.global
    }
    fn on_op_response(&mut self, fb: &Feedback) {
        self.pending.push(*fb);
    }
}
