//! What the hand-worked tests share: small single-slot clusters and a replay with one slow server (each test
//! binary uses its own part of it).
#![allow(dead_code)]
use kvsim_core::server_model::ServerModelConfig;
use kvsim_core::{replay, Cluster, ClusterConfig, ReplayConfig, RunResult, Workload};

pub const MS: u64 = 1_000_000;

/// `servers` single-slot servers at 1 op/ms, RF `replication`, one vnode each, one client.
pub fn single_slot_cluster(servers: u32, replication: u32, net_latency_ns: u64) -> Cluster {
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

/// 3 single-slot servers, RF 2: g0 → [0, 1]; round-robin per (client, group) starts at server 0.
pub fn cluster(net_latency_ns: u64) -> Cluster {
    single_slot_cluster(3, 2, net_latency_ns)
}

/// `policy` with `params` (its own and the coordinator's, as the Python layer encodes them); server 0 runs at
/// `slow` speed; no warm-up cut, seed 0.
pub fn run(
    c: &Cluster,
    wl: &Workload,
    policy: &str,
    slow: f64,
    params: &[(&str, f64)],
) -> RunResult {
    let params: Vec<(String, f64)> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let cfg = ReplayConfig {
        servers: ServerModelConfig {
            speeds: (0..c.config.servers)
                .map(|s| if s == 0 { slow } else { 1.0 })
                .collect(),
            ..ServerModelConfig::default()
        },
        warmup: 0.0,
        seed: 0,
        ..ReplayConfig::build(policy, &params).unwrap()
    };
    replay(c, wl, &cfg).unwrap()
}

/// The busy cluster of the "outside the coordinator" checks: 6 servers × 2 slots, RF 3, 4 vnodes, 5000 ops/s per
/// slot, 50 µs one way, two clients (coordinators).
pub fn busy_cluster() -> Cluster {
    Cluster::new(ClusterConfig {
        servers: 6,
        slots: 2,
        replication: 3,
        vnodes: 4,
        service_rate: 5000.0,
        net_latency_ns: 50_000,
        clients: 2,
    })
    .unwrap()
}

/// A seeded stream of `u64`s (a linear congruential generator) for building workloads by hand.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0
    }
}

/// `stock` with its p99 speculative retry, read timeouts of `read_timeout_ms` (expired reads dropped) and the
/// dynamic snitch updating every ms, open loop, seed 9, nothing cut as warm-up.
pub fn busy_stock(c: &Cluster, wl: &Workload, read_timeout_ms: f64) -> RunResult {
    use kvsim_core::replica::SelectorConfig;
    let params = vec![
        ("read_timeout_ms".to_string(), read_timeout_ms),
        ("drop_expired".to_string(), 1.0),
    ];
    let cfg = ReplayConfig {
        warmup: 0.0,
        seed: 9,
        selector: SelectorConfig::build("dynamic-snitch", &[("update_ms".into(), 1.0)]).unwrap(),
        ..ReplayConfig::build("stock", &params).unwrap()
    };
    replay(c, wl, &cfg).unwrap()
}

/// Asserts that a client-side addition left the engine as it was: `base` speculates and times out, and `with`
/// has the same extra reads, wins, timeouts, dropped reads, served ops and events.
pub fn assert_same_engine(base: &RunResult, with: &RunResult) {
    assert!(base.copies.ops > 0, "the threshold speculates");
    assert!(base.timeouts.requests > 0, "some requests time out");
    let engine = |r: &RunResult| {
        (
            r.copies.ops,
            r.copies.wins,
            r.timeouts.requests,
            r.timeouts.dropped_reads,
            r.served_ops,
            r.events,
        )
    };
    assert_eq!(engine(with), engine(base));
}

/// `fifo` with one closed-loop thread and no think time, nothing cut as warm-up.
pub fn closed_one_thread(c: &Cluster, wl: &Workload) -> RunResult {
    use kvsim_core::client_model::{ClosedLoop, ThinkDist};
    use kvsim_core::ClientModel;
    let cfg = ReplayConfig {
        warmup: 0.0,
        client: ClientModel::Closed(ClosedLoop {
            threads: 1,
            think_ns: 0,
            think: ThinkDist::Fixed,
        }),
        ..ReplayConfig::build("fifo", &[]).unwrap()
    };
    replay(c, wl, &cfg).unwrap()
}
