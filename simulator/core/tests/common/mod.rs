//! What the hand-worked coordinator tests share: the 3-server cluster and a replay with one slow server.
use kvsim_core::server_model::ServerModelConfig;
use kvsim_core::{replay, Cluster, ClusterConfig, ReplayConfig, RunResult, Workload};

pub const MS: u64 = 1_000_000;

/// 3 single-slot servers, RF 2: g0 → [0, 1]; round-robin per (client, group) starts at server 0.
pub fn cluster(net_latency_ns: u64) -> Cluster {
    Cluster::new(ClusterConfig {
        servers: 3,
        slots: 1,
        replication: 2,
        vnodes: 1,
        service_rate: 1000.0,
        net_latency_ns,
        clients: 1,
    })
    .unwrap()
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
