//! `stock` (Cassandra's coordinator speculative retry): hand-worked schedules replayed exactly.
mod common;

use common::{cluster, MS};
use kvsim_core::server_model::ServerModelConfig;
use kvsim_core::{replay, Cluster, ReplayConfig, RunResult, Workload};

/// `stock` with `speculative_retry` encoded as the Python layer does (kind, percentile, fixed ms) and extra
/// params; server 0 runs at `slow` speed.
fn run(c: &Cluster, wl: &Workload, slow: f64, params: &[(&str, f64)]) -> RunResult {
    common::run(c, wl, "stock", slow, params)
}

const NEVER: (&str, f64) = ("spec_kind", 0.0);
const ALWAYS: (&str, f64) = ("spec_kind", 1.0);

fn fixed(ms: f64) -> [(&'static str, f64); 2] {
    [("spec_kind", 3.0), ("spec_fixed_ms", ms)]
}

#[test]
fn one_slow_replica_and_a_50ms_retry() {
    // d = 0.5 ms. Server 0 runs at 1/100 speed: R0 (1 ms on g0) reaches it at 0.5 and would end at 100.5
    // (answer 101). `50ms`: at 50 the coordinator reads server 1: reaches it at 50.5, served 50.5–51.5,
    // answered at 52 → 52 ms; the extra read is served (real load) and wins.
    let c = cluster(MS / 2);
    let wl = Workload::from_parts(&[(0, vec![(0, vec![MS])])], 1);
    assert_eq!(run(&c, &wl, 0.01, &[NEVER]).latency_ns, vec![101 * MS]);
    let r = run(&c, &wl, 0.01, &fixed(50.0));
    assert_eq!(r.latency_ns, vec![52 * MS]);
    assert_eq!((r.copies.ops, r.copies.wins), (1, 1));
}

#[test]
fn always_doubles_the_reads() {
    let c = cluster(MS / 2);
    let parts: Vec<_> = (0..20u64)
        .map(|i| (i * 10 * MS, vec![(0, vec![MS, MS])]))
        .collect();
    let wl = Workload::from_parts(&parts, 1);
    let never = run(&c, &wl, 1.0, &[NEVER]);
    assert_eq!(never.copies.ops, 0);
    let always = run(&c, &wl, 1.0, &[ALWAYS]);
    assert_eq!(always.copies.ops, 40, "one extra read per read");
}

/// R0 at 0: 1 ms on g0 (→ slow server 0 at 1/8 speed: 8 ms); R1 at 20: 1 ms on g0 (→ server 1: 1 ms);
/// R2 at 40: 2 ms on g0 (→ server 0: 16 ms). d = 0.
fn three() -> Workload {
    Workload::from_parts(
        &[
            (0, vec![(0, vec![MS])]),
            (20 * MS, vec![(0, vec![MS])]),
            (40 * MS, vec![(0, vec![2 * MS])]),
        ],
        1,
    )
}

fn hybrid(kind: f64, ms: f64, warm: f64) -> Vec<(&'static str, f64)> {
    vec![
        ("spec_kind", kind),
        ("spec_percentile", 99.0),
        ("spec_fixed_ms", ms),
        ("spec_warm", warm),
        // the exact window of samples: the hand-worked times below are the samples themselves
        ("spec_histogram", 0.0),
    ]
}

#[test]
fn percentile_min_max_and_the_warm_start() {
    let c = cluster(0);
    assert_eq!(
        run(&c, &three(), 0.125, &[NEVER]).latency_ns,
        vec![8 * MS, MS, 16 * MS]
    );
    // 99p, warm start (no warm-up cut: at the first sample): R0 runs under the initial threshold (half the 5 s read timeout: no
    // retry); its 8 ms sets the threshold to 8 ms. R1 (1 ms) is answered first. R2: retry at 48 on server 1,
    // 2 ms → 10 ms.
    let p99 = run(&c, &three(), 0.125, &hybrid(2.0, 0.0, 1.0));
    assert_eq!(p99.latency_ns, vec![8 * MS, MS, 10 * MS]);
    // MIN(99p,5ms) takes the smaller: retry at 45 → 7 ms.
    let min = run(&c, &three(), 0.125, &hybrid(4.0, 5.0, 1.0));
    assert_eq!(min.latency_ns, vec![8 * MS, MS, 7 * MS]);
    // MAX(99p,5ms): the larger, 8 ms → as 99p.
    assert_eq!(
        run(&c, &three(), 0.125, &hybrid(5.0, 5.0, 1.0)).latency_ns,
        p99.latency_ns
    );
    // MAX(99p,100000ms): above the read timeout → never speculates, ≡ NEVER.
    let max_huge = run(&c, &three(), 0.125, &hybrid(5.0, 100000.0, 1.0));
    assert_eq!(max_huge.latency_ns, vec![8 * MS, MS, 16 * MS]);
    assert_eq!(max_huge.copies.ops, 0);
    // Cassandra's rule as it is (no warm start): the threshold stays at half the read timeout until the first
    // update, one read timeout (5 s) in → no retry in this replay.
    let cold = run(&c, &three(), 0.125, &hybrid(2.0, 0.0, 0.0));
    assert_eq!(cold.latency_ns, vec![8 * MS, MS, 16 * MS]);
    // ... starting from a running coordinator's threshold of 3 ms instead (`spec_initial_ms`): R0 retried at 3 on
    // server 1 (1 ms) → 4 ms; R1 (1 ms) answered first; R2 retried at 43 on server 1 (2 ms) → 5 ms.
    let running = run(
        &c,
        &three(),
        0.125,
        &[&hybrid(2.0, 0.0, 0.0)[..], &[("spec_initial_ms", 3.0)]].concat(),
    );
    assert_eq!(running.latency_ns, vec![4 * MS, MS, 5 * MS]);
    assert_eq!(running.copies.ops, 2);
    // ... with a 10 ms update period instead: R0's answer (8 ms) comes before the first update; R1's answer
    // (21 ms) triggers it over {8, 1}: nearest rank ceil(0.99 × 2) = 2 → 8 ms → R2 as with the warm start.
    let periodic = run(
        &c,
        &three(),
        0.125,
        &[&hybrid(2.0, 0.0, 0.0)[..], &[("spec_refresh_ms", 10.0)]].concat(),
    );
    assert_eq!(periodic.latency_ns, p99.latency_ns);
    // Cassandra's decaying histogram: R0's 8 ms lands in the bucket up to 8239 µs, whose upper offset is the
    // threshold → R2 retried at 48.239 → 10.239 ms.
    let hist = run(
        &c,
        &three(),
        0.125,
        &[
            ("spec_kind", 2.0),
            ("spec_percentile", 99.0),
            ("spec_warm", 1.0),
            ("spec_histogram", 1.0),
        ],
    );
    assert_eq!(hist.latency_ns, vec![8 * MS, MS, 10 * MS + 239_000]);
}

#[test]
fn a_fixed_threshold_above_the_read_timeout_never_speculates() {
    let c = cluster(0);
    let r = run(&c, &three(), 0.125, &[fixed(6000.0)[0], fixed(6000.0)[1]]);
    assert_eq!(r.latency_ns, vec![8 * MS, MS, 16 * MS]);
    assert_eq!(r.copies.ops, 0);
}

#[test]
fn speculative_retry_pays_under_stalls_and_the_extra_reads_are_load() {
    use kvsim_core::server_model::Stalls;
    // 6 servers × 2 slots, RF 3, 200 µs reads at ~40% load, every server stalls once a second for 30 ms.
    let c = common::busy_cluster();
    let mut parts = Vec::new();
    let mut x: u64 = 11;
    for r in 0..20_000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        parts.push((
            r * 40_000,
            vec![(((x >> 33) % c.groups() as u64) as u32, vec![200_000])],
        ));
    }
    let wl = Workload::from_parts(&parts, 2);
    let go = |params: &[(&str, f64)]| {
        let params: Vec<(String, f64)> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        let cfg = ReplayConfig {
            servers: ServerModelConfig {
                stalls: Some(Stalls {
                    rate_per_s: 1.0,
                    duration_ns: 30 * MS,
                }),
                ..ServerModelConfig::default()
            },
            seed: 3,
            ..ReplayConfig::build("stock", &params).unwrap()
        };
        replay(&c, &wl, &cfg).unwrap()
    };
    let never = go(&[NEVER]);
    let fixed5 = go(&fixed(5.0));
    let p99 = go(&[]);
    assert!(
        never.summary.p99_ms > 10.0,
        "stalls make the tail: {}",
        never.summary.p99_ms
    );
    assert!(
        fixed5.summary.p99_ms < never.summary.p99_ms / 2.0,
        "{} vs {}",
        fixed5.summary.p99_ms,
        never.summary.p99_ms
    );
    assert!(p99.summary.p99_ms <= never.summary.p99_ms);
    assert!(fixed5.copies.ops > 0 && fixed5.summary.utilization > never.summary.utilization);
}

#[test]
fn the_warm_start_is_the_end_of_the_warm_up_cut() {
    let c = cluster(0);
    let go = |warmup: f64| {
        let params: Vec<(String, f64)> = vec![
            ("spec_kind".into(), 2.0),
            ("spec_warm".into(), 1.0),
            ("spec_histogram".into(), 0.0),
        ];
        let cfg = ReplayConfig {
            servers: ServerModelConfig {
                speeds: vec![0.125, 1.0, 1.0],
                ..ServerModelConfig::default()
            },
            warmup,
            seed: 0,
            ..ReplayConfig::build("stock", &params).unwrap()
        };
        replay(&c, &three(), &cfg).unwrap().latency_ns
    };
    // warm-up 0.5 of 3 requests: the first measured request is R1 (arrives at 20). R0's answer (8) comes
    // before it: no recomputation; R1's answer (21) recomputes over {8, 1} → 8 ms → R2 retried at 48 → 10 ms.
    assert_eq!(go(0.5), vec![8 * MS, MS, 10 * MS]);
    // warm-up 0.7: the first measured request is R2 (arrives at 40): every answer before it is too early and
    // R2's own answer (56) comes after its send → no retry.
    assert_eq!(go(0.7), vec![8 * MS, MS, 16 * MS]);
}
