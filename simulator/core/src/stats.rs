//! Latency summary: percentiles with a warm-up cut, utilization, per-server offered load, steady-state flag.

/// Percentile of sorted values with linear interpolation between closest ranks (numpy's default).
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// A run's summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub mean_ms: f64,
    /// Requests counted after the warm-up cut.
    pub measured: usize,
    /// Total demand / (servers × slots × arrival span).
    pub utilization: f64,
    /// Demand offered to each server / (slots × arrival span).
    pub server_load: Vec<f64>,
    pub server_load_max: f64,
    /// Mean latency of the second half of the measured requests / that of the first half.
    pub half_ratio: f64,
    pub steady_state: bool,
}

/// A run is out of steady state when some server is offered ≥ this fraction of its capacity …
pub const OVERLOAD: f64 = 1.0;
/// … or when the second half's mean latency exceeds the first half's by this factor.
pub const HALF_RATIO_LIMIT: f64 = 1.5;

/// `percentile_sorted(sorted(values), q)` without sorting: a selection per rank (O(n) each instead of
/// O(n log n) once; `values` is reordered).
pub fn percentile_select(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let n = values.len();
    let pos = q * (n - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    let (_, &mut at_lo, right) = values.select_nth_unstable_by(lo, |a, b| a.total_cmp(b));
    // Everything right of `lo` is ≥ it in the total order: the next rank is their least.
    let at_hi = if hi == lo {
        at_lo
    } else {
        right.iter().copied().fold(f64::INFINITY, f64::min)
    };
    at_lo + (at_hi - at_lo) * (pos - lo as f64)
}

pub fn summarize(
    latency_ns: &[u64],
    warmup: f64,
    server_demand_ns: &[u64],
    slots: u32,
    span_ns: u64,
) -> Summary {
    let n = latency_ns.len();
    let cut = ((warmup * n as f64).floor() as usize).min(n.saturating_sub(1));
    let measured: Vec<f64> = latency_ns[cut..].iter().map(|&l| l as f64 / 1e6).collect();
    let mean = |v: &[f64]| {
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let half = measured.len() / 2;
    let (m1, m2) = (mean(&measured[..half]), mean(&measured[half..]));
    let half_ratio = if half > 0 && m1 > 0.0 { m2 / m1 } else { 1.0 };
    let mut scratch = measured.clone();
    let span = span_ns as f64;
    let server_load: Vec<f64> = server_demand_ns
        .iter()
        .map(|&d| {
            if span > 0.0 {
                d as f64 / (slots as f64 * span)
            } else {
                0.0
            }
        })
        .collect();
    let total: f64 = server_demand_ns.iter().map(|&d| d as f64).sum();
    let utilization = if span > 0.0 {
        total / (server_demand_ns.len() as f64 * slots as f64 * span)
    } else {
        0.0
    };
    let server_load_max = server_load.iter().cloned().fold(0.0, f64::max);
    Summary {
        p50_ms: percentile_select(&mut scratch, 0.50),
        p95_ms: percentile_select(&mut scratch, 0.95),
        p99_ms: percentile_select(&mut scratch, 0.99),
        p999_ms: percentile_select(&mut scratch, 0.999),
        mean_ms: mean(&measured),
        measured: measured.len(),
        utilization,
        server_load,
        server_load_max,
        half_ratio,
        steady_state: server_load_max < OVERLOAD && half_ratio <= HALF_RATIO_LIMIT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_like_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile_sorted(&v, 0.5), 2.5);
        assert_eq!(percentile_sorted(&v, 1.0), 4.0);
        assert!((percentile_sorted(&v, 0.95) - 3.85).abs() < 1e-12);
    }

    #[test]
    fn selected_percentiles_equal_the_sorted_ones() {
        let mut rng = crate::rng::Rng::new(11, 2);
        for n in [1usize, 2, 3, 10, 101, 1000, 4097] {
            // latencies in ms as the engine makes them; many ties in the larger sets
            let range = if n > 100 { 50 } else { 1_000_000 };
            let v: Vec<f64> = (0..n)
                .map(|_| (rng.below(range) * 1000) as f64 / 1e6)
                .collect();
            let mut sorted = v.clone();
            sorted.sort_unstable_by(|a, b| a.total_cmp(b));
            let mut scratch = v.clone();
            for q in [0.0, 0.5, 0.95, 0.99, 0.999, 1.0] {
                let want = percentile_sorted(&sorted, q);
                assert_eq!(
                    percentile_select(&mut scratch, q).to_bits(),
                    want.to_bits(),
                    "n {n} q {q}"
                );
            }
        }
    }

    #[test]
    fn warmup_cut_and_steady_state() {
        // 10 requests, warm-up 20% drops the first two; loads 0.5 and 1.25.
        let lat: Vec<u64> = (1..=10).map(|i| i * 1_000_000).collect();
        let s = summarize(&lat, 0.2, &[1000, 2500], 2, 1000);
        assert_eq!(s.measured, 8);
        assert_eq!(s.mean_ms, 6.5);
        assert_eq!(s.server_load, vec![0.5, 1.25]);
        assert_eq!(s.utilization, 0.875);
        assert!(!s.steady_state);
        // second half (7..10 ms, mean 8.5) vs first (3..6, mean 4.5): ratio 1.89 > 1.5 → not steady either.
        assert!((s.half_ratio - 8.5 / 4.5).abs() < 1e-12);
    }
}
