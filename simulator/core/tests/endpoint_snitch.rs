//! `dynamic-snitch` (Cassandra's `DynamicEndpointSnitch`): hand-worked switches and the timeout samples.
use kvsim_core::replica::{
    DesConfig, EndpointSnitch, Feedback, ReplicaSelector, SelectCtx, SelectorConfig,
};
use kvsim_core::server_model::ServerModelConfig;
use kvsim_core::{replay, Cluster, ClusterConfig, ReplayConfig, Workload};

mod common;

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

fn fb(server: u32, at: u64, since_start_ns: u64) -> Feedback {
    Feedback {
        client: 0,
        server,
        at,
        queue: 0,
        service_ns: 0,
        response_ns: since_start_ns,
        since_start_ns,
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

/// 3 single-slot servers (server 0 at `speed0`, the others at full speed), RF 3 (g → [g, g+1, g+2] mod 3),
/// one-hop latency `d_ns`, two clients (coordinator c on server c with `local` = 1: its reads of itself run
/// inline, no hop), `stock` NEVER, `dynamic-snitch` updating every 20 ms. Requests every 2 ms, alternating
/// clients, each one read of `demand_ns` on the group given: R0..R5 (0..10 ms) on g0, g0, g1, g1, g2, g2 —
/// before the first update, so every read goes to the primary and each client reads each server — then R6..R11
/// (20..30 ms) on g1, g2, g2, g0, g0, g1. Returns each request's server and its latency.
fn local_run(local: f64, demand_ns: u64, d_ns: u64, speed0: f64) -> (Vec<u32>, Vec<u64>) {
    let c = Cluster::new(ClusterConfig {
        servers: 3,
        slots: 1,
        replication: 3,
        vnodes: 1,
        service_rate: 1000.0,
        net_latency_ns: d_ns,
        clients: 2,
    })
    .unwrap();
    assert_eq!(
        (0..3).map(|g| c.replicas(g).to_vec()).collect::<Vec<_>>(),
        [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    );
    let groups = [0u32, 0, 1, 1, 2, 2, 1, 2, 2, 0, 0, 1];
    let parts: Vec<_> = groups
        .iter()
        .enumerate()
        .map(|(k, &g)| {
            let t = if k < 6 {
                2 * k as u64
            } else {
                20 + 2 * (k as u64 - 6)
            };
            (t * MS, vec![(g, vec![demand_ns])])
        })
        .collect();
    let wl = Workload::from_parts(&parts, 2);
    let cfg = ReplayConfig {
        selector: SelectorConfig::build(
            "dynamic-snitch",
            &[("update_ms".into(), 20.0), ("local".into(), local)],
        )
        .unwrap(),
        servers: ServerModelConfig {
            speeds: vec![speed0, 1.0, 1.0],
            ..ServerModelConfig::default()
        },
        warmup: 0.0,
        seed: 0,
        record_ops: true,
        ..ReplayConfig::build("stock", &[("spec_kind".into(), 0.0)]).unwrap()
    };
    let res = replay(&c, &wl, &cfg).unwrap();
    let rec = res.records.as_ref().unwrap();
    let mut servers = vec![0u32; groups.len()];
    for (op, &r) in rec.request.iter().enumerate() {
        servers[r as usize] = rec.server[op];
    }
    (servers, res.latency_ns)
}

#[test]
fn a_local_coordinator_reads_itself_once_its_remote_replicas_score() {
    // Every read: 1 ms of service, plus two 0.5 ms hops when its coordinator is not its replica (no read overlaps
    // another at its server): a local read takes 1 ms, a remote one 2 ms, a 2 ms sample. R0..R5 go to the
    // primaries: 0, 0, 1, 1, 2, 2 (`SimpleSnitch`'s ring order: coordinator 1 reads server 0, not itself, for
    // g0); R0 (client 0 on server 0) and R3 (client 1 on server 1) are local. Their answers reach the clients
    // by 12 ms; the update at 20 ms scores them.
    let ring = [0u32, 0, 1, 1, 2, 2];
    // local = 1: coordinator 0 (server 0) sampled only servers 1 and 2 (R2, R4; its R0 was a local read), both
    // 2/2 = 1, server 0 none = 0; coordinator 1 sampled servers 0 and 2 (R1, R5). R6 (client 0, g1 = [1, 2, 0]):
    // scores [1, 1, 0], sorted [0, 1, 1], 1 > 2 · 0 → sorted by score → server 0. R7 (client 1, g2 = [2, 0, 1]):
    // [1, 1, 0] → server 1. R8 (client 0, g2): [1, 0, 1] → server 0. R9 (client 1, g0 = [0, 1, 2]): [1, 0, 1] →
    // server 1. R10 (client 0, g0): [0, 1, 1] = the sorted order, the ring order stays → server 0 (the primary,
    // local). R11 (client 1, g1): [0, 1, 1] → server 1. Each coordinator reads itself, inline: 1 ms.
    let (servers, lat) = local_run(1.0, MS, MS / 2, 1.0);
    let mut expect = ring.to_vec();
    expect.extend([0, 1, 0, 1, 0, 1]);
    assert_eq!(servers, expect);
    let (l, r) = (MS, 2 * MS);
    assert_eq!(lat, vec![l, r, r, l, r, r, l, l, l, l, l, l]);
    // local = 0: every client sampled every server (2 ms each): all score 1, the ring order throughout.
    let (servers, lat) = local_run(0.0, MS, MS / 2, 1.0);
    let mut expect = ring.to_vec();
    expect.extend([1, 2, 2, 0, 0, 1]);
    assert_eq!(servers, expect);
    assert_eq!(lat, vec![2 * MS; 12]);
    // Sub-millisecond answers (0.1 ms of service, two 0.2 ms hops for a remote read: 0.5 ms, sampled as 0 ms):
    // the remote replicas score 0 / 1 = 0, as the local one (none): no position exceeds, the ring order stands;
    // R0, R3, R10 and R11 are the coordinators' own reads (0.1 ms).
    let (servers, lat) = local_run(1.0, MS / 10, MS / 5, 1.0);
    assert_eq!(servers, expect);
    let (l, r) = (MS / 10, MS / 2);
    assert_eq!(lat, vec![l, r, r, l, r, r, r, r, r, r, l, l]);
}

#[test]
fn a_local_coordinator_never_samples_itself() {
    // As above with server 0 at 1/9 speed (a 9 ms read). Coordinator 0's R0 is its own read of server 0
    // (0–9 ms, inline): no message, no sample. Its samples are R2's (server 1) and R4's (server 2), 2 ms each:
    // at the update at 20 ms server 0 has no score (0), the others 1, so R6 (g1 = [1, 2, 0]) is sorted by score
    // and goes to server 0, the slow one. Had it sampled its 9 ms, server 0 would score 1 and the others 2/9:
    // the ring order, server 1 — which is what local = 0 does (R0 then answers at 10: a 10 ms sample).
    let (servers, _) = local_run(1.0, MS, MS / 2, 1.0 / 9.0);
    assert_eq!(servers[6], 0);
    let (servers, _) = local_run(0.0, MS, MS / 2, 1.0 / 9.0);
    assert_eq!(servers[6], 1);
}

#[test]
fn the_snitch_times_a_read_from_its_requests_start() {
    // 3 single-slot servers, RF 2 (g0 → [0, 1], g1 → [1, 2]), d = 0.5 ms; `stock` NEVER with paged `IN`
    // queries; the snitch updates every 5 ms, badness 0.5. R0 at 0 reads a key on g1 (server 1: sent at 0,
    // answered at 2) then one on g0 (server 0: sent at 2, answered at 4). Its messages carry the request's
    // start (`createdAtNanos`), so the snitch's samples are 2 ms for server 1 and 4 ms for server 0, not the
    // second read's own 2 ms round trip. The update at 5 scores server 0 4/4 = 1 and server 1 2/4 = 0.5. R1 at
    // 6 reads a key on g0: in ring order [1, 0.5], sorted [0.5, 1]: 1 > 0.5 × 1.5 → sorted by score → server 1.
    // (Timed from each read's own send, both would score 1 and the ring order would read server 0.)
    let c = common::cluster(MS / 2);
    assert_eq!((c.replicas(0), c.replicas(1)), (&[0, 1][..], &[1, 2][..]));
    let wl = Workload::from_parts(
        &[
            (0, vec![(1, vec![MS]), (0, vec![MS])]),
            (6 * MS, vec![(0, vec![MS])]),
        ],
        1,
    );
    let cfg = ReplayConfig {
        selector: SelectorConfig::build(
            "dynamic-snitch",
            &[("update_ms".into(), 5.0), ("badness".into(), 0.5)],
        )
        .unwrap(),
        warmup: 0.0,
        seed: 0,
        record_ops: true,
        ..ReplayConfig::build("stock", &[("spec_kind".into(), 0.0), ("paged".into(), 1.0)]).unwrap()
    };
    let res = replay(&c, &wl, &cfg).unwrap();
    let rec = res.records.as_ref().unwrap();
    assert_eq!(res.latency_ns, vec![4 * MS, 2 * MS]);
    assert_eq!(rec.server, vec![1, 0, 1]);
}
