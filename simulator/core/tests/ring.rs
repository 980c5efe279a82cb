//! Replays on an explicit ring: every read is served by one of its key's replicas in the local datacenter, and
//! the replica groups are the ring's token ranges.
use kvsim_core::hash::token_of_u64;
use kvsim_core::rng::Rng;
use kvsim_core::{
    replay, Arrivals, Cluster, ClusterConfig, PolicyConfig, ReplayConfig, Ring, RingNode,
    SelectorConfig, Strategy, Workload, WorkloadSpec,
};

/// 2 datacenters × 2 racks × 3 nodes, 16 random tokens each; NTS {dc1: 3, dc2: 2}.
fn two_dc_ring(seed: u64, local: &str) -> Ring {
    let mut r = Rng::new(seed, 7);
    let mut nodes = Vec::new();
    for dc in ["dc1", "dc2"] {
        for rack in ["r1", "r2"] {
            for _ in 0..3 {
                nodes.push(RingNode {
                    dc: dc.into(),
                    rack: rack.into(),
                    tokens: (0..16).map(|_| r.next_u64() as i64).collect(),
                });
            }
        }
    }
    Ring {
        nodes,
        strategy: Strategy::NetworkTopology {
            replication: vec![("dc1".into(), 3), ("dc2".into(), 2)],
        },
        local_dc: local.into(),
    }
}

fn workload(c: &Cluster, seed: u64) -> (Vec<i64>, Workload) {
    let mut r = Rng::new(seed, 3);
    let mut offsets = vec![0u64];
    let mut tokens = Vec::new();
    for _ in 0..400 {
        for _ in 0..1 + r.below(10) {
            tokens.push(token_of_u64(r.below(5000)));
        }
        offsets.push(tokens.len() as u64);
    }
    let spec = WorkloadSpec {
        req_offsets: offsets,
        tokens: tokens.clone(),
        mean_demand: None,
        clients: None,
        arrivals: Arrivals::Poisson { load: 0.6 },
        seed,
    };
    (tokens, Workload::materialize(c, &spec).unwrap())
}

#[test]
fn reads_go_to_the_local_replicas_of_their_range() {
    for (seed, local, servers, rf) in [(1, "dc1", 6, 3), (2, "dc2", 6, 2)] {
        let ring = two_dc_ring(seed, local);
        let c = Cluster::with_ring(
            ClusterConfig {
                servers,
                replication: rf,
                slots: 2,
                clients: 8,
                ..Default::default()
            },
            &ring,
        )
        .unwrap();
        let p = c.placement().unwrap();
        assert_eq!(c.groups(), 12 * 16);
        assert_eq!(p.width, 5);
        let local_nodes: Vec<u32> = (0..12u32)
            .filter(|&i| ring.nodes[i as usize].dc == local)
            .collect();
        assert_eq!(p.servers, local_nodes);
        let (tokens, wl) = workload(&c, seed);
        for selector in ["round-robin", "least-outstanding"] {
            let rc = ReplayConfig {
                warmup: 0.0,
                record_ops: true,
                selector: SelectorConfig::build(selector, &[]).unwrap(),
                ..ReplayConfig::new(PolicyConfig::build("fifo", &[]).unwrap())
            };
            let res = replay(&c, &wl, &rc).unwrap();
            let rec = res.records.as_ref().unwrap();
            for op in 0..wl.ops() {
                let o = rec.opset[op] as usize;
                let g = wl.opset_group[o] as usize;
                // the key's range: the first ring token ≥ the key's token (wrapping)
                let t = tokens[wl.op_input[op] as usize];
                let first = p.tokens.iter().position(|&x| x >= t).unwrap_or(0);
                assert_eq!(g, first);
                // the op's server is a local replica of that range
                let server = rec.server[op];
                let node = p.servers[server as usize];
                assert_eq!(ring.nodes[node as usize].dc, local);
                assert!(p.replicas_of(g).contains(&node), "{selector}: op {op}");
                assert!(c.replicas(g as u32).contains(&server));
            }
        }
    }
}
