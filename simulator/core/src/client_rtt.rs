//! The client ↔ coordinator round trip as a measured distribution ([`crate::Cluster::with_client_rtt`]).
//!
//! Given as quantiles in ns at the equally spaced probabilities 0, 1/(n−1), …, 1 (n ≥ 2, non-decreasing). Each
//! request draws one round trip by the inverse CDF, interpolating linearly between neighbouring quantiles. The
//! draws are materialized per request before the replay, in request order, from their own stream of the seed
//! ([`STREAM_CLIENT_RTT`]): every policy replayed under one seed meets the same round trips (common random
//! numbers). The engine adds the draw to the request's reported latency in place of its two constant client hops;
//! nothing inside the engine (coordinator, servers, selectors) sees it.
use std::sync::Arc;

use crate::error::SimError;
use crate::rng::Rng;

/// Stream of the seed the round-trip draws come from.
pub const STREAM_CLIENT_RTT: u64 = 9;

/// Largest quantile accepted, ns (as `net_latency_ns`).
const MAX_NS: u64 = 1_000_000_000_000;

/// Checks a quantile list: at least 2 values, non-decreasing, each ≤ 1e12 ns. The error names `client_rtt_ns`.
pub fn validate(q: &[u64]) -> Result<(), SimError> {
    if q.len() < 2 {
        return Err(SimError::param(
            "client_rtt_ns",
            format!("{} quantiles", q.len()),
            "at least 2 quantiles (p0 and p100)",
        ));
    }
    if let Some(i) = q.windows(2).position(|w| w[1] < w[0]) {
        return Err(SimError::param(
            "client_rtt_ns",
            format!("[{}] = {} < [{}] = {}", i + 1, q[i + 1], i, q[i]),
            "non-decreasing quantiles",
        ));
    }
    if let Some(i) = q.iter().position(|&x| x > MAX_NS) {
        return Err(SimError::param(
            "client_rtt_ns",
            format!("[{i}] = {}", q[i]),
            "quantiles in 0..=1e12 ns",
        ));
    }
    Ok(())
}

/// The round trip at probability `u` in [0, 1): the quantiles' inverse CDF, linear between neighbours, rounded to
/// the nearest ns. `q` is valid ([`validate`]).
#[inline]
pub fn at(q: &[u64], u: f64) -> u64 {
    let pos = u * (q.len() - 1) as f64;
    let i = (pos.floor() as usize).min(q.len() - 2);
    let frac = pos - i as f64;
    q[i] + (frac * (q[i + 1] - q[i]) as f64).round() as u64
}

/// One round trip per request, in request order, from stream [`STREAM_CLIENT_RTT`] of `seed`.
pub fn draws(q: &Arc<[u64]>, requests: usize, seed: u64) -> Vec<u64> {
    let mut rng = Rng::new(seed, STREAM_CLIENT_RTT);
    (0..requests).map(|_| at(q, rng.uniform())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inverse_cdf_interpolates_between_the_quantiles() {
        let q = [1_000_000, 3_000_000, 3_000_000, 7_000_000];
        // probabilities 0, 1/3, 2/3, 1
        assert_eq!(at(&q, 0.0), 1_000_000);
        assert_eq!(at(&q, 1.0 / 6.0), 2_000_000);
        assert_eq!(at(&q, 0.5), 3_000_000);
        assert_eq!(at(&q, 5.0 / 6.0), 5_000_000);
        assert_eq!(at(&q, 0.999_999_9), 6_999_999);
        assert_eq!(at(&[5, 5], 0.73), 5);
    }

    #[test]
    fn draws_follow_the_stream_in_request_order() {
        let q: Arc<[u64]> = Arc::from(vec![1_000_000, 3_000_000]);
        let d = draws(&q, 5, 4);
        let mut rng = Rng::new(4, STREAM_CLIENT_RTT);
        let want: Vec<u64> = (0..5)
            .map(|_| 1_000_000 + (rng.uniform() * 2e6).round() as u64)
            .collect();
        assert_eq!(d, want);
        assert_eq!(draws(&q, 3, 4), d[..3]);
        assert!(d.iter().all(|&x| (1_000_000..=3_000_000).contains(&x)));
    }

    #[test]
    fn bad_quantiles_are_named() {
        for bad in [&[7][..], &[], &[3, 2], &[0, 2_000_000_000_000]] {
            let e = validate(bad).unwrap_err().to_string();
            assert!(e.contains("'client_rtt_ns'"), "{e}");
        }
        assert!(validate(&[0, 0]).is_ok());
    }
}
