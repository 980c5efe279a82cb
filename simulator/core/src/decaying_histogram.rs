//! Cassandra's coordinator read-latency histogram, as its speculative-retry threshold reads it: the table's
//! `CoordinatorReadLatency` timer, a `DecayingEstimatedHistogramReservoir` (Cassandra 5.0.9,
//! `src/java/org/apache/cassandra/metrics/`; line numbers below are 5.0.9's).
//!
//! - Values are recorded in whole microseconds (the timer's `ScalingReservoir` scales nanoseconds down,
//!   truncating) into the 127 buckets of a microsecond timer (`CassandraMetricsRegistry.createReservoir`:
//!   `LOW_BUCKET_COUNT`) — `EstimatedHistogram`'s offsets 1, 2, 3, …, each the previous × 1.2 rounded (one
//!   more at least), up to 21 356 903 512 µs — plus an overflow bucket; a value goes to the first bucket whose
//!   offset is ≥ it.
//! - **Forward decay** (`DecayingBuckets.forwardDecayWeight`, DecayingEstimatedHistogramReservoir.java:464): a
//!   value recorded at time t adds the integer weight w(t) = `Math.round(exp(s / (60 / ln 2)))` to its bucket,
//!   s = the **whole seconds** (truncated) from the landmark L to t: 1 for 0–35 s after the landmark, 2 for
//!   36–79 s, 3 for 80–108 s, … (a 60 s half-life in steps). A snapshot at `now` divides every bucket by the same
//!   rounded weight w(now) and rounds (`EstimatedHistogramReservoirSnapshot`, 669–687).
//! - **The landmark** is the reservoir's creation (the table's opening). The first update or snapshot more than
//!   30 minutes after it (`rescaleIfNeeded`, 372–385) divides every bucket by w(then), rounds, and moves the
//!   landmark there. Times here are the histogram's own clock: the caller passes replay time plus how long
//!   before the replay's time 0 the landmark was set (`spec_landmark_ms`).
//! - **The percentile** (`AbstractSnapshot.getValue`, 490–511): q_count = ⌈count × q⌉ over the decayed, rounded
//!   bucket counts (the overflow bucket counted); the offset of the first bucket (overflow excluded) whose running
//!   count reaches it; 0 when q_count is 0 or no bucket reaches it; none when the snapshot is empty (the policy
//!   then keeps its threshold).
//!
//! The model keeps one per coordinator (its one table), as Cassandra keeps one per node and table.

/// Buckets (without the overflow bucket) of a microsecond timer's decaying reservoir (`LOW_BUCKET_COUNT`).
pub const BUCKETS: usize = 127;
/// `MEAN_LIFETIME_IN_S`: 60 s / ln 2 (a 60 s half-life).
pub const MEAN_LIFETIME_S: f64 = 60.0 / std::f64::consts::LN_2;
/// How long the landmark stays before the next update or snapshot moves it (`LANDMARK_RESET_INTERVAL_IN_NS`).
pub const LANDMARK_RESET_NS: u64 = 30 * 60 * 1_000_000_000;
const NS_PER_S: u64 = 1_000_000_000;

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

/// The weight of a value recorded `since_landmark_ns` after the landmark: `Math.round(exp(s / τ))` with s
/// the whole seconds (`TimeUnit.toSeconds` truncates) and τ = 60 s / ln 2.
pub fn weight(since_landmark_ns: u64) -> u64 {
    let s = since_landmark_ns / NS_PER_S;
    // Java's Math.round(double) is floor(x + 0.5); the same as Rust's round for positive values.
    (s as f64 / MEAN_LIFETIME_S).exp().round() as u64
}

/// `Math.round((double) count / factor)` as Java computes it (`l2d`, then a double division).
fn scaled(count: u64, factor: u64) -> u64 {
    (count as f64 / factor as f64).round() as u64
}

#[derive(Debug, Clone)]
pub struct DecayingHistogram {
    /// Weighted counts per bucket (Cassandra's longs); the last one is the overflow.
    buckets: Vec<u64>,
    landmark_ns: u64,
}

impl Default for DecayingHistogram {
    fn default() -> Self {
        Self::new(0)
    }
}

impl DecayingHistogram {
    /// An empty histogram whose landmark is at `landmark_ns` (its own clock).
    pub fn new(landmark_ns: u64) -> Self {
        DecayingHistogram {
            buckets: vec![0; BUCKETS + 1],
            landmark_ns,
        }
    }

    /// The landmark, on the histogram's clock.
    pub fn landmark_ns(&self) -> u64 {
        self.landmark_ns
    }

    fn weight_at(&self, now_ns: u64) -> u64 {
        weight(now_ns.saturating_sub(self.landmark_ns))
    }

    /// `rescaleIfNeeded`: more than 30 minutes after the landmark, every bucket divided by the weight now
    /// (rounded), the landmark moved to now.
    fn rescale_if_needed(&mut self, now_ns: u64) {
        if now_ns.saturating_sub(self.landmark_ns) > LANDMARK_RESET_NS {
            let factor = self.weight_at(now_ns);
            for b in &mut self.buckets {
                *b = scaled(*b, factor);
            }
            self.landmark_ns = now_ns;
        }
    }

    /// Record a latency of `ns` at time `now_ns`.
    pub fn update(&mut self, ns: u64, now_ns: u64) {
        self.add(bucket_of(ns / 1000), 1, now_ns);
    }

    /// Record `count` values in bucket `bucket` (BUCKETS = overflow) at time `now_ns`, each with the weight then.
    pub fn add(&mut self, bucket: usize, count: u64, now_ns: u64) {
        self.rescale_if_needed(now_ns);
        let w = self.weight_at(now_ns);
        let b = &mut self.buckets[bucket];
        *b = b.saturating_add(count.saturating_mul(w));
    }

    /// The decayed, rounded bucket counts at `now_ns` added into `into` (BUCKETS + 1 long: a pooled snapshot of
    /// several). The landmark is not moved (a read-only view).
    pub fn decayed_into(&self, now_ns: u64, into: &mut [u64]) {
        let factor = self.weight_at(now_ns);
        for (d, &b) in into.iter_mut().zip(&self.buckets) {
            *d += scaled(b, factor);
        }
    }

    /// The `q` quantile (0..1) in ns of the snapshot at `now_ns` (which moves the landmark when it is due):
    /// None when it is empty.
    pub fn quantile_ns(&mut self, q: f64, now_ns: u64) -> Option<u64> {
        self.rescale_if_needed(now_ns);
        let mut snap = vec![0; BUCKETS + 1];
        self.decayed_into(now_ns, &mut snap);
        quantile_of(&snap, q)
    }
}

/// `getValue(q)` of a decayed snapshot (`counts`, BUCKETS + 1 long, the last the overflow), in ns; None when
/// the snapshot is empty.
pub fn quantile_of(counts: &[u64], q: f64) -> Option<u64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    // (An overflowed snapshot is logged and read on: `getValue` catches its own IllegalStateException.)
    let need = (total as f64 * q).ceil() as u64;
    if need == 0 {
        return Some(0);
    }
    let mut seen = 0u64;
    for (i, &c) in counts[..BUCKETS].iter().enumerate() {
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
        assert_eq!(
            &o[..20],
            &[1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 17, 20, 24, 29, 35, 42, 50, 60, 72]
        );
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1), 0);
        assert_eq!(bucket_of(9), 8); // → 10
        assert_eq!(bucket_of(10), 8);
        assert_eq!(bucket_of(11), 9); // → 12
        // 127 buckets: the last offset is 21 356 903 512 µs (5.9 h); 1 ms falls in the bucket of 1109 µs,
        // 150 ms in that of 152 321 µs
        assert_eq!(o[BUCKETS - 1], 21_356_903_512);
        assert_eq!(o[bucket_of(1000)], 1109);
        assert_eq!(o[bucket_of(150_000)], 152_321);
        assert_eq!(bucket_of(o[BUCKETS - 1] + 1), BUCKETS);
    }

    #[test]
    fn weights_count_whole_seconds_and_are_rounded() {
        let s = |x: f64| (x * 1e9) as u64;
        // round(e^{s/86.56}): 1 up to 35 s, 2 from 36 s (e^{36/86.56} = 1.516), 3 from 80 s, 4 from 109 s
        assert_eq!(weight(0), 1);
        assert_eq!(weight(s(35.9)), 1, "35.9 s counts as 35: round(1.498)");
        assert_eq!(weight(s(36.0)), 2);
        assert_eq!(weight(s(79.99)), 2);
        assert_eq!(weight(s(80.0)), 3);
        assert_eq!((weight(s(108.0)), weight(s(109.0))), (3, 4));
        assert_eq!(weight(s(120.0)), 4);
        // a value recorded at 35.9 s adds 1 to its bucket; one at 36 s adds 2
        let mut h = DecayingHistogram::new(0);
        h.update(1_000_000, s(35.9));
        assert_eq!(h.buckets[bucket_of(1000)], 1);
        h.update(1_000_000, s(36.0));
        assert_eq!(h.buckets[bucket_of(1000)], 3);
    }

    #[test]
    fn the_percentile_is_a_buckets_upper_offset() {
        let mut h = DecayingHistogram::new(0);
        for _ in 0..99 {
            h.update(100_000, 0); // 100 µs → offsets …, 86, 103 → 103
        }
        h.update(10_000_000, 0); // 10 ms
        // q_count = ⌈100 × 0.99⌉ = 99: the 100 µs bucket's offset
        let b = bucket_of(100);
        assert_eq!(offsets()[b], 103);
        assert_eq!(h.quantile_ns(0.99, 0), Some(103_000));
        // q_count = ⌈100 × 0.995⌉ = 100: the 10 ms value's bucket
        assert_eq!(
            h.quantile_ns(0.995, 0),
            Some(offsets()[bucket_of(10_000)] * 1000)
        );
        assert_eq!(DecayingHistogram::new(0).quantile_ns(0.99, 0), None);
        // an overflowed value counts, but no bucket holds it: a quantile past the regular buckets reads 0
        let mut o = DecayingHistogram::new(0);
        o.update(100_000, 0);
        o.add(BUCKETS, 1, 0);
        assert_eq!(o.quantile_ns(0.5, 0), Some(103_000));
        assert_eq!(o.quantile_ns(0.99, 0), Some(0));
    }

    #[test]
    fn the_history_of_the_minute_before_dilutes_a_stall() {
        // 4,900 reads of 1 ms at t ≤ 35 s (weight 1), then at t = 40 s (weight 2)
        // 60 of 1 ms and 20 of 150 ms. The snapshot at 40 s divides by 2: 1 ms bucket (4900 + 120) / 2 = 2510,
        // 150 ms bucket 40 / 2 = 20; p99 → ⌈0.99 × 2530⌉ = 2505 ≤ 2510 → 1.109 ms.
        let s = 1_000_000_000u64;
        let mut h = DecayingHistogram::new(0);
        h.add(bucket_of(1000), 4900, 35 * s);
        for _ in 0..60 {
            h.update(1_000_000, 40 * s);
        }
        for _ in 0..20 {
            h.update(150_000_000, 40 * s);
        }
        assert_eq!(h.quantile_ns(0.99, 40 * s), Some(1_109_000));
        // Without the history: 60 and 20 → ⌈79.2⌉ = 80 → the 150 ms bucket, 152.321 ms.
        let mut fresh = DecayingHistogram::new(0);
        for _ in 0..60 {
            fresh.update(1_000_000, 40 * s);
        }
        for _ in 0..20 {
            fresh.update(150_000_000, 40 * s);
        }
        assert_eq!(fresh.quantile_ns(0.99, 40 * s), Some(152_321_000));
        // With the history but each stalled read sampled four times (per query, not per partition): 2510 and
        // 80 → ⌈2564.1⌉ = 2565 > 2510 → 152.321 ms.
        for _ in 0..60 {
            h.update(150_000_000, 40 * s);
        }
        assert_eq!(h.quantile_ns(0.99, 40 * s), Some(152_321_000));
    }

    #[test]
    fn old_values_weigh_less_but_are_not_forgotten() {
        // 100 reads of 1 ms at t = 0, then 100 of 100 µs at t = 120 s (weight round(e^{120/86.56}) = 4).
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
        assert_eq!(
            h.quantile_ns(0.99, t),
            Some(offsets()[bucket_of(1000)] * 1000)
        );
        // p50: ⌈62.5⌉ = 63 ≤ 100 → the 100 µs bucket
        assert_eq!(h.quantile_ns(0.5, t), Some(103_000));
        // at t = 840 s (14 half-lives: weight 2^14 = 16 384) every reading has decayed to nothing (400 / 16 384
        // rounds to 0): an empty snapshot, so the policy keeps its threshold; one fresh read is then the whole
        // histogram
        let later = 840_000_000_000;
        assert_eq!(weight(later), 16_384);
        assert_eq!(h.quantile_ns(0.99, later), None);
        h.update(5_000_000, later);
        assert_eq!(
            h.quantile_ns(0.99, later),
            Some(offsets()[bucket_of(5000)] * 1000)
        );
    }

    #[test]
    fn the_landmark_moves_at_the_first_access_past_thirty_minutes() {
        let mut h = DecayingHistogram::new(0);
        // exactly 30 minutes after the landmark it stays (`>`, not `≥`): 1000 reads of 2 ms and one of 50 µs
        // at 1800 s, each of weight round(e^{1800/86.56})
        let t = LANDMARK_RESET_NS;
        for _ in 0..1000 {
            h.update(2_000_000, t);
        }
        h.update(50_000, t);
        assert_eq!(h.landmark_ns(), 0);
        let before = h.quantile_ns(0.99, t);
        assert_eq!(before, Some(offsets()[bucket_of(2000)] * 1000));
        // the first access after that divides by the weight then and moves the landmark: the same answer
        let after = t + 1;
        assert_eq!(h.quantile_ns(0.99, after), before);
        assert_eq!(h.landmark_ns(), after);
        assert_eq!(
            (h.buckets[bucket_of(2000)], h.buckets[bucket_of(50)]),
            (1000, 1)
        );
        // a read now has weight 1 again
        h.update(50_000, after);
        assert_eq!(h.buckets[bucket_of(50)], 2);
    }
}
