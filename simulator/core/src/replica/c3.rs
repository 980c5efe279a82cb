//! `c3`: C3's replica ranking and per-server rate control (Suresh et al., NSDI'15), as each client runs it.
//!
//! Ranking: Ψ_s = R̄_s − T̄_s + q̂_s^b · T̄_s with q̂_s = 1 + os_s · w + q̄_s, where R̄_s, T̄_s and q̄_s are EWMAs
//! (weight `alpha` on the new sample) of the response time, the service time and the server's queue size
//! piggybacked on each response, os_s = the client's own outstanding ops at s and w = the concurrency
//! compensation (default: the number of clients). Lowest score first; ties → lower replica position.
//! Before any feedback T̄_s = the workload's mean service time, R̄_s = q̄_s = 0.
//!
//! Rate control (on by default): per (client, server) a send limit `srate` in ops per window δ
//! (δ = `rate_interval` × the mean service time, not absolute ms, so it behaves at any service rate). An opset
//! may be sent to s while fewer than srate ops went there in the current window; when every replica is
//! limited the opset waits in the client's backlog until the next window. On each response: when the previous
//! window's send count exceeded its receive count and the last decrease is more than `hysteresis` windows ago,
//! R0 ← srate, srate ← (1 − β) · srate; otherwise cubic growth srate ← min(srate + smax, γ (ΔT − K)³ + R0) with
//! ΔT = windows since the last decrease, K = ∛(β R0 / γ). srate starts at the server's capacity per window
//! (slots × rate_interval) and never drops below 1.
use std::collections::VecDeque;

use super::feedback::{Feedback, SelectCtx};
use super::ReplicaSelector;
use crate::prefetch::prefetch;
use crate::params::Search;

crate::params! {
    /// C3's scoring and rate-control parameters (defaults: the C3 paper's).
    pub struct C3Config for "replica selector 'c3'" {
        /// Exponent of the queue-size term (C3: 3, cubic).
        b: f64 = 3.0, Real(0.0, 10.0, "[0, 10]"), Search::Fixed;
        /// EWMA weight of a new sample.
        alpha: f64 = 0.9, Real(1e-6, 1.0, "(0, 1]"), Search::Fixed;
        /// Concurrency compensation w; 0 = the number of clients.
        concurrency: f64 = 0.0, Real(0.0, 1e6, "[0, 1e6] (0 = number of clients)"), Search::Fixed;
        /// 1 = rate control on, 0 = ranking only.
        rate_control: f64 = 1.0, Rounded(0.0, 1.0, "0 or 1"), Search::Fixed;
        /// Rate window δ in mean service times.
        rate_interval: f64 = 5.0, Real(1e-3, 1e6, "[1e-3, 1e6] mean service times"), Search::Fixed;
        /// Multiplicative decrease factor β.
        beta: f64 = 0.2, Real(0.0, 0.99, "[0, 0.99]"), Search::Fixed;
        /// Cubic growth constant γ (ops per window, time in windows).
        cubic_c: f64 = 0.032, Real(1e-9, 1e6, "(0, 1e6]"), Search::Fixed;
        /// Largest increase per update, ops per window.
        smax: f64 = 10.0, Real(0.0, 1e9, "[0, 1e9] ops per window"), Search::Fixed;
        /// No decrease within this many windows of the last one.
        hysteresis: f64 = 2.0, Real(0.0, 1e6, "[0, 1e6] windows"), Search::Fixed;
    }
}

/// What C3 uses of one op's feedback (a third smaller than [`Feedback`]: the in-flight queue is per op).
#[derive(Debug, Clone, Copy)]
struct C3Sample {
    at: u64,
    service_ns: u64,
    response_ns: u64,
    /// client × servers + server.
    cell: u32,
    queue: u32,
}

/// Per (client, server) state, 64-byte aligned: first one cache line of what choosing reads — ranking's
/// q, st, rt, os and the send limit's srate, window, sent counts — then what only feedback updates. In the
/// compiler's order `os` and the counts came after all the 8-byte fields: two or three lines per replica ranked.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Cell {
    q: f64,
    st: f64,
    rt: f64,
    os: u32,
    sent: u32,
    srate: f64,
    window: u64,
    recv: u32,
    prev_sent: u32,
    prev_recv: u32,
    r0: f64,
    /// K = ∛(β R0 / γ) of the cubic growth, recomputed only when R0 changes (a cbrt per response otherwise).
    k: f64,
    last_dec: u64,
}

impl Cell {
    #[inline]
    fn roll(&mut self, w: u64) {
        if w != self.window {
            if w == self.window + 1 {
                self.prev_sent = self.sent;
                self.prev_recv = self.recv;
            } else {
                self.prev_sent = 0;
                self.prev_recv = 0;
            }
            self.sent = 0;
            self.recv = 0;
            self.window = w;
        }
    }
}

#[derive(Debug, Clone)]
pub struct C3 {
    cfg: C3Config,
    w: f64,
    servers: usize,
    delta_ns: u64,
    cells: Vec<Cell>,
    pending: VecDeque<C3Sample>,
    order: Vec<(i64, u32)>,
}

impl C3 {
    /// `mean_service_ns`: the workload's mean op demand; `slots`: per server.
    pub fn new(cfg: &C3Config, clients: usize, servers: usize, slots: u32, mean_service_ns: f64) -> Self {
        let delta_ns = (cfg.rate_interval * mean_service_ns).round().max(1.0) as u64;
        let init_rate = (slots as f64 * cfg.rate_interval).max(1.0);
        let cell = Cell {
            q: 0.0,
            st: mean_service_ns,
            rt: 0.0,
            os: 0,
            srate: init_rate,
            r0: init_rate,
            k: (cfg.beta * init_rate / cfg.cubic_c).cbrt(),
            last_dec: 0,
            window: 0,
            sent: 0,
            recv: 0,
            prev_sent: 0,
            prev_recv: 0,
        };
        C3 {
            w: if cfg.concurrency > 0.0 { cfg.concurrency } else { clients as f64 },
            cfg: cfg.clone(),
            servers,
            delta_ns,
            cells: vec![cell; clients * servers],
            pending: VecDeque::new(),
            order: Vec::new(),
        }
    }

    /// Applies one response that has reached its client.
    pub fn apply(&mut self, fb: &Feedback) {
        self.apply_sample(&self.sample_of(fb));
    }

    #[inline]
    fn sample_of(&self, fb: &Feedback) -> C3Sample {
        C3Sample {
            at: fb.at,
            service_ns: fb.service_ns,
            response_ns: fb.response_ns,
            cell: (fb.client as usize * self.servers + fb.server as usize) as u32,
            queue: fb.queue,
        }
    }

    #[inline]
    fn apply_sample(&mut self, fb: &C3Sample) {
        let a = self.cfg.alpha;
        let (delta, rc) = (self.delta_ns, self.cfg.rate_control > 0.0);
        let (beta, gamma, smax, hyst) = (self.cfg.beta, self.cfg.cubic_c, self.cfg.smax, self.cfg.hysteresis);
        let c = &mut self.cells[fb.cell as usize];
        c.q = a * fb.queue as f64 + (1.0 - a) * c.q;
        c.st = a * fb.service_ns as f64 + (1.0 - a) * c.st;
        c.rt = a * fb.response_ns as f64 + (1.0 - a) * c.rt;
        c.os = c.os.saturating_sub(1);
        if rc {
            c.roll(fb.at / delta);
            c.recv += 1;
            let since = (fb.at.saturating_sub(c.last_dec)) as f64 / delta as f64;
            if c.prev_sent > c.prev_recv && since > hyst {
                c.r0 = c.srate;
                c.k = (beta * c.r0 / gamma).cbrt();
                c.srate = ((1.0 - beta) * c.srate).max(1.0);
                c.last_dec = fb.at;
            } else {
                let target = gamma * (since - c.k).powi(3) + c.r0;
                c.srate = target.min(c.srate + smax).max(1.0);
            }
        }
    }

    /// Score of `server` for `client` (lower is better).
    #[inline]
    pub fn score(&self, client: u32, server: u32) -> f64 {
        self.score_cell(&self.cells[client as usize * self.servers + server as usize])
    }

    #[inline]
    fn score_cell(&self, c: &Cell) -> f64 {
        let qhat = 1.0 + c.os as f64 * self.w + c.q;
        let qb = if self.cfg.b == 3.0 { qhat * qhat * qhat } else { qhat.powf(self.cfg.b) };
        c.rt - c.st + qb * c.st
    }

    /// Replica positions of `ctx.replicas`, best score first (stable: ties keep the replica order), each with
    /// the total-order key of its score ([`total_key`]).
    pub fn rank(&mut self, ctx: &SelectCtx<'_>) -> &[(i64, u32)] {
        self.order.clear();
        let base = ctx.client as usize * self.servers;
        for (i, &s) in ctx.replicas.iter().enumerate() {
            let v = self.score_cell(&self.cells[base + s as usize]);
            self.order.push((total_key(v), i as u32));
        }
        sort_small(&mut self.order, |a, b| a < b);
        &self.order
    }

    /// [`rank`](Self::rank) for a group of three replicas (the default RF), without the vector: the same
    /// order (ties keep the replica order: the (key, position) pairs are distinct and sorted as pairs).
    #[inline]
    fn rank3(&self, base: usize, [a, b, c]: [u32; 3]) -> [(i64, u32); 3] {
        let key = |s: u32| total_key(self.score_cell(&self.cells[base + s as usize]));
        let mut o = [(key(a), 0u32), (key(b), 1), (key(c), 2)];
        if o[1] < o[0] {
            o.swap(0, 1);
        }
        if o[2] < o[1] {
            o.swap(1, 2);
            if o[1] < o[0] {
                o.swap(0, 1);
            }
        }
        o
    }

    /// Books an opset of `size` ops sent by `client` to `server`.
    pub fn sent(&mut self, client: u32, server: u32, size: u32, now: u64) {
        let delta = self.delta_ns;
        let c = &mut self.cells[client as usize * self.servers + server as usize];
        c.os += size;
        c.roll(now / delta);
        c.sent += size;
    }

    /// Drains the feedback that has reached the clients by `now`.
    pub fn drain(&mut self, now: u64) {
        while let Some(fb) = self.pending.front() {
            if fb.at > now {
                break;
            }
            let fb = *fb;
            self.pending.pop_front();
            self.apply_sample(&fb);
        }
    }

    pub fn queue_feedback(&mut self, fb: &Feedback) {
        let smp = self.sample_of(fb);
        prefetch(self.cells.as_ptr().wrapping_add(smp.cell as usize)); // updated when it reaches the client
        self.pending.push_back(smp);
    }

    /// Prefetches the cells `rank` will read for `client` over `replicas`.
    #[inline]
    pub fn prefetch_cells(&self, client: u32, replicas: &[u32]) {
        let base = client as usize * self.servers;
        for &s in replicas {
            prefetch(self.cells.as_ptr().wrapping_add(base + s as usize));
        }
    }

    pub fn next_feedback_at(&self) -> Option<u64> {
        self.pending.front().map(|f| f.at)
    }
}

/// Key with the order of `f64::total_cmp` (the same bit transform): sorting keys sorts the scores.
#[inline(always)]
pub(crate) fn total_key(v: f64) -> i64 {
    let b = v.to_bits() as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

/// Insertion sort for the handful of replicas of a group (stable; `less` must be a strict order).
#[inline]
pub(crate) fn sort_small<T: Copy>(v: &mut [T], less: impl Fn(&T, &T) -> bool) {
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && less(&x, &v[j - 1]) {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

impl ReplicaSelector for C3 {
    fn choose(&mut self, ctx: &SelectCtx<'_>) -> Option<u32> {
        self.drain(ctx.now);
        let base = ctx.client as usize * self.servers;
        let three;
        let order: &[(i64, u32)] = if let &[a, b, c] = ctx.replicas {
            three = self.rank3(base, [a, b, c]);
            &three
        } else {
            self.rank(ctx);
            &self.order
        };
        if self.cfg.rate_control <= 0.0 {
            let s = ctx.replicas[order[0].1 as usize];
            self.sent(ctx.client, s, ctx.size, ctx.now);
            return Some(s);
        }
        // The first replica in score order whose send limit allows it (as `sent`, with the window rolled once).
        let w = ctx.now / self.delta_ns;
        for &(_, i) in order {
            let s = ctx.replicas[i as usize];
            let c = &mut self.cells[base + s as usize];
            c.roll(w);
            if (c.sent as f64) < c.srate {
                c.os += ctx.size;
                c.sent += ctx.size;
                return Some(s);
            }
        }
        None
    }
    fn wants_feedback(&self) -> bool {
        true
    }
    fn on_op_response(&mut self, fb: &Feedback) {
        self.queue_feedback(fb);
    }
    #[inline]
    fn prefetch_choice(&self, _now: u64, client: u32, _group: u32, replicas: &[u32]) {
        self.prefetch_cells(client, replicas);
    }
    fn wakeup(&self, now: u64) -> Option<u64> {
        (self.cfg.rate_control > 0.0).then(|| (now / self.delta_ns + 1) * self.delta_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn small_sort_of_score_keys_matches_total_cmp_then_position() {
        let specials = [0.0, -0.0, 1.5, -1.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -f64::NAN, 1e-300];
        let mut rng = Rng::new(3, 0);
        for _ in 0..2000 {
            let n = 1 + rng.below(6) as usize;
            let v: Vec<f64> = (0..n).map(|_| specials[rng.below(specials.len() as u64) as usize]).collect();
            let mut want: Vec<(f64, usize)> = v.iter().copied().zip(0..).collect();
            want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let mut got: Vec<(i64, u32)> = v.iter().zip(0..).map(|(&x, i)| (total_key(x), i)).collect();
            sort_small(&mut got, |a, b| a < b);
            let got_pos: Vec<usize> = got.iter().map(|&(_, i)| i as usize).collect();
            let want_pos: Vec<usize> = want.iter().map(|&(_, i)| i).collect();
            assert_eq!(got_pos, want_pos, "{v:?}");
        }
        assert!(total_key(-0.0) < total_key(0.0));
        assert!(total_key(f64::NEG_INFINITY) < total_key(-1e300) && total_key(1e300) < total_key(f64::INFINITY));
    }

    #[test]
    fn rank_of_three_replicas_matches_the_general_rank() {
        // Cell states drawn from a few values so that scores tie often (ties keep the replica order).
        let mut c3 = C3::new(&C3Config::default(), 2, 5, 8, 1000.0);
        let mut rng = Rng::new(5, 1);
        for round in 0..3000 {
            for cell in c3.cells.iter_mut() {
                cell.os = rng.below(3) as u32;
                cell.q = [0.0, 1.0, 2.5][rng.below(3) as usize];
                cell.rt = [0.0, 500.0, 1e300, f64::INFINITY][rng.below(4) as usize];
                cell.st = [1000.0, 0.0, 2000.0][rng.below(3) as usize];
            }
            let client = rng.below(2) as u32;
            let first = rng.below(5) as u32;
            let replicas = [first, (first + 1 + rng.below(4) as u32) % 5, (first + 2) % 5];
            let ctx = SelectCtx {
                now: 0,
                client,
                group: 0,
                replicas: &replicas,
                outstanding: &[],
                size: 1,
                large_ops: 0,
            };
            let three = c3.rank3(client as usize * 5, replicas);
            assert_eq!(&three[..], c3.rank(&ctx), "round {round}");
        }
    }
}
