//! The speculative-retry threshold as Cassandra 5.0.9 computes it, through whole replays: the coordinator's
//! forward-decayed `CoordinatorReadLatency` histogram (whole-second, rounded weights from the landmark), warmed
//! by a history of bucket counts, read by the periodic update. Hand-worked schedules replayed exactly.
mod common;

use common::{single_slot_cluster, MS};
use kvsim_core::decaying_histogram::{bucket_of, BUCKETS};
use kvsim_core::replica::SelectorConfig;
use kvsim_core::server_model::ServerModelConfig;
use kvsim_core::{replay, ReplayConfig, RunResult, Workload};

const S: u64 = 1_000_000_000;

/// One request of `Workload::from_parts`: its arrival and its opsets (group, the keys' demands).
type Request = (u64, Vec<(u32, Vec<u64>)>);

/// 3 single-slot servers, RF 2 (g0 → [0, 1], g1 → [1, 2]), no network latency, server 0 at 1/150 speed (a
/// 1 ms read takes 150 ms there). `stock` with `params` on top of: PERCENTILE at `pct`, Cassandra's rule (no
/// warm start), an initial threshold of 4 s (no retry of a 150 ms read), the first threshold update at 40 s;
/// `dynamic-snitch` without updates (every read goes to its group's primary); every coordinator's histogram
/// holding `history` 1 ms reads at time 0.
fn run(wl: &Workload, pct: f64, history: u64, params: &[(&str, f64)]) -> RunResult {
    let c = single_slot_cluster(3, 2, 0);
    assert_eq!((c.replicas(0), c.replicas(1)), (&[0, 1][..], &[1, 2][..]));
    let all: Vec<(String, f64)> = [
        ("spec_kind", 2.0),
        ("spec_percentile", pct),
        ("spec_warm", 0.0),
        ("spec_initial_ms", 4000.0),
        ("spec_refresh_first_ms", 40_000.0),
    ]
    .iter()
    .chain(params)
    .map(|(k, v)| (k.to_string(), *v))
    .collect();
    let mut latency_history = vec![0; BUCKETS];
    latency_history[bucket_of(1000)] = history;
    let cfg = ReplayConfig {
        servers: ServerModelConfig {
            speeds: vec![1.0 / 150.0, 1.0, 1.0],
            ..ServerModelConfig::default()
        },
        selector: SelectorConfig::build("dynamic-snitch", &[("update_ms".into(), 1e9)]).unwrap(),
        warmup: 0.0,
        seed: 0,
        latency_history: if history > 0 {
            latency_history
        } else {
            Vec::new()
        },
        ..ReplayConfig::build("stock", &all).unwrap()
    };
    replay(&c, wl, &cfg).unwrap()
}

/// The probe: a 1 ms read on g0 (the slow server 0) at 41 s. With a threshold T below 150 ms its retry on server
/// 1 answers at 41 s + T + 1 ms; above it, the original answers first, at 41.15 s.
fn probe() -> Request {
    (41 * S, vec![(0, vec![MS])])
}

#[test]
fn a_minute_of_history_dilutes_a_stall_and_per_query_samples_do_not() {
    // From 36 s (weight round(e^{36/86.56}) = 2): 60 one-key reads of 1 ms on g1
    // (server 1, every 2 ms from 36.0 s), and 20 stalled reads of 150 ms on g0 (server 0, every 152 ms from
    // 36.2 s, the last answered at 39.24 s). The update at 40 s divides by the weight then, 2.
    let mut parts: Vec<Request> = (0..60u64)
        .map(|i| (36 * S + 2 * i * MS, vec![(1, vec![MS])]))
        .collect();
    let slow = |j: u64| 36 * S + 200 * MS + 152 * j * MS;
    parts.extend((0..20u64).map(|j| (slow(j), vec![(0, vec![MS])])));
    parts.push(probe());
    let wl = Workload::from_parts(&parts, 1);
    // With 4,900 reads of 1 ms held at time 0 (weight 1): 1 ms bucket (4900 + 60 × 2) / 2 = 2510, 150 ms
    // bucket 40 / 2 = 20; p99 → ⌈0.99 × 2530⌉ = 2505 ≤ 2510 → 1.109 ms: the probe is retried at 41.001109 s,
    // answered at 41.002109 s.
    let warmed = run(&wl, 99.0, 4900, &[]);
    assert_eq!(warmed.latency_ns[80], 2_109_000);
    assert_eq!(warmed.latency_ns[60..80], [150 * MS; 20]);
    assert_eq!(warmed.copies.ops, 1);
    // Without the history: 60 and 20 → ⌈79.2⌉ = 80 → the 150 ms bucket (152.321 ms): the probe is not retried
    // before its own answer, 150 ms.
    let fresh = run(&wl, 99.0, 0, &[]);
    assert_eq!(fresh.latency_ns[80], 150 * MS);
    assert_eq!(fresh.copies.ops, 0);

    // The same stalled reads inside four-key `IN` queries (three 1 ms keys on g1 first, the stalled one on g0
    // last): unpaged, each query's 150 ms is sampled once per key, 80 samples → 1 ms bucket 2510, stalled 160 /
    // 2 = 80; ⌈0.99 × 2590⌉ = 2565 > 2510 → 152.321 ms: the probe waits for its own answer.
    let mut parts: Vec<Request> = (0..60u64)
        .map(|i| (36 * S + 2 * i * MS, vec![(1, vec![MS])]))
        .collect();
    parts.extend((0..20u64).map(|j| (slow(j), vec![(1, vec![MS, MS, MS]), (0, vec![MS])])));
    parts.push(probe());
    let wl = Workload::from_parts(&parts, 1);
    let per_query = run(&wl, 99.0, 4900, &[]);
    assert_eq!(per_query.latency_ns[60..80], [150 * MS; 20]);
    assert_eq!(per_query.latency_ns[80], 150 * MS);
    // Paged (`MultiPartitionPager`: one `readRegular` per partition, each its own sample): 60 more samples of
    // 1 ms and 20 of 150 ms → 1 ms bucket (4900 + 120 × 2) / 2 = 2570, stalled 20; ⌈0.99 × 2590⌉ = 2565 ≤ 2570 →
    // 1.109 ms again.
    let paged = run(&wl, 99.0, 4900, &[("paged", 1.0)]);
    assert_eq!(paged.latency_ns[60..80], [153 * MS; 20]);
    assert_eq!(paged.latency_ns[80], 2_109_000);
}

#[test]
fn a_sample_counts_whole_seconds_from_the_landmark() {
    // 98 reads of 1 ms held at time 0 (weight 1). One request of two 1 ms keys on
    // g0, sent at t0: server 0 serves them one after the other, so the query takes 300 ms and is sampled twice
    // (once per key) at t0 + 300 ms. The update at 40 s divides by round(e^{40/86.56}) = 2: the 1 ms bucket holds
    // 98 / 2 = 49; the 300 ms samples weigh 1 each when recorded 35.9 s after the landmark (35 whole seconds:
    // round(e^{35/86.56}) = round(1.498) = 1) — 2 / 2 = 1, a count of 50, p98 → ⌈49⌉ = 49 → 1.109 ms: the probe
    // is retried, 2.109 ms — and 2 each when recorded at 36.0 s — 4 / 2 = 2, a count of 51, p98 → ⌈49.98⌉ = 50 →
    // the 300 ms bucket: the probe waits for its own answer, 150 ms.
    let wl = |t0: u64| Workload::from_parts(&[(t0, vec![(0, vec![MS, MS])]), probe()], 1);
    let at_35_9 = run(&wl(35_600 * MS), 98.0, 98, &[]);
    assert_eq!(at_35_9.latency_ns, vec![300 * MS, 2_109_000]);
    let at_36 = run(&wl(35_700 * MS), 98.0, 98, &[]);
    assert_eq!(at_36.latency_ns, vec![300 * MS, 150 * MS]);
    // The landmark's phase: set 100 ms before the replay's time 0, the samples at 35.9 s are 36.0 s after it.
    let shifted = run(&wl(35_600 * MS), 98.0, 98, &[("spec_landmark_ms", 100.0)]);
    assert_eq!(shifted.latency_ns, vec![300 * MS, 150 * MS]);
}

#[test]
fn a_history_of_the_wrong_length_or_without_the_histogram_is_refused() {
    let c = single_slot_cluster(3, 2, 0);
    let wl = Workload::from_parts(&[probe()], 1);
    for (history, params) in [
        (vec![1; BUCKETS - 1], vec![]),
        (vec![1; BUCKETS], vec![("spec_histogram".to_string(), 0.0)]),
    ] {
        let cfg = ReplayConfig {
            latency_history: history,
            ..ReplayConfig::build("stock", &params).unwrap()
        };
        let e = replay(&c, &wl, &cfg).unwrap_err().to_string();
        assert!(e.contains("latency_history"), "{e}");
    }
    // with the overflow bucket: BUCKETS + 1 counts
    let cfg = ReplayConfig {
        latency_history: vec![0; BUCKETS + 1],
        ..ReplayConfig::build("stock", &[]).unwrap()
    };
    assert!(replay(&c, &wl, &cfg).is_ok());
}
