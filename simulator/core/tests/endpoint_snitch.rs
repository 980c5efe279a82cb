//! `dynamic-snitch` (Cassandra's `DynamicEndpointSnitch`): hand-worked switches and the timeout samples.
use kvsim_core::replica::{
    DesConfig, EndpointSnitch, Feedback, ReplicaSelector, SelectCtx, SelectorConfig,
};
use kvsim_core::server_model::ServerModelConfig;
use kvsim_core::{replay, Cluster, ClusterConfig, ReplayConfig, Workload};

const MS: u64 = 1_000_000;

/// 2 single-slot servers, RF 2 (g0 → [0, 1]), d = 0.5 ms, one client; server 0 at 1/20 speed.
/// R_k (k = 0..9) arrives at 4k ms with one 1 ms read on g0. `stock` NEVER, selector `dynamic-snitch`.
fn run(update_ms: f64) -> Vec<u64> {
    let c = Cluster::new(ClusterConfig {
        servers: 2,
        slots: 1,
        replication: 2,
        vnodes: 1,
        service_rate: 1000.0,
        net_latency_ns: MS / 2,
        clients: 1,
    })
    .unwrap();
    assert_eq!(c.replicas(0), &[0, 1]);
    let parts: Vec<_> = (0..10u64)
        .map(|k| (4 * k * MS, vec![(0, vec![MS])]))
        .collect();
    let wl = Workload::from_parts(&parts, 1);
    let cfg = ReplayConfig {
        servers: ServerModelConfig {
            speeds: vec![0.05, 1.0],
            ..ServerModelConfig::default()
        },
        selector: SelectorConfig::build("dynamic-snitch", &[("update_ms".into(), update_ms)])
            .unwrap(),
        warmup: 0.0,
        seed: 0,
        ..ReplayConfig::build("stock", &[("spec_kind".into(), 0.0)]).unwrap()
    };
    replay(&c, &wl, &cfg).unwrap().latency_ns
}

#[test]
fn the_snitch_leaves_a_slow_replica_at_the_first_update_after_its_first_answer() {
    // No scores at first: both replicas score 0, the ring order reads server 0 (20 ms per read). R_k there ends
    // at 20k + 20.5 and is answered at 20k + 21: latency 16k + 21. R0's answer reaches the coordinator at 21
    // (round trip 21 ms); the updates at 10 and 20 have no sample; the one at 30 scores server 0 21/21 = 1 and
    // server 1 (no sample) 0: 1 > (1 + 1.0) · 0, so the replicas are sorted by score. R8 (at 32) is the first
    // read of server 1: 32.5–33.5, answered at 34 → 2 ms; R9 too (the update at 40 sees server 1's 2 ms).
    let mut expect: Vec<u64> = (0..8).map(|k| (16 * k + 21) * MS).collect();
    expect.extend([2 * MS, 2 * MS]);
    assert_eq!(run(10.0), expect);
    // Cassandra's 100 ms update interval: no update before 100, every read goes to server 0.
    let slow: Vec<u64> = (0..10).map(|k| (16 * k + 21) * MS).collect();
    assert_eq!(run(100.0), slow);
}

fn fb(server: u32, at: u64, rtt_ns: u64) -> Feedback {
    Feedback {
        client: 0,
        server,
        at,
        queue: 0,
        service_ns: 0,
        response_ns: rtt_ns,
        rtt_ns,
        large_resident: 0,
        large_est: false,
    }
}

#[test]
fn an_expired_read_counts_as_the_timeout_and_the_reset_drops_the_samples() {
    let cfg = DesConfig {
        reset_ms: 1000.0,
        ..DesConfig::default()
    };
    let mut s = EndpointSnitch::new(&cfg, 1, 2, 0);
    // Server 0 answers after 7 s (expired at 5 s: sampled as 5000 ms), server 1 after 2.5 s.
    s.on_op_response(&fb(0, MS, 7000 * MS));
    s.on_op_response(&fb(1, MS, 2500 * MS));
    let reps = [0u32, 1];
    let out = [0u32, 0];
    let ctx = |now| SelectCtx {
        now,
        client: 0,
        group: 0,
        replicas: &reps,
        outstanding: &out,
        size: 1,
        large_ops: 0,
    };
    // The update at 100 ms: scores 5000/5000 = 1 and 2500/5000 = 0.5: 1 ≤ 2 · 0.5, the ring order stays.
    assert_eq!(s.choose(&ctx(100 * MS)), Some(0));
    assert_eq!((s.score(0, 0), s.score(0, 1)), (1.0, 0.5));
    // The reset at 1000 ms drops both reservoirs; the update at 1000 ms comes first (same instant) and keeps the
    // scores, the one at 1100 ms finds no sample: both 0.
    s.on_op_response(&fb(1, 1050 * MS, 2 * MS));
    assert_eq!(s.choose(&ctx(1099 * MS)), Some(0));
    assert_eq!(s.score(0, 0), 1.0);
    // At 1100: only server 1 (2 ms, after the reset) has a score: 2/2 = 1; server 0 has none = 0, the lowest:
    // the ring order stands.
    assert_eq!(s.choose(&ctx(1100 * MS)), Some(0));
    assert_eq!((s.score(0, 0), s.score(0, 1)), (0.0, 1.0));
}
