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

/// Cassandra's threshold rule (see `coordinator.rs`): per client (coordinator), its histogram (or sample window),
/// the time of its next threshold update and whether the warm start was taken.
#[derive(Debug, Clone)]
struct StockRule {
    cfg: CoordinatorConfig,
    refresh_ns: u64,
    /// How long before the replay's time 0 the histograms' landmark was set: a replay time t is `t + phase_ns`
    /// on the histograms' clock.
    phase_ns: u64,
    /// Warm start: the time of the first recomputation (None = Cassandra's rule).
    warm_at: Option<u64>,
    /// Per client: the time of its next periodic update (`ColumnFamilyStore.updateSpeculationThreshold` on the
    /// read-timeout timer).
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
    /// timeout (or `spec_initial_ms`, or the percentile of `history` when given), recomputed by each
    /// coordinator's timer every refresh period (first at `spec_refresh_first_ms`, 0 = one period in) and once
    /// at the warm start. `warm_at`: the end of the replay's warm-up cut (used when `spec_warm` = 1).
    /// `history`: sample counts per bucket (`decaying_histogram::BUCKETS`, or one more with the overflow) every
    /// coordinator's histogram holds at time 0, each recorded with the weight then (empty: none); the caller
    /// checks its length and that `spec_histogram` is 1.
    pub fn stock(cfg: &CoordinatorConfig, clients: usize, warm_at: u64, history: &[u64]) -> Self {
        let fixed = matches!(cfg.kind(), coordinator::ALWAYS | coordinator::FIXED);
        let phase_ns = cfg.landmark_ns();
        let hist = (cfg.spec_histogram >= 0.5).then(|| {
            let mut h = DecayingHistogram::new(0);
            for (b, &n) in history.iter().enumerate() {
                if n > 0 {
                    h.add(b, n, phase_ns);
                }
            }
            vec![h; clients]
        });
        // Cassandra's initial sampleReadLatency, whatever the policy: half the read timeout (or `spec_initial_ms`;
        // with a history and no `spec_initial_ms`, the threshold its percentile gives, as the last update before
        // the replay left it).
        let initial = if fixed {
            None
        } else {
            let from_history = hist
                .as_ref()
                .filter(|_| cfg.spec_initial_ms <= 0.0 && history.iter().any(|&n| n > 0))
                .and_then(|h| h[0].clone().quantile_ns(cfg.spec_percentile / 100.0, phase_ns));
            match from_history {
                Some(v) => cfg.threshold(v),
                None => Some(cfg.initial_ns()),
            }
        };
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
                phase_ns,
                warm_at: (cfg.spec_warm >= 0.5).then_some(warm_at),
                next_refresh: vec![cfg.first_refresh_ns(); clients],
                warmed: vec![false; clients],
                pooled: None,
                hist,
            }),
        }
    }

    /// `stock`: applies `client`'s periodic threshold updates due before `now`, in time order (an update at T
    /// runs after every other event at T: it sees the samples recorded at T, a read sent at T has the threshold
    /// from before it). Each reads the snapshot at its own time; an empty one keeps the threshold
    /// (`PercentileSpeculativeRetryPolicy`: `existingValue`).
    fn refresh_before(&mut self, client: usize, now: u64) {
        let Some(rule) = self.stock.as_mut() else {
            return;
        };
        while rule.next_refresh[client] < now {
            let t = rule.next_refresh[client];
            rule.next_refresh[client] += rule.refresh_ns;
            let v = if let Some(h) = rule.hist.as_mut() {
                h[client].quantile_ns(self.pct / 100.0, t + rule.phase_ns)
            } else if self.ring[client].is_empty() {
                None
            } else {
                self.scratch.clear();
                self.scratch.extend_from_slice(&self.ring[client]);
                Some(nearest_rank(&mut self.scratch, self.pct))
            };
            if let Some(v) = v {
                self.timeout[client] = rule.cfg.threshold(v);
            }
        }
    }

    /// One observed response time at `client`, at simulated time `now` (`stock`'s rule; else as `observe`).
    #[inline]
    pub fn observe_at(&mut self, client: usize, ns: u64, now: u64) {
        if self.stock.is_none() {
            return self.observe(client, ns);
        }
        if self.fixed_ns.is_some() {
            return;
        }
        self.refresh_before(client, now);
        let rule = self.stock.as_mut().expect("stock rule");
        if let Some(h) = rule.hist.as_mut() {
            h[client].update(ns, now + rule.phase_ns);
        } else {
            push_window(&mut self.ring[client], &mut self.pos[client], self.window, ns);
        }
        self.seen[client] += 1;
        let warm = !rule.warmed[client] && rule.warm_at.is_some_and(|w| now >= w);
        if !warm {
            return;
        }
        rule.warmed[client] = true;
        // Warm start: a coordinator that has run for minutes holds far more samples than a replay's warm-up
        // gives one client, and every coordinator sees the same latencies; the percentile of all coordinators'
        // samples so far stands for its histogram (taken once, at the first warm start).
        if self.stock.as_ref().is_some_and(|r| r.pooled.is_none()) {
            for c in 0..self.timeout.len() {
                self.refresh_before(c, now);
            }
            let rule = self.stock.as_mut().expect("stock rule");
            rule.pooled = if let Some(h) = rule.hist.as_ref() {
                let mut snap = vec![0; BUCKETS + 1];
                for x in h {
                    x.decayed_into(now + rule.phase_ns, &mut snap);
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
        let rule = self.stock.as_ref().expect("stock rule");
        if let Some(v) = rule.pooled {
            self.timeout[client] = rule.cfg.threshold(v);
        }
    }

    /// The threshold `client` reads at `now` (`stock`: after its updates due before `now`), ns; None = no
    /// speculation (or not enough observations yet).
    #[inline]
    pub fn timeout_at(&mut self, client: usize, now: u64) -> Option<u64> {
        if self.fixed_ns.is_none() {
            self.refresh_before(client, now);
        }
        self.timeout_ns(client)
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
        let mut e = LatencyEstimator::stock(&cfg, 3, 100, &[]);
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
        // 99p, warm start at t = 1 µs, an update every 5 s (the read timeout), the first at 5 s
        let cfg = CoordinatorConfig::cassandra();
        let mut e = LatencyEstimator::stock(&cfg, 2, 1_000, &[]);
        let ms = 1_000_000;
        let s = 1_000_000_000;
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
        assert_eq!(
            e.timeout_ns(1),
            Some(one_ms),
            "client 1 takes the pooled value at its warm start"
        );
        // client 1's update at 5 s, which runs after every event at 5 s: its histogram holds ten 50 ms reads and
        // two of 2 ms (one at 5 s), each of weight 1, divided by the weight at 5 s, round(e^{5/86.56}) = 1:
        // p99 of 12 → ⌈11.88⌉ = 12 → the 50 ms bucket
        e.observe_at(1, 2 * ms, 5 * s);
        assert_eq!(e.timeout_at(1, 5 * s), Some(one_ms), "not before the update");
        assert_eq!(
            e.timeout_at(1, 5 * s + 1),
            Some(offsets()[bucket_of(50_000)] * 1000)
        );
        // client 0: 991 reads of 1 ms, then 30 of 40 ms at 4 s (weight 1); its update at 5 s: p99 of 1021 →
        // ⌈1010.79⌉ = 1011 > 991 → the 40 ms bucket (the last 30 of 1021 samples, 2.9 %, hold the percentile)
        for _ in 0..30 {
            e.observe_at(0, 40 * ms, 4 * s);
        }
        assert_eq!(
            e.timeout_at(0, 4 * s + 1),
            Some(one_ms),
            "no update before the period"
        );
        // the update is on the timer: it happens at 5 s whether or not the coordinator records a sample then
        assert_eq!(
            e.timeout_at(0, 7 * s),
            Some(offsets()[bucket_of(40_000)] * 1000)
        );
    }

    #[test]
    fn updates_run_on_the_timer_from_its_phase() {
        use crate::decaying_histogram::{bucket_of, offsets};
        // Cassandra's rule (no warm start), 99p, the first update at 2 s, then every 5 s (at 7 s, 12 s, ...)
        let cfg = CoordinatorConfig {
            spec_warm: 0.0,
            spec_refresh_first_ms: 2000.0,
            ..CoordinatorConfig::cassandra()
        };
        let s = 1_000_000_000;
        let mut e = LatencyEstimator::stock(&cfg, 1, 0, &[]);
        assert_eq!(e.timeout_at(0, 0), Some(2_500_000_000), "half the read timeout");
        // nothing sampled by 2 s: an empty snapshot keeps the threshold
        assert_eq!(e.timeout_at(0, 3 * s), Some(2_500_000_000));
        // one read of 3 ms at 6 s: the update at 7 s takes it
        e.observe_at(0, 3_000_000, 6 * s);
        assert_eq!(e.timeout_at(0, 7 * s), Some(2_500_000_000));
        let three = offsets()[bucket_of(3000)] * 1000;
        assert_eq!(e.timeout_at(0, 7 * s + 1), Some(three));
        // at 700 s the read has decayed to nothing (1 / round(e^{700/86.56}) = 1 / 3251 rounds to 0): the
        // updates since kept the threshold
        assert_eq!(e.timeout_at(0, 700 * s), Some(three));
    }

    #[test]
    fn a_history_of_bucket_counts_warms_every_coordinator() {
        use crate::decaying_histogram::{bucket_of, offsets, BUCKETS};
        // 4,900 reads of 1 ms held at time 0 by both coordinators; Cassandra's rule, 99p
        let cfg = CoordinatorConfig {
            spec_warm: 0.0,
            ..CoordinatorConfig::cassandra()
        };
        let mut history = vec![0u64; BUCKETS];
        history[bucket_of(1000)] = 4900;
        let s = 1_000_000_000;
        let mut e = LatencyEstimator::stock(&cfg, 2, 0, &history);
        // the threshold the history gives, from the start (the last update before the replay left it)
        let one_ms = offsets()[bucket_of(1000)] * 1000;
        assert_eq!((e.timeout_at(0, 0), e.timeout_at(1, 0)), (Some(one_ms), Some(one_ms)));
        // client 0 then sees 80 reads of 150 ms at 3 s: at its update at 5 s they are 80 of 4980 (1.6 %): p99
        // → ⌈4930.2⌉ = 4931 > 4900 → the 150 ms bucket; client 1, without them, keeps 1 ms
        for _ in 0..80 {
            e.observe_at(0, 150_000_000, 3 * s);
        }
        assert_eq!(e.timeout_at(0, 5 * s + 1), Some(152_321_000));
        assert_eq!(e.timeout_at(1, 5 * s + 1), Some(one_ms));
        // an explicit initial threshold wins over the history's
        let given = CoordinatorConfig {
            spec_initial_ms: 20.0,
            ..cfg.clone()
        };
        let mut g = LatencyEstimator::stock(&given, 1, 0, &history);
        assert_eq!(g.timeout_at(0, 0), Some(20_000_000));
        assert_eq!(g.timeout_at(0, 5 * s + 1), Some(one_ms));
    }
}
