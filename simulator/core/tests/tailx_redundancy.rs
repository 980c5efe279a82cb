//! TailX, duplication and speculative retry: hand-worked schedules replayed exactly.
use kvsim_core::{
    replay, Cluster, ClusterConfig, PolicyConfig, ReplayConfig, SizeClasses, Workload,
};

const MS: u64 = 1_000_000;

fn cluster(servers: u32, replication: u32, net_latency_ns: u64) -> Cluster {
    Cluster::new(ClusterConfig {
        servers,
        slots: 1,
        replication,
        vnodes: 1,
        service_rate: 1000.0,
        net_latency_ns,
        clients: 1,
    })
    .unwrap()
}

/// `policy` with round-robin replicas, no warm-up cut, per-op records; `large` = per-op size classes (exact).
fn config(policy: &str, params: &[(&str, f64)], large: &[bool]) -> ReplayConfig {
    let params: Vec<(String, f64)> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    ReplayConfig {
        sizes: SizeClasses {
            large_est: large.to_vec(),
            large_true: large.to_vec(),
        },
        warmup: 0.0,
        record_ops: true,
        seed: 1,
        ..ReplayConfig::new(PolicyConfig::build(policy, &params).unwrap())
    }
}

fn run_ms(
    c: &Cluster,
    wl: &Workload,
    policy: &str,
    params: &[(&str, f64)],
    large: &[bool],
) -> Vec<u64> {
    let r = replay(c, wl, &config(policy, params, large)).unwrap();
    r.latency_ns.iter().map(|l| l / MS).collect()
}

/// TailX Fig. 2: Srv1 holds A B, Srv2 C D, Srv3 E F G H I; D is large (5 units), the rest 1 unit.
/// mget(A,B,C), mget(D,E), mget(F,G), mget(H,I) at t = 0 in this order. Ops: A B C D E F G H I.
fn tailx_fig2() -> Workload {
    Workload::from_parts(
        &[
            (0, vec![(0, vec![MS, MS]), (1, vec![MS])]),
            (0, vec![(1, vec![5 * MS]), (2, vec![MS])]),
            (0, vec![(2, vec![MS, MS])]),
            (0, vec![(2, vec![MS, MS])]),
        ],
        1,
    )
}

const D_LARGE: [bool; 9] = [false, false, false, true, false, false, false, false, false];

#[test]
fn tailx_fig2_paper_schedule() {
    // Right of Fig. 2: E (allowance 5 − 1 = 4) is procrastinated behind F G H I: 2, 6, 2, 4 — average 3.5.
    // TL = 5 ms, TS = 1 ms derived from the demand model (mean demand of the large / small ops).
    let c = cluster(3, 1, 0);
    let l = run_ms(&c, &tailx_fig2(), "tailx", &[], &D_LARGE);
    assert_eq!(l, vec![2, 6, 2, 4]);
    assert_eq!(l.iter().sum::<u64>() as f64 / 4.0, 3.5);
    // Same with TL / TS given explicitly.
    let l = run_ms(
        &c,
        &tailx_fig2(),
        "tailx",
        &[("tl_ms", 5.0), ("ts_ms", 1.0)],
        &D_LARGE,
    );
    assert_eq!(l, vec![2, 6, 2, 4]);
}

#[test]
fn tailx_literal_algorithm_1_delays_c_too() {
    // min_allowance = 0: C (allowance 1) is also procrastinated, D takes Srv2 first: C ends at 6, E at 5.
    let c = cluster(3, 1, 0);
    let l = run_ms(
        &c,
        &tailx_fig2(),
        "tailx",
        &[("min_allowance", 0.0)],
        &D_LARGE,
    );
    assert_eq!(l, vec![6, 5, 2, 4]);
}

#[test]
fn tailx_without_the_filter_is_size_oblivious() {
    // No key flagged large: D looks like a 1-op opset, no allowance anywhere (every opset of 1–2 ops with
    // allowance ≤ own cost) → FIFO's schedule 2, 6, 3, 5.
    let c = cluster(3, 1, 0);
    assert_eq!(
        run_ms(
            &c,
            &tailx_fig2(),
            "tailx",
            &[("tl_ms", 5.0), ("ts_ms", 1.0)],
            &[]
        ),
        vec![2, 6, 3, 5]
    );
}

#[test]
fn tailx_delay_adds_to_network_hops_and_reports_values_used() {
    // d = 0.5 ms each way: E leaves the client at 4, reaches Srv3 at 4.5 (after F G H I, done at 4.5), ends at
    // 5.5, answer at 6 = mget(D,E) = max(D: 0.5 + 1 + 5 + 0.5 = 7, 6) = 7.
    let c = cluster(3, 1, MS / 2);
    let r = replay(&c, &tailx_fig2(), &config("tailx", &[], &D_LARGE)).unwrap();
    let rec = r.records.as_ref().unwrap();
    assert_eq!(rec.enqueue[4], 4 * MS + MS / 2);
    assert_eq!(rec.start[4], 4 * MS + MS / 2);
    assert_eq!(r.latency_ns, vec![3 * MS, 7 * MS, 3 * MS, 5 * MS]);
    let p: std::collections::HashMap<_, _> = r.params.iter().copied().collect();
    assert_eq!(
        (p["tl_ms"], p["ts_ms"], p["allowance_scale"]),
        (5.0, 1.0, 1.0)
    );
}

fn run_full(
    c: &Cluster,
    wl: &Workload,
    policy: &str,
    params: &[(&str, f64)],
) -> kvsim_core::RunResult {
    let mut cfg = config(policy, params, &[]);
    cfg.seed = 0;
    replay(c, wl, &cfg).unwrap()
}

/// 3 single-slot servers, RF 2: g0 → [0, 1], g1 → [1, 2], g2 → [2, 0]; round-robin per (client, group).
/// R0 at 0: 10 ms on g1 (→ Srv1); R1 at 1: 1 ms on g0 (→ Srv0); R2 at 2: 1 ms on g1 (→ Srv2).
fn three_requests() -> Workload {
    Workload::from_parts(
        &[
            (0, vec![(1, vec![10 * MS])]),
            (MS, vec![(0, vec![MS])]),
            (2 * MS, vec![(1, vec![MS])]),
        ],
        1,
    )
}

#[test]
fn duplicate_hand_worked_loser_not_cancelled() {
    let c = cluster(3, 2, 0);
    assert_eq!(
        run_full(&c, &three_requests(), "fifo", &[]).latency_ns,
        vec![10 * MS, MS, MS]
    );
    // Copies to the next replica: R0 runs 0–10 on Srv1 and Srv2; R1 1–2 on Srv0 (its copy waits at Srv1);
    // R2 waits behind R0 on both: Srv2 serves it 10–11 (first answer), Srv1 serves R1's losing copy 10–11 and
    // R2's 11–12. R2: 9 ms instead of 1 — duplication doubled the load.
    let r = run_full(&c, &three_requests(), "duplicate", &[]);
    assert_eq!(r.latency_ns, vec![10 * MS, MS, 9 * MS]);
    assert_eq!(r.copies.ops, 3);
    // The losers consumed capacity: busy time 2 × 12 ms over 3 servers × span 2 ms.
    let busy: f64 = 24.0;
    assert!(
        (r.summary.utilization - busy / (3.0 * 2.0)).abs() < 1e-9,
        "{}",
        r.summary.utilization
    );
}

/// R0 at 0: 10 ms on g1 (→ Srv1); R1 at 0.5: 5 ms on g0 (→ Srv0); R2 at 1: 1 ms on g0 (→ Srv1, behind R0).
fn busy_primary() -> Workload {
    Workload::from_parts(
        &[
            (0, vec![(1, vec![10 * MS])]),
            (MS / 2, vec![(0, vec![5 * MS])]),
            (MS, vec![(0, vec![MS])]),
        ],
        1,
    )
}

#[test]
fn speculative_hand_worked_fixed_timeout() {
    let c = cluster(3, 2, 0);
    assert_eq!(
        run_full(&c, &busy_primary(), "fifo", &[]).latency_ns,
        vec![10 * MS, 5 * MS, 10 * MS]
    );
    // timeout 3 ms: R0 re-issued at 3 to Srv2 (3–13, loses to the original at 10); R1 re-issued at 3.5 to Srv1
    // (loses); R2 re-issued at 4 to Srv0, served 5.5–6.5 after R1: first answer → 5.5 ms; its original still
    // runs 10–11 on Srv1, then R1's copy 11–16.
    let r = run_full(&c, &busy_primary(), "speculative", &[("timeout_ms", 3.0)]);
    assert_eq!(r.latency_ns, vec![10 * MS, 5 * MS, 5 * MS + MS / 2]);
    assert_eq!((r.copies.ops, r.copies.wins), (3, 1));
    // A timeout longer than every response: no copy, fifo's schedule.
    let r = run_full(&c, &busy_primary(), "speculative", &[("timeout_ms", 20.0)]);
    assert_eq!(r.latency_ns, vec![10 * MS, 5 * MS, 10 * MS]);
    assert_eq!(r.copies.ops, 0);
}

#[test]
fn speculative_learns_its_timeout_from_observed_opsets() {
    // min_samples 1, p100: R0 (sent before any observation) is never re-issued; once its answer arrives at 10
    // the client's timeout is 10 ms (the p100 of {10 ms}).
    let c = cluster(3, 2, 0);
    let wl = Workload::from_parts(
        &[
            (0, vec![(1, vec![10 * MS])]),
            (11 * MS, vec![(1, vec![30 * MS])]),
            (12 * MS, vec![(1, vec![MS])]),
        ],
        1,
    );
    // R1 (t 11, timeout 10 → check at 21) on Srv2 (second g1 choice) runs 11–41: re-issued to Srv1 at 21, runs
    // 21–51, loses. R2 (t 12) on Srv1 runs 12–13, answered before its check at 22.
    let r = run_full(
        &c,
        &wl,
        "speculative",
        &[("percentile", 100.0), ("min_samples", 1.0)],
    );
    assert_eq!(r.latency_ns, vec![10 * MS, 30 * MS, MS]);
    assert_eq!((r.copies.ops, r.copies.wins), (1, 0));
    let err = replay(&cluster(3, 1, 0), &wl, &config("duplicate", &[], &[])).unwrap_err();
    assert!(err.to_string().contains("replication"), "{err}");
}

#[test]
fn redundancy_serves_every_op_once_and_copies_only_add_load() {
    let c = Cluster::new(ClusterConfig {
        servers: 6,
        slots: 2,
        replication: 3,
        vnodes: 4,
        service_rate: 1000.0,
        net_latency_ns: 50_000,
        clients: 3,
    })
    .unwrap();
    let mut parts = Vec::new();
    let mut x: u64 = 7;
    for r in 0..400u64 {
        let mut opsets = Vec::new();
        for k in 0..(1 + r % 4) {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            opsets.push((
                ((x >> 33) % c.groups() as u64) as u32,
                vec![MS / 2 + (x >> 40) % MS; 1 + k as usize],
            ));
        }
        parts.push((r * 400_000, opsets));
    }
    let wl = Workload::from_parts(&parts, 3);
    let fifo = run_full(&c, &wl, "fifo", &[]);
    for (p, params) in [
        ("duplicate", vec![]),
        ("speculative", vec![("min_samples", 10.0)]),
    ] {
        let r = run_full(&c, &wl, p, &params);
        assert_eq!(r.latency_ns.len(), 400);
        assert!(r.latency_ns.iter().all(|&l| l >= 100_000 + MS / 2), "{p}");
        // Each op is answered once; copies add served work: utilization = (ops + copies) work / capacity.
        assert!(r.summary.utilization > fifo.summary.utilization, "{p}");
        assert!(r.copies.wins <= r.copies.ops);
        if p == "duplicate" {
            assert_eq!(r.copies.ops, wl.ops() as u64);
            assert!((r.summary.utilization - 2.0 * fifo.summary.utilization).abs() < 1e-9);
        } else {
            assert!(r.copies.ops > 0 && r.copies.ops < wl.ops() as u64);
        }
    }
}
