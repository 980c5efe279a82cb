//! `speculative` (speculative retry, Rein §5.1): an opset whose answer has not fully reached the client
//! `timeout` after it was sent is re-issued — its unanswered ops — to the next replica of its group; each op's
//! first answer wins, the other copy is not cancelled. The timeout is the `percentile` (default p90, "the most
//! favorable" in Rein) of the opset response times (send → last op answered) the client observed, over its last
//! `window` opsets; no retry before `min_samples` observations; `timeout_ms` > 0 fixes it instead.
//! Servers serve FIFO; the engine makes the copies.
use super::fifo::Fifo;
use crate::coordinator::{self, CoordinatorConfig};
use crate::decaying_histogram::{quantile_of, DecayingHistogram, BUCKETS};
use crate::params::Search;

crate::params! {
    pub struct SpeculativeConfig for "policy 'speculative'" {
        /// Percentile of the observed opset response times used as the retry timeout.
        percentile: f64 = 90.0, Real(1.0, 100.0, "[1, 100]"), Search::Fixed;
        /// Fixed timeout, ms; 0 = the running percentile.
        timeout_ms: f64 = 0.0, Real(0.0, 1e9, "[0, 1e9] ms (0 = from the percentile)"), Search::Fixed;
        /// Opsets in the sliding window of the running percentile (a whole number).
        window: f64 = 1000.0, Rounded(1.0, 1e6, "[1, 1e6] opsets"), Search::Fixed;
        /// Observations before the first retry (a whole number).
        min_samples: f64 = 100.0, Rounded(1.0, 1e6, "[1, 1e6] opsets"), Search::Fixed;
    }
}

/// Per-client running percentile of observed opset response times (exact nearest-rank over a sliding window,
/// recomputed every max(1, window / 10) new samples).
#[derive(Debug, Clone)]
pub struct LatencyEstimator {
    fixed_ns: Option<u64>,
    pct: f64,
    window: usize,
    min_samples: usize,
    refresh: usize,
    ring: Vec<Vec<u64>>,
    pos: Vec<usize>,
    seen: Vec<usize>,
    since: Vec<usize>,
    timeout: Vec<Option<u64>>,
    scratch: Vec<u64>,
    /// The coordinator section's speculative retry: Cassandra's threshold rule (time-based refresh, warm start)
    /// instead of the count-based one.
    stock: Option<StockRule>,
}

/// Cassandra's threshold rule (see `coordinator.rs`): per client, the next refresh time and whether the warm
/// start was taken.
#[derive(Debug, Clone)]
struct StockRule {
    cfg: CoordinatorConfig,
    refresh_ns: u64,
    /// Warm start: the time of the first recomputation (None = Cassandra's rule).
    warm_at: Option<u64>,
    next_refresh: Vec<u64>,
    warmed: Vec<bool>,
    /// The warm-start percentile over every coordinator's samples, taken at the first warm start.
    pooled: Option<u64>,
    /// Cassandra's decaying histogram per client (`spec_histogram` = 1); None = the sample window.
    hist: Option<Vec<DecayingHistogram>>,
}

impl LatencyEstimator {
    pub fn new(cfg: &SpeculativeConfig, clients: usize) -> Self {
        let window = cfg.window as usize;
        LatencyEstimator {
            fixed_ns: (cfg.timeout_ms > 0.0).then(|| (cfg.timeout_ms * 1e6).round() as u64),
            pct: cfg.percentile,
            window,
            min_samples: cfg.min_samples as usize,
            refresh: (window / 10).max(1),
            ring: vec![Vec::new(); clients],
            pos: vec![0; clients],
            seen: vec![0; clients],
            since: vec![0; clients],
            timeout: vec![None; clients],
            scratch: Vec::new(),
            stock: None,
        }
    }

    /// The coordinator section's threshold: FIXED and ALWAYS fixed; PERCENTILE, MIN and MAX from half the read
    /// timeout, recomputed every refresh period (and once at the warm start).
    /// `warm_at`: the end of the replay's warm-up cut (used when `spec_warm` = 1).
    pub fn stock(cfg: &CoordinatorConfig, clients: usize, warm_at: u64) -> Self {
        let fixed = matches!(cfg.kind(), coordinator::ALWAYS | coordinator::FIXED);
        // Cassandra's initial sampleReadLatency, whatever the policy: half the read timeout (or `spec_initial_ms`).
        let initial = if fixed { None } else { Some(cfg.initial_ns()) };
        let window = cfg.window as usize;
        LatencyEstimator {
            fixed_ns: if fixed { cfg.threshold(0) } else { None },
            pct: cfg.spec_percentile,
            window,
            min_samples: 1,
            refresh: usize::MAX,
            ring: vec![Vec::new(); clients],
            pos: vec![0; clients],
            seen: vec![0; clients],
            since: vec![0; clients],
            timeout: vec![initial; clients],
            scratch: Vec::new(),
            stock: Some(StockRule {
                cfg: cfg.clone(),
                refresh_ns: cfg.refresh_ns(),
                warm_at: (cfg.spec_warm >= 0.5).then_some(warm_at),
                next_refresh: vec![cfg.refresh_ns(); clients],
                warmed: vec![false; clients],
                pooled: None,
                hist: (cfg.spec_histogram >= 0.5).then(|| vec![DecayingHistogram::new(0); clients]),
            }),
        }
    }

    /// One observed response time at `client`, at simulated time `now` (`stock`'s rule; else as `observe`).
    #[inline]
    pub fn observe_at(&mut self, client: usize, ns: u64, now: u64) {
        let Some(rule) = self.stock.as_mut() else {
            return self.observe(client, ns);
        };
        if self.fixed_ns.is_some() {
            return;
        }
        if let Some(h) = rule.hist.as_mut() {
            h[client].update(ns, now);
        } else {
            push_window(&mut self.ring[client], &mut self.pos[client], self.window, ns);
        }
        self.seen[client] += 1;
        let warm = !rule.warmed[client] && rule.warm_at.is_some_and(|w| now >= w);
        let due = now >= rule.next_refresh[client];
        if !(warm || due) {
            return;
        }
        rule.warmed[client] |= warm;
        while rule.next_refresh[client] <= now {
            rule.next_refresh[client] += rule.refresh_ns;
        }
        if warm {
            // Warm start: a coordinator that has run for minutes holds far more samples than a replay's warm-up
            // gives one client, and every coordinator sees the same latencies; the percentile of all
            // coordinators' samples so far stands for its histogram (taken once, at the first warm start).
            if rule.pooled.is_none() {
                rule.pooled = if let Some(h) = rule.hist.as_ref() {
                    let mut snap = vec![0.0; BUCKETS + 1];
                    for x in h {
                        x.decayed_into(now, &mut snap);
                    }
                    quantile_of(&snap, self.pct / 100.0)
                } else {
                    self.scratch.clear();
                    for r in &self.ring {
                        self.scratch.extend_from_slice(r);
                    }
                    Some(nearest_rank(&mut self.scratch, self.pct))
                };
            }
            if let Some(v) = rule.pooled {
                self.timeout[client] = rule.cfg.threshold(v);
            }
            return;
        }
        let v = if let Some(h) = rule.hist.as_mut() {
            // an empty snapshot keeps the threshold (PercentileSpeculativeRetryPolicy: `existingValue`)
            match h[client].quantile_ns(self.pct / 100.0, now) {
                Some(v) => v,
                None => return,
            }
        } else {
            self.scratch.clear();
            self.scratch.extend_from_slice(&self.ring[client]);
            nearest_rank(&mut self.scratch, self.pct)
        };
        self.timeout[client] = rule.cfg.threshold(v);
    }

    /// One observed opset response time at `client`.
    pub fn observe(&mut self, client: usize, ns: u64) {
        if self.fixed_ns.is_some() {
            return;
        }
        push_window(&mut self.ring[client], &mut self.pos[client], self.window, ns);
        self.seen[client] += 1;
        self.since[client] += 1;
        if self.seen[client] >= self.min_samples
            && (self.timeout[client].is_none() || self.since[client] >= self.refresh)
        {
            self.since[client] = 0;
            self.scratch.clear();
            self.scratch.extend_from_slice(&self.ring[client]);
            let n = self.scratch.len();
            let rank = ((self.pct / 100.0 * n as f64).ceil() as usize).clamp(1, n);
            // The rank-th smallest, by selection (the value a full sort would put there).
            let (_, &mut v, _) = self.scratch.select_nth_unstable(rank - 1);
            self.timeout[client] = Some(v);
        }
    }

    /// The client's current timeout, ns (None = not enough observations yet).
    pub fn timeout_ns(&self, client: usize) -> Option<u64> {
        self.fixed_ns.or(self.timeout[client])
    }
}

/// `ns` into a client's sliding window of the last `window` samples (`pos`: the oldest once full).
fn push_window(ring: &mut Vec<u64>, pos: &mut usize, window: usize, ns: u64) {
    if ring.len() < window {
        ring.push(ns);
    } else {
        ring[*pos] = ns;
        *pos = (*pos + 1) % window;
    }
}

/// The nearest-rank `pct` percentile of `xs` (not empty), by selection.
fn nearest_rank(xs: &mut [u64], pct: f64) -> u64 {
    let n = xs.len();
    let rank = ((pct / 100.0 * n as f64).ceil() as usize).clamp(1, n);
    let (_, &mut v, _) = xs.select_nth_unstable(rank - 1);
    v
}

/// `fifo`'s scheduler under `speculative`'s config (the retries are the engine's, timed by [`LatencyEstimator`]).
pub type Speculative = Fifo<SpeculativeConfig>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::CoordinatorConfig;

    #[test]
    fn running_percentile_nearest_rank() {
        let cfg = SpeculativeConfig {
            window: 10.0,
            min_samples: 3.0,
            ..SpeculativeConfig::default()
        };
        let mut e = LatencyEstimator::new(&cfg, 2);
        e.observe(0, 5);
        e.observe(0, 1);
        assert_eq!(e.timeout_ns(0), None);
        e.observe(0, 3);
        // p90 of {1, 3, 5}: rank ceil(2.7) = 3 → 5.
        assert_eq!(e.timeout_ns(0), Some(5));
        assert_eq!(e.timeout_ns(1), None);
        for x in 10..=20 {
            e.observe(0, x);
        }
        // window keeps the last 10 samples 11..=20; p90 rank 9 → 19.
        assert_eq!(e.timeout_ns(0), Some(19));
        let fixed = LatencyEstimator::new(
            &SpeculativeConfig {
                timeout_ms: 2.5,
                ..SpeculativeConfig::default()
            },
            1,
        );
        assert_eq!(fixed.timeout_ns(0), Some(2_500_000));
    }

    #[test]
    fn the_warm_start_pools_every_coordinators_samples() {
        // 99p (default kind), read timeout 5000 ms → initial threshold 2500 ms; warm start at t = 100; the
        // exact window of samples
        let cfg = CoordinatorConfig {
            spec_histogram: 0.0,
            ..CoordinatorConfig::cassandra()
        };
        let mut e = LatencyEstimator::stock(&cfg, 3, 100);
        assert_eq!(e.timeout_ns(0), Some(2_500_000_000));
        // warm-up: client 0 sees 1..=98, client 1 sees 99 and 1000, client 2 nothing yet
        for x in 1..=98 {
            e.observe_at(0, x, 10);
        }
        e.observe_at(1, 99, 20);
        e.observe_at(1, 1000, 30);
        assert_eq!(e.timeout_ns(1), Some(2_500_000_000), "no update before the warm start");
        // client 1's first sample after the warm-up: the pooled samples 1..=99, 1000, 7 (101 of them)
        // → nearest rank ceil(0.99 × 101) = 100 → 99, not its own p99 (1000 of {99, 1000, 7})
        e.observe_at(1, 7, 100);
        assert_eq!(e.timeout_ns(1), Some(99));
        // every other coordinator warms to the same value, taken once, whatever it saw itself
        e.observe_at(2, 5000, 150);
        assert_eq!(e.timeout_ns(2), Some(99));
        assert_eq!(e.timeout_ns(0), Some(2_500_000_000), "client 0 has not answered since the warm-up");
        e.observe_at(0, 1, 160);
        assert_eq!(e.timeout_ns(0), Some(99));
    }

    #[test]
    fn the_threshold_is_read_from_cassandras_decaying_histogram() {
        use crate::decaying_histogram::{bucket_of, offsets};
        // 99p, warm start at t = 1 µs, refresh every 5 s (the read timeout)
        let cfg = CoordinatorConfig::cassandra();
        let mut e = LatencyEstimator::stock(&cfg, 2, 1_000);
        let ms = 1_000_000;
        // warm-up at t = 0: client 0 sees 990 reads of 1 ms, client 1 ten of 50 ms
        for _ in 0..990 {
            e.observe_at(0, ms, 0);
        }
        for _ in 0..10 {
            e.observe_at(1, 50 * ms, 0);
        }
        // warm start pools both: 1001 samples, p99 → ⌈990.99⌉ = 991 → the 1 ms bucket (up to 1109 µs)
        e.observe_at(0, ms, 1_000);
        let one_ms = offsets()[bucket_of(1000)] * 1000;
        assert_eq!(one_ms, 1_109_000);
        assert_eq!(e.timeout_ns(0), Some(one_ms));
        e.observe_at(1, 2 * ms, 2_000);
        assert_eq!(e.timeout_ns(1), Some(one_ms), "client 1 takes the pooled value at its warm start");
        // t = 5 s, client 1's own histogram: ten 50 ms and two 2 ms reads, each of weight 1, divided by
        // exp(5 / 86.56) = 1.0595 and rounded: 9 and 2 → p99 of 11 → ⌈10.89⌉ = 11 → the 50 ms bucket
        e.observe_at(1, 2 * ms, 5_000_000_000);
        assert_eq!(e.timeout_ns(1), Some(offsets()[bucket_of(50_000)] * 1000));
        // client 0 at t = 5 s: 991 reads of 1 ms → 935, 30 of 40 ms (at 4 s and 5 s, weight 1) → 28; p99 of 963
        // → ⌈953.37⌉ = 954 > 935 → the 40 ms bucket (the last 30 of 1021 samples, 2.9 %, hold the percentile)
        for _ in 0..29 {
            e.observe_at(0, 40 * ms, 4_000_000_000);
        }
        assert_eq!(e.timeout_ns(0), Some(one_ms), "no update before the period");
        e.observe_at(0, 40 * ms, 5_000_000_000);
        assert_eq!(e.timeout_ns(0), Some(offsets()[bucket_of(40_000)] * 1000));
    }
}
