//! `dynamic-snitch`: Cassandra's `DynamicEndpointSnitch` as it is (sources in docs/stock-cassandra.md), one per
//! coordinator (= client).
//!
//! - **Samples**: every response from a replica adds its round trip, truncated to whole milliseconds
//!   (`receiveTiming` keeps `unit.toMillis(latency)`), to that replica's `ExponentiallyDecayingReservoir(100,
//!   0.75)`: forward-decay priority sampling — weight `exp(0.75 · (t − t0))` with t and the reservoir's creation
//!   time t0 in whole seconds, priority = weight / u (u uniform), the 100 highest priorities kept. A read that is
//!   not answered within the read timeout counts as a sample of the timeout (an expired callback's latency; the
//!   late answer itself is dropped), entered when the answer arrives (Cassandra: at the expiry).
//! - **Scores**, recomputed every `update_ms` (first at `update_ms`): per replica with samples, the weighted
//!   median of its reservoir (Dropwizard's `WeightedSnapshot`) over the largest median (at least 1), plus the
//!   severity, which only an operator sets over JMX: 0. A replica without samples has no score: 0.
//! - **Reset** every `reset_ms`: every reservoir is dropped (scores stay until the next update, which then
//!   scores only replicas sampled since).
//! - **Choice** (`sortedByProximityWithBadness`): the subsnitch order is the ring order (primary first, as
//!   `SimpleSnitch`); if at some position the subsnitch-ordered score exceeds the score-sorted one by the factor
//!   (1 + badness), the replicas are sorted by score (ties keep the subsnitch order); badness 0 always sorts. The
//!   first replica is read.
//! - **Local coordinator** (`local=1`): coordinator c is a node, server `c mod servers` (on a `--vnodes 1` ring
//!   server s holds the balanced token of rank s). When it is a replica it reads itself inline: no message, so
//!   no sample (`receiveTiming` sees only MessagingService responses) — the engine feeds no selector a read a
//!   coordinator serves itself, so it never has a score (0.0). It takes part in the choice like any replica
//!   (`SimpleSnitch` keeps the ring order: no preference for itself): once a replica ahead of it in ring order
//!   scores above 0 (a truncated median ≥ 1 ms), the replicas are sorted by score and it comes first, after
//!   only the replicas ahead of it that score 0 too. `local=0`: coordinators are no servers, every response is
//!   sampled. (The same holds for the `per-partition` shape's coordinators, which are always nodes.)
//!
//! Feedback reaches the coordinator one network latency after the read ends and is applied then; an update at
//! time T sees the samples that arrived before T.
use super::feedback::{Feedback, Pending, SelectCtx};
use super::ReplicaSelector;
use crate::params::Search;
use crate::rng::Rng;

crate::params! {
    /// Cassandra 5.0's dynamic snitch settings (defaults: Cassandra's).
    pub struct DesConfig for "replica selector 'dynamic-snitch'" {
        /// dynamic_snitch_update_interval, ms.
        update_ms: f64 = 100.0, Real(1e-3, 1e9, "(0, 1e9] ms"), Search::Fixed;
        /// dynamic_snitch_reset_interval, ms.
        reset_ms: f64 = 600_000.0, Real(1e-3, 1e12, "(0, 1e12] ms"), Search::Fixed;
        /// dynamic_snitch_badness_threshold.
        badness: f64 = 1.0, Real(0.0, 100.0, "[0, 100]"), Search::Fixed;
        /// read_request_timeout, ms: a read unanswered this long is sampled as this long.
        timeout_ms: f64 = 5000.0, Real(1e-3, 1e9, "(0, 1e9] ms"), Search::Fixed;
        /// 1: coordinator c is server c mod servers and reads itself inline, unsampled (score 0; the engine
        /// applies it); 0: no coordinator is a server.
        local: f64 = 0.0, Rounded(0.0, 1.0, "0 or 1"), Search::Fixed;
    }
}

/// `DynamicEndpointSnitch.WINDOW_SIZE` and `ALPHA`.
pub const RESERVOIR: usize = 100;
pub const ALPHA: f64 = 0.75;
/// Random stream of the reservoirs' priorities.
const STREAM_RESERVOIR: u64 = 8;
const NS_PER_S: u64 = 1_000_000_000;

/// One replica's reservoir at one coordinator: (priority, latency ms, weight).
#[derive(Debug, Clone, Default)]
struct Reservoir {
    /// Creation time, whole seconds (the landmark of the weights).
    start_s: u64,
    samples: Vec<(f64, u64, f64)>,
}

impl Reservoir {
    fn update(&mut self, ms: u64, t_s: u64, rng: &mut Rng) {
        let weight = (ALPHA * (t_s - self.start_s) as f64).exp();
        let priority = weight / rng.uniform();
        if self.samples.len() < RESERVOIR {
            self.samples.push((priority, ms, weight));
            return;
        }
        let (i, lowest) = self
            .samples
            .iter()
            .enumerate()
            .fold((0, f64::INFINITY), |b, (i, s)| if s.0 < b.1 { (i, s.0) } else { b });
        if lowest < priority {
            self.samples[i] = (priority, ms, weight);
        }
    }

    /// `WeightedSnapshot.getMedian()`: values sorted, normalised weights, the value at the last cumulative
    /// weight ≤ 0.5 (an exact 0.5 takes its own position).
    fn median(&self, scratch: &mut Vec<(u64, f64, f64)>) -> f64 {
        scratch.clear();
        // Dropwizard copies the samples in priority order, then sorts them by value (a stable sort).
        scratch.extend(self.samples.iter().map(|s| (s.1, s.2, s.0)));
        scratch.sort_by(|a, b| a.2.total_cmp(&b.2));
        scratch.sort_by_key(|s| s.0);
        let sum: f64 = scratch.iter().map(|s| s.1).sum();
        let mut cum = 0.0;
        let mut pos: isize = -1;
        for (i, s) in scratch.iter().enumerate() {
            // quantiles[i] = Σ_{j<i} w_j / sum
            if cum == 0.5 {
                pos = i as isize;
                break;
            }
            if cum < 0.5 {
                pos = i as isize;
            } else {
                break;
            }
            cum += s.1 / sum;
        }
        if pos < 1 {
            scratch[0].0 as f64
        } else {
            scratch[(pos as usize).min(scratch.len() - 1)].0 as f64
        }
    }
}

#[derive(Debug, Clone)]
pub struct EndpointSnitch {
    servers: usize,
    update_ns: u64,
    reset_ns: u64,
    badness: f64,
    timeout_ns: u64,
    rng: Rng,
    /// Reservoir of (client, server) at `client * servers + server` (None: dropped by the reset / none yet).
    cells: Vec<Option<Reservoir>>,
    /// Scores of (client, server) (NaN: no score).
    scores: Vec<f64>,
    /// Per client: the next update and the next reset, and whether samples changed since the last update.
    next_update: Vec<u64>,
    next_reset: Vec<u64>,
    dirty: Vec<bool>,
    pending: Pending,
    scratch: Vec<(u64, f64, f64)>,
    order: Vec<(f64, usize)>,
    sorted: Vec<f64>,
}

impl EndpointSnitch {
    pub fn new(cfg: &DesConfig, clients: usize, servers: usize, seed: u64) -> Self {
        let update_ns = ((cfg.update_ms * 1e6).round() as u64).max(1);
        let reset_ns = ((cfg.reset_ms * 1e6).round() as u64).max(1);
        EndpointSnitch {
            servers,
            update_ns,
            reset_ns,
            badness: cfg.badness,
            timeout_ns: (cfg.timeout_ms * 1e6).round() as u64,
            rng: Rng::new(seed, STREAM_RESERVOIR),
            cells: vec![None; clients * servers],
            scores: vec![f64::NAN; clients * servers],
            next_update: vec![update_ns; clients],
            next_reset: vec![reset_ns; clients],
            dirty: vec![false; clients],
            pending: Pending::default(),
            scratch: Vec::new(),
            order: Vec::new(),
            sorted: Vec::new(),
        }
    }

    /// Client `c`'s score of `server` (0 when it has none), for tests and reports.
    pub fn score(&self, c: u32, server: u32) -> f64 {
        let s = self.scores[c as usize * self.servers + server as usize];
        if s.is_nan() {
            0.0
        } else {
            s
        }
    }

    /// Applies client `c`'s updates and resets due at or before `t`, in time order.
    fn catch_up(&mut self, c: usize, t: u64) {
        loop {
            let (u, r) = (self.next_update[c], self.next_reset[c]);
            if u.min(r) > t {
                return;
            }
            if r < u {
                for cell in &mut self.cells[c * self.servers..(c + 1) * self.servers] {
                    *cell = None;
                }
                self.dirty[c] = true;
                self.next_reset[c] += self.reset_ns;
            } else {
                if self.dirty[c] {
                    self.update_scores(c);
                    self.dirty[c] = false;
                }
                // Nothing changes until the next sample or reset: skip the idle updates.
                let next = self.next_reset[c].min(t);
                let skip = if next > u { (next - u) / self.update_ns } else { 0 };
                self.next_update[c] = u + self.update_ns * skip.max(1);
            }
        }
    }

    /// `updateScores` for client `c`.
    fn update_scores(&mut self, c: usize) {
        let base = c * self.servers;
        let mut max = 1.0f64;
        for s in 0..self.servers {
            self.scores[base + s] = match &self.cells[base + s] {
                Some(r) if !r.samples.is_empty() => {
                    let m = r.median(&mut self.scratch);
                    max = max.max(m);
                    m
                }
                _ => f64::NAN,
            };
        }
        for s in 0..self.servers {
            self.scores[base + s] /= max;
        }
    }

    fn sample(&mut self, fb: &Feedback) {
        let c = fb.client as usize;
        self.catch_up(c, fb.at);
        let ns = fb.since_start_ns.min(self.timeout_ns);
        let t_s = fb.at / NS_PER_S;
        let cell = self.cells[c * self.servers + fb.server as usize].get_or_insert_with(|| Reservoir {
            start_s: t_s,
            samples: Vec::with_capacity(RESERVOIR),
        });
        cell.update(ns / 1_000_000, t_s, &mut self.rng);
        self.dirty[c] = true;
    }

    fn apply_pending(&mut self, now: u64) {
        while let Some(fb) = self.pending.pop_ready(now) {
            self.sample(&fb);
        }
    }

    #[inline]
    fn score_of(&self, c: usize, s: u32) -> f64 {
        let x = self.scores[c * self.servers + s as usize];
        if x.is_nan() {
            0.0
        } else {
            x
        }
    }
}

impl ReplicaSelector for EndpointSnitch {
    fn choose(&mut self, ctx: &SelectCtx<'_>) -> Option<u32> {
        self.apply_pending(ctx.now);
        let c = ctx.client as usize;
        self.catch_up(c, ctx.now);
        let reps = ctx.replicas;
        if reps.len() < 2 {
            return reps.first().copied();
        }
        self.order.clear();
        for (i, &s) in reps.iter().enumerate() {
            let x = self.score_of(c, s);
            self.order.push((x, i));
        }
        self.sorted.clear();
        self.sorted.extend(self.order.iter().map(|o| o.0));
        self.sorted.sort_by(f64::total_cmp);
        let worse = self.badness == 0.0
            || self
                .order
                .iter()
                .zip(&self.sorted)
                .any(|(o, &best)| o.0 > best * (1.0 + self.badness));
        if !worse {
            return Some(reps[0]);
        }
        // Sorted by score, ties in subsnitch order (a stable sort).
        self.order.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some(reps[self.order[0].1])
    }

    fn wants_feedback(&self) -> bool {
        true
    }

    fn on_op_response(&mut self, fb: &Feedback) {
        // (A local coordinator's read of itself sends no message: the engine does not report it.)
        self.pending.push(*fb);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_median_as_dropwizard() {
        let mut r = Reservoir::default();
        let mut scratch = Vec::new();
        // Equal weights: values 1, 2, 3, 4 → quantiles 0, .25, .5, .75: 0.5 is found at position 2 → 3.
        r.samples = vec![(1.0, 4, 1.0), (2.0, 1, 1.0), (3.0, 3, 1.0), (4.0, 2, 1.0)];
        assert_eq!(r.median(&mut scratch), 3.0);
        // Three values: quantiles 0, 1/3, 2/3: the last ≤ 0.5 is position 1 → the middle value.
        r.samples = vec![(1.0, 1, 1.0), (2.0, 2, 1.0), (3.0, 3, 1.0)];
        assert_eq!(r.median(&mut scratch), 2.0);
        // A heavier (newer) sample: quantiles 0, 1/12, 2/12 → position 2.
        r.samples = vec![(1.0, 1, 1.0), (2.0, 2, 1.0), (3.0, 9, 10.0)];
        assert_eq!(r.median(&mut scratch), 9.0);
    }
}
