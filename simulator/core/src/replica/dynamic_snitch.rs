//! `ds`: Cassandra's dynamic snitching, one snitch per client (coordinator).
//!
//! Every op response adds its client-observed latency to the (client, server) sample window (the last
//! `window` samples, default 100). Scores are snapshots taken at each `update_ms` tick (default 100 ms): the
//! median of the samples received by the tick; samples received before the last `reset_s` boundary (default
//! 600 s) are dropped, as Cassandra resets all scores (Héron §II-A). A server without samples scores 0.
//! Choice (Cassandra's `sortByProximity` with `dynamic_snitch_badness_threshold`): the static order is the
//! replica order (primary first); if for some position i score(static[i]) > (1 + badness) · score(sorted[i])
//! the replicas are used in score order (lowest first, ties keep the static order), otherwise in static order.
//! The first replica of that order is chosen.
use super::feedback::{Feedback, Pending, SelectCtx};
use super::ReplicaSelector;
use crate::error::{check_range, SimError};
use crate::policy::{unknown, Params};

#[derive(Debug, Clone, PartialEq)]
pub struct DsConfig {
    pub update_ms: f64,
    pub reset_s: f64,
    pub badness: f64,
    pub window: f64,
}

impl Default for DsConfig {
    fn default() -> Self {
        DsConfig {
            update_ms: 100.0,
            reset_s: 600.0,
            badness: 0.1,
            window: 100.0,
        }
    }
}

pub(crate) const DS_PARAMS: [&str; 4] = ["update_ms", "reset_s", "badness", "window"];

impl Params for DsConfig {
    fn set(&mut self, name: &str, v: f64) -> Result<(), SimError> {
        match name {
            "update_ms" => {
                check_range(name, v, 1e-6, 1e9, "(0, 1e9] ms")?;
                self.update_ms = v
            }
            "reset_s" => {
                check_range(name, v, 1e-6, 1e9, "(0, 1e9] s")?;
                self.reset_s = v
            }
            "badness" => {
                check_range(name, v, 0.0, 100.0, "[0, 100]")?;
                self.badness = v
            }
            "window" => {
                check_range(name, v, 1.0, 100_000.0, "1..=100000 samples")?;
                self.window = v.round()
            }
            other => return Err(unknown("ds", other, &DS_PARAMS)),
        }
        Ok(())
    }
    fn params(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("update_ms", self.update_ms),
            ("reset_s", self.reset_s),
            ("badness", self.badness),
            ("window", self.window),
        ]
    }
}

#[derive(Debug, Clone, Default)]
struct Cell {
    /// Ring buffer of (arrival ns, latency ns).
    samples: Vec<(u64, u64)>,
    next: usize,
    tick: u64,
    score: f64,
}

#[derive(Debug, Clone)]
pub struct DynamicSnitch {
    update_ns: u64,
    reset_ns: u64,
    badness: f64,
    window: usize,
    servers: usize,
    cells: Vec<Cell>,
    pending: Pending,
    scratch: Vec<u64>,
    scores: Vec<(f64, usize)>,
    sorted: Vec<(f64, usize)>,
}

impl DynamicSnitch {
    pub fn new(cfg: &DsConfig, clients: usize, servers: usize) -> Self {
        DynamicSnitch {
            update_ns: (cfg.update_ms * 1e6).round().max(1.0) as u64,
            reset_ns: (cfg.reset_s * 1e9).round().max(1.0) as u64,
            badness: cfg.badness,
            window: cfg.window as usize,
            servers,
            cells: vec![
                Cell {
                    tick: u64::MAX,
                    ..Default::default()
                };
                clients * servers
            ],
            pending: Pending::default(),
            scratch: Vec::new(),
            scores: Vec::new(),
            sorted: Vec::new(),
        }
    }

    fn add_sample(&mut self, fb: &Feedback) {
        let w = self.window;
        let c = &mut self.cells[fb.client as usize * self.servers + fb.server as usize];
        if c.samples.len() < w {
            c.samples.push((fb.at, fb.response_ns));
        } else {
            c.samples[c.next] = (fb.at, fb.response_ns);
            c.next = (c.next + 1) % w;
        }
    }

    /// The score snapshot of (client, server) for the tick containing `now`.
    fn score(&mut self, client: u32, server: u32, now: u64) -> f64 {
        let tick = now / self.update_ns;
        let at = tick * self.update_ns;
        let since = at / self.reset_ns * self.reset_ns;
        let c = &mut self.cells[client as usize * self.servers + server as usize];
        if c.tick != tick {
            c.tick = tick;
            self.scratch.clear();
            self.scratch
                .extend(c.samples.iter().filter(|s| s.0 <= at && s.0 >= since).map(|s| s.1));
            c.score = if self.scratch.is_empty() {
                0.0
            } else {
                let n = self.scratch.len();
                let (_, &mut hi, _) = self.scratch.select_nth_unstable(n / 2);
                if n % 2 == 1 {
                    hi as f64
                } else {
                    let lo = *self.scratch[..n / 2].iter().max().unwrap_or(&hi);
                    (lo as f64 + hi as f64) / 2.0
                }
            };
        }
        c.score
    }
}

impl ReplicaSelector for DynamicSnitch {
    fn choose(&mut self, ctx: &SelectCtx<'_>) -> Option<u32> {
        while let Some(fb) = self.pending.pop_ready(ctx.now) {
            self.add_sample(&fb);
        }
        let mut scores = std::mem::take(&mut self.scores);
        scores.clear();
        for (i, &s) in ctx.replicas.iter().enumerate() {
            scores.push((self.score(ctx.client, s, ctx.now), i));
        }
        let static_first = scores[0].1;
        let mut sorted = std::mem::take(&mut self.sorted);
        sorted.clear();
        sorted.extend_from_slice(&scores);
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let use_scores = scores
            .iter()
            .zip(&sorted)
            .any(|(st, so)| st.0 > (1.0 + self.badness) * so.0);
        let pick = if use_scores { sorted[0].1 } else { static_first };
        self.scores = scores;
        self.sorted = sorted;
        Some(ctx.replicas[pick])
    }
    fn wants_feedback(&self) -> bool {
        true
    }
    fn on_op_response(&mut self, fb: &Feedback) {
        self.pending.push(*fb);
    }
}
