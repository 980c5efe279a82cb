//! Hand-worked cases for the replica selectors (exact latencies) and randomized invariants over all of
//! them: every op served once, on a replica of its group, held opsets eventually sent, determinism.
use kvsim_core::hash::token_of_u64;
use kvsim_core::replica::c3::{C3Config, C3};
use kvsim_core::replica::{Feedback, ReplicaSelector, SelectCtx, SelectorConfig, REPLICA_NAMES};
use kvsim_core::rng::Rng;
use kvsim_core::{
    replay, Arrivals, Cluster, ClusterConfig, PolicyConfig, ReplayConfig, Workload, WorkloadSpec,
};

const MS: u64 = 1_000_000;

fn cluster(servers: u32, rf: u32, clients: u32) -> Cluster {
    Cluster::new(ClusterConfig {
        servers,
        slots: 1,
        replication: rf,
        net_latency_ns: 0,
        clients,
        ..Default::default()
    })
    .unwrap()
}

/// `fifo` with replica selector `name`, no warm-up cut.
fn ext(name: &str, params: &[(&str, f64)]) -> ReplayConfig {
    let p: Vec<(String, f64)> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    ReplayConfig {
        selector: SelectorConfig::build(name, &p).unwrap(),
        warmup: 0.0,
        ..ReplayConfig::default()
    }
}

fn lat_ms(c: &Cluster, wl: &Workload, e: &ReplayConfig) -> Vec<u64> {
    let r = replay(c, wl, e).unwrap();
    r.latency_ns.iter().map(|l| l / MS).collect()
}

#[test]
fn heron_blocks_a_large_request_until_a_replica_is_free_c3_queues_it() {
    // RF 2 (servers 0, 1), one slot each, no network delay. Three large reads of group 0 at t = 0:
    // demands 40, 32, 32 ms. Héron: r0 → s0 (all scores equal, replica order), r1 → s1 (s0 has an outstanding
    // op), r2: both busy → held; r1 ends at 32 ms → s1 available → r2 runs 32..64 ms.
    // C3 ranking only: r2 → s0 (equal scores, replica order) behind r0 → ends at 72 ms.
    let c = cluster(2, 2, 1);
    let wl = Workload::from_parts(
        &[
            (0, vec![(0, vec![40 * MS])]),
            (0, vec![(0, vec![32 * MS])]),
            (0, vec![(0, vec![32 * MS])]),
        ],
        1,
    );
    let mut heron = ext("heron", &[]);
    heron.sizes.large_est = vec![true; 3];
    heron.sizes.large_true = vec![true; 3];
    assert_eq!(lat_ms(&c, &wl, &heron), vec![40, 32, 64]);
    let r = replay(&c, &wl, &heron).unwrap();
    assert_eq!((r.held.opsets, r.held.max), (1, 1));
    assert_eq!(r.held.mean_ms, 32.0);
    let c3 = ext("c3", &[("rate_control", 0.0)]);
    assert_eq!(lat_ms(&c, &wl, &c3), vec![40, 32, 72]);
    // busy_capacity 2: nothing is held, r2 → s0 like C3.
    let mut h2 = ext("heron", &[("busy_capacity", 2.0)]);
    h2.sizes.large_est = vec![true; 3];
    h2.sizes.large_true = vec![true; 3];
    assert_eq!(lat_ms(&c, &wl, &h2), vec![40, 32, 72]);
}

#[test]
fn heron_sends_small_requests_to_the_first_available_replica() {
    // RF 3. r0 large (40 ms) at 0 → s0. At 1 ms, r1 small (1 ms): s0 is busy; s1 ranks first → 1 ms.
    // Every replica busy with a large op (r0..r2) → a small request r3 at 2 ms goes to the best-scored one.
    let c = cluster(3, 3, 1);
    let wl = Workload::from_parts(
        &[(0, vec![(0, vec![40 * MS])]), (MS, vec![(0, vec![MS])])],
        1,
    );
    let mut h = ext("heron", &[]);
    h.sizes.large_est = vec![true, false];
    h.sizes.large_true = vec![true, false];
    assert_eq!(lat_ms(&c, &wl, &h), vec![40, 1]);
}

#[test]
fn dynamic_snitch_follows_scores_and_forgets_them_at_reset() {
    // RF 2, ticks every 1 ms. r0 (10 ms) at 0 → primary s0 (no scores). Its sample (10 ms) arrives at 10 ms.
    // r1 at 10.5 ms: tick 10 sees s0 = 10 ms, s1 = 0 → s0 is worse than (1 + 0.1) × 0 → score order → s1.
    // r2 at 12.2 ms (s1 sample 1 ms at 11.5): s0 = 10, s1 = 1 → s1; it waits for nobody → 1 ms.
    let c = cluster(2, 2, 1);
    let parts = vec![
        (0, vec![(0, vec![10 * MS])]),
        (10 * MS + MS / 2, vec![(0, vec![MS])]),
        (12 * MS + MS / 5, vec![(0, vec![3 * MS])]),
        (12 * MS + MS / 2, vec![(0, vec![MS])]),
    ];
    let wl = Workload::from_parts(&parts, 1);
    let ds = ReplayConfig {
        record_ops: true,
        ..ext("ds", &[("update_ms", 1.0)])
    };
    let r = replay(&c, &wl, &ds).unwrap();
    assert_eq!(r.records.as_ref().unwrap().server, vec![0, 1, 1, 1]);
    // r3 queues behind r2 on s1 (ends 12.2 + 3 = 15.2 ms), runs 15.2..16.2 ms → latency 3.7 ms.
    assert_eq!(r.latency_ns[3], 16 * MS + MS / 5 - (12 * MS + MS / 2));
    // Reset every 12 ms: at 12.2 ms and 12.5 ms all samples are gone → static order → s0 (idle by then).
    let ds_reset = ReplayConfig {
        record_ops: true,
        ..ext("ds", &[("update_ms", 1.0), ("reset_s", 0.012)])
    };
    let r = replay(&c, &wl, &ds_reset).unwrap();
    assert_eq!(r.records.as_ref().unwrap().server, vec![0, 1, 0, 0]);
}

#[test]
fn least_outstanding_global_spreads_simultaneous_requests() {
    // Two 10 ms reads of group 0 at t = 0 on RF 2: whichever replica the first gets, the second takes the other.
    let c = cluster(2, 2, 1);
    let wl = Workload::from_parts(
        &[(0, vec![(0, vec![10 * MS])]), (0, vec![(0, vec![10 * MS])])],
        1,
    );
    assert_eq!(
        lat_ms(&c, &wl, &ext("least-outstanding", &[("global", 1.0)])),
        vec![10, 10]
    );
    // Client-local counts see the same here (one client).
    assert_eq!(
        lat_ms(&c, &wl, &ext("least-outstanding", &[])),
        vec![10, 10]
    );
    // Round-robin with one client: 0 then 1 as well; random may collide, but never exceeds 20 ms.
    assert_eq!(lat_ms(&c, &wl, &ext("round-robin", &[])), vec![10, 10]);
}

#[test]
fn c3_score_is_the_published_formula() {
    // alpha = 1 keeps the last sample: q = 2, service 1 ms, response 3 ms; os back to 0 after the response;
    // Ψ = R − T + (1 + os·w + q)^3 · T = 3 − 1 + 27 · 1 = 29 ms.
    let cfg = C3Config {
        alpha: 1.0,
        rate_control: 0.0,
        ..Default::default()
    };
    let mut c3 = C3::new(&cfg, 2, 2, 1, 1e6);
    c3.sent(0, 1, 1, 0);
    // before feedback: R = 0, T = mean service 1 ms, os = 1, w = 2 clients → −1 + (1 + 2)^3 = 26 ms.
    assert_eq!(c3.score(0, 1), 26e6);
    c3.apply(&Feedback {
        client: 0,
        server: 1,
        at: 3 * MS,
        queue: 2,
        service_ns: MS,
        response_ns: 3 * MS,
        since_start_ns: 3 * MS,
        large_resident: 0,
        large_est: false,
    });
    assert_eq!(c3.score(0, 1), 29e6);
    // An untouched server: −1 + 1 = 0 → ranked first.
    let ctx = SelectCtx {
        now: 3 * MS,
        client: 0,
        group: 0,
        replicas: &[1, 0],
        outstanding: &[0, 0],
        size: 1,
        large_ops: 0,
    };
    assert_eq!(c3.choose(&ctx), Some(0));
}

#[test]
fn c3_rate_limiter_holds_opsets_until_the_next_window() {
    // One server (RF 1), 1 slot, mean service 1 ms, rate window 1 service time = 1 ms, start rate = 1 op per
    // window. Two 1 ms reads at t = 0: the first goes, the second is held until the window at 1 ms, then runs
    // 1..2 ms → latencies 1 and 2 ms (the same as queueing, but it waited at the client).
    let c = cluster(1, 1, 1);
    let wl = Workload::from_parts(&[(0, vec![(0, vec![MS])]), (0, vec![(0, vec![MS])])], 1);
    let e = ReplayConfig {
        record_ops: true,
        ..ext("c3", &[("rate_interval", 1.0)])
    };
    let r = replay(&c, &wl, &e).unwrap();
    assert_eq!(r.latency_ns, vec![MS, 2 * MS]);
    assert_eq!(r.records.as_ref().unwrap().enqueue, vec![0, MS]);
    assert_eq!(r.held.opsets, 1);
}

fn random_case(seed: u64) -> (Cluster, Workload, Vec<bool>) {
    let mut r = Rng::new(seed, 77);
    let servers = 3 + r.below(6) as u32;
    let c = Cluster::new(ClusterConfig {
        servers,
        slots: 1 + r.below(3) as u32,
        replication: 1 + r.below(3) as u32,
        net_latency_ns: r.below(50_000),
        clients: 1 + r.below(4) as u32,
        ..Default::default()
    })
    .unwrap();
    let n = 1 + r.below(150) as usize;
    let mut offsets = vec![0u64];
    let mut tokens = Vec::new();
    let mut mean = Vec::new();
    for _ in 0..n {
        for _ in 0..1 + r.below(6) {
            let k = r.below(100);
            tokens.push(token_of_u64(k));
            mean.push(if k.is_multiple_of(10) {
                32.0 / 3750.0
            } else {
                1.0 / 3750.0
            });
        }
        offsets.push(tokens.len() as u64);
    }
    let large_in: Vec<bool> = mean.iter().map(|&m| m > 1.0 / 3750.0).collect();
    let wl = Workload::materialize(
        &c,
        &WorkloadSpec {
            req_offsets: offsets,
            tokens,
            mean_demand: Some(mean),
            clients: None,
            arrivals: Arrivals::Poisson {
                load: 0.2 + r.uniform() * 0.8,
            },
            seed,
        },
    )
    .unwrap();
    let large: Vec<bool> = wl.op_input.iter().map(|&i| large_in[i as usize]).collect();
    (c, wl, large)
}

#[test]
fn every_selector_serves_every_op_once_on_a_replica_and_is_deterministic() {
    for seed in 0..40 {
        let (c, wl, large) = random_case(seed);
        for name in REPLICA_NAMES {
            let mut e = ext(name, &[]);
            e.sizes.large_est = large.clone();
            e.sizes.large_true = large.clone();
            e.seed = seed;
            e.record_ops = true;
            for policy in ["fifo", "rein"] {
                e.policy = PolicyConfig::build(policy, &[]).unwrap();
                let a = replay(&c, &wl, &e).unwrap();
                let b = replay(&c, &wl, &e).unwrap();
                assert_eq!(a.latency_ns, b.latency_ns, "{name} seed {seed}");
                let rec = a.records.as_ref().unwrap();
                for o in 0..wl.opsets() {
                    let reps = c.replicas(wl.opset_group[o]);
                    for op in wl.opset_ops[o]..wl.opset_ops[o + 1] {
                        let op = op as usize;
                        assert!(reps.contains(&rec.server[op]), "{name} seed {seed}");
                        assert_eq!(rec.end[op] - rec.start[op], wl.demand[op]);
                        assert!(rec.start[op] >= rec.enqueue[op]);
                    }
                }
                for r in 0..wl.requests() {
                    assert!(
                        a.latency_ns[r] >= 2 * c.config.net_latency_ns,
                        "{name} seed {seed}"
                    );
                }
            }
        }
    }
}
