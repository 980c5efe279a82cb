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
