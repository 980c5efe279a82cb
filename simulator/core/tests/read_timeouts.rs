//! Read timeouts (`drop_expired`): a replica drops a read whose message outlived the read timeout, the coordinator
//! answers a request unanswered by its deadline with a timeout. Hand-worked schedules replayed exactly, and the
//! bounds that make a storm finite.
mod common;

use common::{cluster, run, MS};
use kvsim_core::server_model::ServerModelConfig;
use kvsim_core::{replay, ReplayConfig, Workload};

/// d = 0.5 ms, server 0 at 1/100 speed (a 1 ms read takes 100 ms there), round-robin replicas over g0 = [0, 1]:
/// R0 at 0 → server 0, R1 at 1 → server 1, R2 at 2 → server 0 (queued behind R0).
fn three_reads() -> Workload {
    Workload::from_parts(
        &[
            (0, vec![(0, vec![MS])]),
            (MS, vec![(0, vec![MS])]),
            (2 * MS, vec![(0, vec![MS])]),
        ],
        1,
    )
}

#[test]
fn an_expired_read_is_dropped_and_its_request_times_out() {
    let c = cluster(MS / 2);
    let wl = three_reads();
    // Every read served: R0 0.5–100.5 (answer 101); R1 1.5–2.5 (3 → 2 ms); R2 100.5–200.5 (201 → 199 ms).
    let all = run(&c, &wl, "fifo", 0.01, &[("drop_expired", 0.0)]);
    assert_eq!(all.latency_ns, vec![101 * MS, 2 * MS, 199 * MS]);
    assert!(!all.timeouts.on);
    // Read timeout 20 ms. R0 starts at 0.5, before its expiry (sent 0, expires 20): served whole, answered at
    // 101, past its deadline (20): a timeout, latency 20. R2 (sent 2, expires 22) reaches the front at 100.5:
    // dropped unserved, a timeout: latency 20. Server 0 serves one read.
    let r = run(
        &c,
        &wl,
        "fifo",
        0.01,
        &[("drop_expired", 1.0), ("read_timeout_ms", 20.0)],
    );
    assert_eq!(r.latency_ns, vec![20 * MS, 2 * MS, 20 * MS]);
    assert!(r.timeouts.on);
    assert_eq!((r.timeouts.requests, r.timeouts.dropped_reads), (2, 1));
    assert_eq!(r.served_ops, 2);
}

#[test]
fn a_speculative_read_answers_before_the_original_is_dropped() {
    // speculative_retry = 10ms, read timeout 20 ms. R0: retried at 10 on server 1 (10.5–11.5, answered at 12) →
    // 12 ms; its original at server 0 is served (started at 0.5), the late answer ignored. R1: 2 ms, no retry.
    // R2: retried at 12 on server 1 (12.5–13.5, 14) → 12 ms; its original reaches the front of server 0 at
    // 100.5, expired: dropped, but its op was answered, so no timeout.
    let c = cluster(MS / 2);
    let r = run(
        &c,
        &three_reads(),
        "fifo",
        0.01,
        &[
            ("spec_kind", 3.0),
            ("spec_fixed_ms", 10.0),
            ("read_timeout_ms", 20.0),
        ],
    );
    assert_eq!(r.latency_ns, vec![12 * MS, 2 * MS, 12 * MS]);
    assert_eq!((r.timeouts.requests, r.timeouts.dropped_reads), (0, 1));
    assert_eq!((r.copies.ops, r.copies.wins), (2, 2));
    // R0's original and R1 and the two retries
    assert_eq!(r.served_ops, 4);
}

#[test]
fn a_coordinator_retry_expires_with_its_request() {
    // speculative_retry = 5ms, read timeout 10 ms. R0 at 0 → server 0 (1/100 speed: 0.5–100.5). R1 at 1 →
    // server 1, an 8.8 ms read: 1.5–10.3, answered at 10.8 (9.8 ms, in time). R0's retry leaves at 5 for server
    // 1, queued behind R1 from 5.5; its turn comes at 10.3. Its message carries R0's start (`createdAtNanos` =
    // `requestTime.startedAtNanos()`), so it expired at 0 + 10: dropped unserved, and R0 (unanswered) times out
    // then. (Timed from the retry's own send it would expire at 15, be served 10.3–11.3 and answer R0 after its
    // deadline: a timeout as well, but one more read served and one fewer dropped.) R1's own retry leaves at 6
    // for server 0, behind R0's original until 100.5: dropped there (expired at 1 + 10).
    let c = cluster(MS / 2);
    let wl = Workload::from_parts(
        &[
            (0, vec![(0, vec![MS])]),
            (MS, vec![(0, vec![8_800_000])]),
        ],
        1,
    );
    let r = run(
        &c,
        &wl,
        "stock",
        0.01,
        &[
            ("spec_kind", 3.0),
            ("spec_fixed_ms", 5.0),
            ("read_timeout_ms", 10.0),
        ],
    );
    assert_eq!(r.latency_ns, vec![10 * MS, 9_800_000]);
    assert_eq!((r.timeouts.requests, r.timeouts.dropped_reads), (1, 2));
    assert_eq!((r.copies.ops, r.copies.wins), (2, 0));
    // R0's original (started in time, served whole) and R1
    assert_eq!(r.served_ops, 2);
}

#[test]
fn any_coordinator_parameter_makes_a_patched_node_time_out_and_stock_does_by_default() {
    let c = cluster(MS / 2);
    let wl = three_reads();
    for (policy, params) in [
        ("rein", vec![("spec_kind", 0.0), ("read_timeout_ms", 20.0)]),
        ("stock", vec![("spec_kind", 0.0), ("read_timeout_ms", 20.0)]),
    ] {
        let r = run(&c, &wl, policy, 0.01, &params);
        assert!(r.timeouts.on, "{policy}");
        assert!(
            r.latency_ns.iter().all(|&l| l <= 20 * MS),
            "{policy}: {:?}",
            r.latency_ns
        );
    }
    // without coordinator parameters a patched policy is the papers' model: every read served
    let r = run(&c, &wl, "rein", 0.01, &[]);
    assert!(!r.timeouts.on);
    assert_eq!(r.latency_ns[2], 199 * MS);
}

#[test]
fn an_overloaded_cluster_is_bounded_by_the_read_timeout() {
    // 2000 single reads, one every 0.5 ms, over three servers at half speed (2 ms a read): offered 4/3 of their
    // capacity, a backlog growing by 1/3 ms a ms (≈ 330 ms by the end). Without timeouts the queues, and the latencies, grow without bound; with
    // them every latency is at most the read timeout and no read starts after its expiry.
    let c = cluster(MS / 2);
    let parts: Vec<_> = (0..2000u64)
        .map(|i| (i * MS / 2, vec![((i % 3) as u32, vec![MS])]))
        .collect();
    let wl = Workload::from_parts(&parts, 1);
    let build = |drop: f64| ReplayConfig {
        servers: ServerModelConfig {
            speeds: vec![0.5; 3],
            ..ServerModelConfig::default()
        },
        warmup: 0.0,
        record_ops: true,
        ..ReplayConfig::build(
            "fifo",
            &[
                ("drop_expired".to_string(), drop),
                ("read_timeout_ms".to_string(), 50.0),
            ],
        )
        .unwrap()
    };
    let unbounded = replay(&c, &wl, &build(0.0)).unwrap();
    assert!(*unbounded.latency_ns.iter().max().unwrap() > 200 * MS);
    let r = replay(&c, &wl, &build(1.0)).unwrap();
    assert!(r.latency_ns.iter().all(|&l| l <= 50 * MS));
    assert!(r.timeouts.dropped_reads > 0);
    assert_eq!(r.served_ops + r.timeouts.dropped_reads, 2000);
    assert!(r.timeouts.requests >= r.timeouts.dropped_reads);
    let rec = r.records.as_ref().unwrap();
    for i in 0..2000 {
        if rec.end[i] > 0 {
            // started no later than its expiry: sent at enqueue − d, expires 50 ms later
            assert!(rec.start[i] + MS / 2 <= rec.enqueue[i] + 50 * MS, "op {i}");
        }
    }
}
