//! Randomized invariants (hand-rolled property tests over many seeds): every op served exactly once, no slot
//! double-booked, latency ≥ 2 × network + bottleneck demand, fifo ≡ rein with K = 1, determinism.
use kvsim_core::hash::token_of_u64;
use kvsim_core::policy::Loop;
use kvsim_core::rng::Rng;
use kvsim_core::{
    replay, Arrivals, Cluster, ClusterConfig, PolicyConfig, ReplayConfig, Workload, WorkloadSpec,
    POLICIES,
};

fn random_case(seed: u64) -> (Cluster, Workload) {
    let mut r = Rng::new(seed, 99);
    let cfg = ClusterConfig {
        servers: 2 + r.below(10) as u32,
        slots: 1 + r.below(4) as u32,
        replication: 1,
        vnodes: if r.below(2) == 0 { 1 } else { 4 },
        service_rate: 1000.0 + r.below(5000) as f64,
        net_latency_ns: r.below(100_000),
        clients: 1 + r.below(5) as u32,
    };
    let cfg = ClusterConfig {
        replication: 1 + r.below(cfg.servers.min(3) as u64) as u32,
        ..cfg
    };
    let cluster = Cluster::new(cfg).unwrap();
    let n = 1 + r.below(200) as usize;
    let mut offsets = vec![0u64];
    let mut tokens = Vec::new();
    for _ in 0..n {
        let k = 1 + r.below(12);
        for _ in 0..k {
            tokens.push(token_of_u64(r.below(300)));
        }
        offsets.push(tokens.len() as u64);
    }
    let spec = WorkloadSpec {
        req_offsets: offsets,
        tokens,
        mean_demand: None,
        clients: None,
        arrivals: Arrivals::Poisson {
            load: 0.2 + r.uniform(),
        },
        seed,
    };
    let wl = Workload::materialize(&cluster, &spec).unwrap();
    (cluster, wl)
}

/// The policies of the plain loop (every registry row marked `fast`): queue disciplines without copies.
fn queue_policies() -> impl Iterator<Item = &'static str> {
    POLICIES
        .iter()
        .filter(|e| e.event_loop == Loop::Fast)
        .map(|e| e.name)
}

#[test]
fn every_op_once_no_double_booking_and_latency_lower_bound() {
    for seed in 0..60 {
        let (c, wl) = random_case(seed);
        for p in queue_policies() {
            let mut cfg = PolicyConfig::build(p, &[]).unwrap();
            if p == "rein-sbf" && seed % 2 == 0 {
                cfg.set("boost_after_ms", 0.5).unwrap();
            }
            let rc = ReplayConfig {
                warmup: 0.0,
                record_ops: true,
                ..ReplayConfig::new(cfg)
            };
            let res = replay(&c, &wl, &rc).unwrap();
            let rec = res.records.as_ref().unwrap();
            let d = c.config.net_latency_ns;
            // every op started once at or after reaching its server, and ran for exactly its demand
            for op in 0..wl.ops() {
                assert!(rec.start[op] >= rec.enqueue[op], "{p} seed {seed}");
                assert_eq!(rec.end[op] - rec.start[op], wl.demand[op]);
                let o = rec.opset[op] as usize;
                assert!(wl.opset_ops[o] as usize <= op && op < wl.opset_ops[o + 1] as usize);
                assert_eq!(rec.enqueue[op], wl.arrival[rec.request[op] as usize] + d);
                assert!(c.replicas(wl.opset_group[o]).contains(&rec.server[op]));
            }
            // no slot double-booked: intervals on one (server, slot) do not overlap
            let mut by_slot: Vec<(u32, u32, u64, u64)> = (0..wl.ops())
                .map(|i| (rec.server[i], rec.slot[i], rec.start[i], rec.end[i]))
                .collect();
            by_slot.sort_unstable();
            for w in by_slot.windows(2) {
                if w[0].0 == w[1].0 && w[0].1 == w[1].1 {
                    assert!(
                        w[1].2 >= w[0].3,
                        "{p} seed {seed}: slot double-booked {w:?}"
                    );
                }
                assert!(w[0].1 < c.config.slots);
            }
            // latency ≥ 2 × net + bottleneck (longest single op) and = last end + net − arrival
            for r in 0..wl.requests() {
                let ops = wl.opset_ops[wl.req_opsets[r] as usize] as usize
                    ..wl.opset_ops[wl.req_opsets[r + 1] as usize] as usize;
                let longest = ops.clone().map(|i| wl.demand[i]).max().unwrap();
                let last = ops.map(|i| rec.end[i]).max().unwrap();
                assert!(res.latency_ns[r] >= 2 * d + longest, "{p} seed {seed}");
                assert_eq!(res.latency_ns[r], last + d - wl.arrival[r]);
            }
            let ev_expected = 2 * wl.requests() as u64 + wl.ops() as u64;
            assert_eq!(res.events, ev_expected);
        }
    }
}

#[test]
fn fifo_equals_rein_with_one_queue() {
    for seed in 0..60 {
        let (c, wl) = random_case(seed);
        let rc = |p| ReplayConfig {
            warmup: 0.0,
            ..ReplayConfig::new(p)
        };
        let fifo = replay(&c, &wl, &rc(PolicyConfig::build("fifo", &[]).unwrap())).unwrap();
        let rein1 = PolicyConfig::build("rein", &[("k".into(), 1.0), ("range_factor".into(), 2.0)])
            .unwrap();
        let rein = replay(&c, &wl, &rc(rein1)).unwrap();
        assert_eq!(fifo.latency_ns, rein.latency_ns, "seed {seed}");
    }
}

#[test]
fn replay_is_deterministic_and_crn_holds_across_policies() {
    let (c, wl) = random_case(7);
    let rc = ReplayConfig::new(PolicyConfig::build("rein", &[]).unwrap());
    let a = replay(&c, &wl, &rc).unwrap();
    let b = replay(&c, &wl, &rc).unwrap();
    assert_eq!(a.latency_ns, b.latency_ns);
    assert_eq!(a.events, b.events);
}

#[test]
fn overloaded_hot_server_is_not_steady() {
    // every key on one replica group with RF 1: one server gets all the load at 50% cluster utilization.
    let c = Cluster::new(ClusterConfig {
        servers: 4,
        slots: 1,
        replication: 1,
        ..Default::default()
    })
    .unwrap();
    let n = 2000;
    let spec = WorkloadSpec {
        req_offsets: (0..=n as u64).collect(),
        tokens: vec![token_of_u64(1); n],
        mean_demand: None,
        clients: None,
        arrivals: Arrivals::Poisson { load: 0.5 },
        seed: 1,
    };
    let wl = Workload::materialize(&c, &spec).unwrap();
    let r = replay(
        &c,
        &wl,
        &ReplayConfig::new(PolicyConfig::build("fifo", &[]).unwrap()),
    )
    .unwrap();
    assert!(
        r.summary.server_load_max > 1.5,
        "{}",
        r.summary.server_load_max
    );
    assert!(!r.summary.steady_state);
    assert!((r.summary.utilization - 0.5).abs() < 0.1);
}
