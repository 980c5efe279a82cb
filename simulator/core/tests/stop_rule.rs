//! The stop rule: a replay stops as soon as a quantile of its measured latencies is certainly above a bound,
//! and what it completed by then is exactly what the whole replay gives them.
mod common;

use kvsim_core::{replay, Cluster, PolicyConfig, ReplayConfig, StopRule, Workload};

use common::MS;

/// One single-slot server at 1 op/ms, no network latency.
fn one_server() -> Cluster {
    common::single_slot_cluster(1, 1, 0)
}

/// Ten one-op requests at t = 0 on the one server: FIFO serves them in order, latencies 1, 2, ..., 10 ms.
fn ten() -> Workload {
    Workload::from_parts(&vec![(0, vec![(0, vec![MS])]); 10], 1)
}

fn run(warmup: f64, stop: Option<(f64, u64)>) -> kvsim_core::RunResult {
    let rc = ReplayConfig {
        warmup,
        stop: stop.map(|(quantile, above_ns)| StopRule { quantile, above_ns }),
        ..ReplayConfig::new(PolicyConfig::build("fifo", &[]).unwrap())
    };
    replay(&one_server(), &ten(), &rc).unwrap()
}

#[test]
fn the_count_that_settles_a_quantile() {
    let rule = StopRule {
        quantile: 0.5,
        above_ns: 0,
    };
    // 10 measured: the median interpolates from the 5th smallest (index ⌊0.5 · 9⌋ = 4): 6 above settle it.
    assert_eq!(rule.requests_above(10, 0.0), 6);
    // warm-up 0.2: 8 measured, index ⌊0.5 · 7⌋ = 3: 5 above.
    assert_eq!(rule.requests_above(10, 0.2), 5);
    let p99 = StopRule {
        quantile: 0.99,
        above_ns: 0,
    };
    // 1,000 measured: index ⌊0.99 · 999⌋ = 989: 11 above.
    assert_eq!(p99.requests_above(1000, 0.0), 11);
}

#[test]
fn stops_when_the_sixth_request_above_completes() {
    // Above 3.5 ms: 4, 5, 6, 7, 8, 9 ms are the six; the 10 ms request is never completed.
    let r = run(0.0, Some((0.5, 3 * MS + MS / 2)));
    assert!(r.stopped);
    assert_eq!(r.latency_ns[8], 9 * MS);
    assert_eq!(r.latency_ns[9], 0);
    // the summary is over the nine completed: median 5 ms
    assert_eq!(r.summary.measured, 9);
    assert_eq!(r.summary.p50_ms, 5.0);
    let whole = run(0.0, None);
    assert!(!whole.stopped);
    assert_eq!(whole.summary.p50_ms, 5.5);
    assert_eq!(&whole.latency_ns[..9], &r.latency_ns[..9]);
    assert!(r.events < whole.events);
}

#[test]
fn does_not_stop_at_a_median_equal_to_the_bound() {
    // The median of 1..10 ms is 5.5 ms: not above 5.5 ms (5 above it, 6 needed).
    let r = run(0.0, Some((0.5, 5 * MS + MS / 2)));
    assert!(!r.stopped);
    assert_eq!(r.summary.p50_ms, 5.5);
    assert_eq!(r.latency_ns, run(0.0, None).latency_ns);
}

#[test]
fn counts_only_measured_requests() {
    // warm-up 0.2 leaves out the 1 and 2 ms requests: measured 3..10 ms, median 6.5 ms. Above 6.5 ms: four
    // (7..10), five needed; above 5.5 ms: five, the last completing at the end.
    let r = run(0.2, Some((0.5, 6 * MS + MS / 2)));
    assert!(!r.stopped);
    assert_eq!(r.summary.p50_ms, 6.5);
    let r = run(0.2, Some((0.5, 5 * MS + MS / 2)));
    assert!(r.stopped);
    assert_eq!(r.summary.p50_ms, 6.5);
}

#[test]
fn a_quantile_outside_0_1_is_refused() {
    let rc = ReplayConfig {
        stop: Some(StopRule {
            quantile: 1.0,
            above_ns: MS,
        }),
        ..ReplayConfig::default()
    };
    let err = replay(&one_server(), &ten(), &rc).unwrap_err();
    assert!(err.to_string().contains("stop quantile"), "{err}");
}
