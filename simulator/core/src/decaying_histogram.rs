//! Cassandra's coordinator read-latency histogram, as its speculative-retry threshold reads it
//! (`DecayingEstimatedHistogramReservoir`, apache/cassandra `src/java/org/apache/cassandra/metrics/`).
//!
//! - Values are recorded in whole microseconds (the table timer scales nanoseconds down, truncating) into
//!   `EstimatedHistogram`'s buckets: offsets 1, 2, 3, …, each the previous × 1.2 rounded (at least + 1), 164 of
//!   them, plus an overflow bucket; a value goes to the first bucket whose offset is ≥ it.
//! - **Forward decay**: a value recorded at time t adds round(w(t)) to its bucket, w(t) = exp((t − L) / τ) with
//!   the landmark L and the mean lifetime τ = 60 s / ln 2 (a 60 s half-life); a snapshot at `now` divides every
//!   bucket by w(now) and rounds. The landmark moves to `now` every 30 minutes, the buckets divided (and rounded)
//!   by the weight then.
//! - **The percentile** (`getValue(q)` of the snapshot): q_count = ⌈count × q⌉ over the decayed, rounded bucket
//!   counts; the offset of the first bucket whose running count reaches it (0 when q_count is 0); none when the
//!   snapshot is empty (the policy then keeps its threshold); unbounded when the overflow bucket holds anything.
//!
//! The model keeps one per coordinator and table, as Cassandra does.

/// Buckets (without the overflow bucket) of Cassandra's decaying reservoir.
pub const BUCKETS: usize = 164;
/// Half-life of a recorded value's weight.
pub const HALF_LIFE_NS: f64 = 60e9;
/// How often the landmark moves.
pub const LANDMARK_RESET_NS: u64 = 30 * 60 * 1_000_000_000;

/// `EstimatedHistogram.newOffsets(BUCKETS, false)`: 1, 2, 3, … ×1.2 rounded, at least + 1.
pub fn offsets() -> &'static [u64; BUCKETS] {
    use std::sync::OnceLock;
    static OFFSETS: OnceLock<[u64; BUCKETS]> = OnceLock::new();
    OFFSETS.get_or_init(|| {
        let mut o = [0u64; BUCKETS];
        let mut last = 1u64;
        o[0] = last;
        for slot in o.iter_mut().skip(1) {
            let mut next = (last as f64 * 1.2).round() as u64;
            if next == last {
                next += 1;
            }
            *slot = next;
            last = next;
        }
        o
    })
}

/// The bucket of a value in µs: the first offset ≥ it (BUCKETS = overflow).
pub fn bucket_of(us: u64) -> usize {
    offsets().partition_point(|&o| o < us)
}

#[derive(Debug, Clone)]
pub struct DecayingHistogram {
    /// Weighted counts per bucket (whole numbers, as Cassandra's longs); the last one is the overflow.
    buckets: Vec<f64>,
    landmark_ns: u64,
}

impl Default for DecayingHistogram {
    fn default() -> Self {
        Self::new(0)
    }
}

impl DecayingHistogram {
    pub fn new(landmark_ns: u64) -> Self {
        DecayingHistogram {
            buckets: vec![0.0; BUCKETS + 1],
            landmark_ns,
        }
    }

    fn weight(&self, now_ns: u64) -> f64 {
        let tau = HALF_LIFE_NS / std::f64::consts::LN_2;
        ((now_ns.saturating_sub(self.landmark_ns)) as f64 / tau).exp()
    }

    fn rescale_if_needed(&mut self, now_ns: u64) {
        if now_ns.saturating_sub(self.landmark_ns) >= LANDMARK_RESET_NS {
            let factor = self.weight(now_ns);
            for b in &mut self.buckets {
                *b = (*b / factor).round();
            }
            self.landmark_ns = now_ns;
        }
    }

    /// Record a latency of `ns` at time `now_ns`.
    pub fn update(&mut self, ns: u64, now_ns: u64) {
        self.rescale_if_needed(now_ns);
        let w = self.weight(now_ns).round();
        self.buckets[bucket_of(ns / 1000)] += w;
    }

    /// The decayed, rounded bucket counts at `now_ns` added into `into` (a pooled snapshot of several).
    pub fn decayed_into(&self, now_ns: u64, into: &mut [f64]) {
        let factor = self.weight(now_ns);
        for (d, b) in into.iter_mut().zip(&self.buckets) {
            *d += (b / factor).round();
        }
    }

    /// The `q` quantile (0..1) in ns of the snapshot at `now_ns`: None when it is empty; u64::MAX when it
    /// overflowed.
    pub fn quantile_ns(&mut self, q: f64, now_ns: u64) -> Option<u64> {
        self.rescale_if_needed(now_ns);
        let mut snap = vec![0.0; BUCKETS + 1];
        self.decayed_into(now_ns, &mut snap);
        quantile_of(&snap, q)
    }
}

/// `getValue(q)` of a decayed snapshot (`counts`, BUCKETS + 1 long), in ns.
pub fn quantile_of(counts: &[f64], q: f64) -> Option<u64> {
    let total: f64 = counts.iter().sum();
    if total <= 0.0 {
        return None;
    }
    if counts[BUCKETS] > 0.0 {
        return Some(u64::MAX);
    }
    let need = (total * q).ceil();
    if need <= 0.0 {
        return Some(0);
    }
    let mut seen = 0.0;
    for (i, c) in counts[..BUCKETS].iter().enumerate() {
        seen += c;
        if seen >= need {
            return Some(offsets()[i] * 1000);
        }
    }
    Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_cassandras() {
        let o = offsets();
        // EstimatedHistogram.newOffsets: 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 17, 20, 24, 29, 35, 42, 50, 60, 72, ...
        assert_eq!(&o[..20], &[1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 17, 20, 24, 29, 35, 42, 50, 60, 72]);
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(9), 8); // → 10
        assert_eq!(bucket_of(10), 8);
        assert_eq!(bucket_of(11), 9); // → 12
        assert!(o[BUCKETS - 1] > 10_000_000_000, "the last offset is beyond any latency: {}", o[BUCKETS - 1]);
    }

    #[test]
    fn the_percentile_is_a_buckets_upper_offset() {
        let mut h = DecayingHistogram::new(0);
        for _ in 0..99 {
            h.update(100_000, 0); // 100 µs → bucket with offset 100? offsets …, 86, 103 → 103
        }
        h.update(10_000_000, 0); // 10 ms
        // q_count = ⌈100 × 0.99⌉ = 99: the 100 µs bucket's offset
        let b = bucket_of(100);
        assert_eq!(offsets()[b], 103);
        assert_eq!(h.quantile_ns(0.99, 0), Some(103_000));
        // q_count = ⌈100 × 0.995⌉ = 100: the 10 ms value's bucket
        assert_eq!(h.quantile_ns(0.995, 0), Some(offsets()[bucket_of(10_000)] * 1000));
        assert_eq!(DecayingHistogram::new(0).quantile_ns(0.99, 0), None);
    }

    #[test]
    fn old_values_weigh_less_but_are_not_forgotten() {
        // 100 reads of 1 ms at t = 0, then 100 of 100 µs at t = 120 s (two half-lives later: weight 4 each).
        let mut h = DecayingHistogram::new(0);
        for _ in 0..100 {
            h.update(1_000_000, 0);
        }
        let t = 120_000_000_000;
        for _ in 0..100 {
            h.update(100_000, t);
        }
        // decayed at t: the old bucket 100 × 1 / 4 = 25, the new one 100 × 4 / 4 = 100; total 125
        // p99: ⌈123.75⌉ = 124 > 100 → the 1 ms bucket (a window of the last 100 samples would say 100 µs)
        assert_eq!(h.quantile_ns(0.99, t), Some(offsets()[bucket_of(1000)] * 1000));
        // p50: ⌈62.5⌉ = 63 ≤ 100 → the 100 µs bucket
        assert_eq!(h.quantile_ns(0.5, t), Some(103_000));
        // ten minutes on, every reading has decayed to nothing (100 / 2^10 rounds to 0): an empty snapshot, so
        // the policy keeps its threshold; one fresh read is then the whole histogram
        let later = t + 600_000_000_000;
        assert_eq!(h.quantile_ns(0.99, later), None);
        h.update(5_000_000, later);
        assert_eq!(h.quantile_ns(0.99, later), Some(offsets()[bucket_of(5000)] * 1000));
    }

    #[test]
    fn the_landmark_moves_every_thirty_minutes_without_changing_the_answer() {
        let mut h = DecayingHistogram::new(0);
        let t = LANDMARK_RESET_NS - 1_000_000_000;
        for _ in 0..1000 {
            h.update(2_000_000, t);
        }
        let before = h.quantile_ns(0.99, t);
        h.update(50_000, LANDMARK_RESET_NS); // moves the landmark
        assert_eq!(h.landmark_ns, LANDMARK_RESET_NS);
        assert_eq!(h.quantile_ns(0.99, LANDMARK_RESET_NS), before);
    }
}
