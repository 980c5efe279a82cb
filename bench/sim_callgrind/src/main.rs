//! Replays the `bench/sim_speed.py` model (128 servers × 8 slots, RF 3, lognormal(2.5, 1.25) multiget sizes,
//! uniform keys over 1 M ids, Poisson arrivals at 75% load) with `kvsim_core::engine::run` and prints, per policy,
//! events, wall time and a checksum of every request latency (so two builds can be checked bit-identical).
//! Usage: sim-callgrind [requests] [policy,policy,...] [repeat]
use std::time::Instant;

use kvsim_core::hash::token_of_u64;
use kvsim_core::rng::Rng;
use kvsim_core::{run, Arrivals, Cluster, ClusterConfig, PolicyConfig, RunOptions, Workload, WorkloadSpec};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(20_000, |s| s.parse().expect("requests"));
    let policies: Vec<String> = args
        .get(2)
        .map_or_else(|| vec!["fifo".to_string(), "rein".to_string()], |s| s.split(',').map(String::from).collect());
    let repeat: usize = args.get(3).map_or(1, |s| s.parse().expect("repeat"));
    let cluster = Cluster::new(ClusterConfig::default()).expect("cluster");
    let mut rng = Rng::new(1, 7);
    let mut offsets = vec![0u64];
    let mut tokens = Vec::new();
    for _ in 0..n {
        let size = (2.5 + 1.25 * rng.normal()).exp().ceil().max(1.0) as u64;
        for _ in 0..size {
            tokens.push(token_of_u64(rng.below(1_000_000)));
        }
        offsets.push(tokens.len() as u64);
    }
    let spec = WorkloadSpec {
        req_offsets: offsets,
        tokens,
        mean_demand: None,
        clients: None,
        arrivals: Arrivals::Poisson { load: 0.75 },
        seed: 1,
    };
    let wl = Workload::materialize(&cluster, &spec).expect("workload");
    println!("requests {} opsets {} ops {}", wl.requests(), wl.opsets(), wl.ops());
    for p in &policies {
        let cfg = PolicyConfig::from_name(p).expect("policy");
        let mut best = f64::INFINITY;
        for _ in 0..repeat {
            let t = Instant::now();
            let r = run(&cluster, &wl, &cfg, &RunOptions::default()).expect("run");
            let wall = t.elapsed().as_secs_f64();
            best = best.min(wall);
            let sum: u128 = r.latency_ns.iter().map(|&x| x as u128).sum();
            let mut h = 0xcbf29ce484222325u64;
            for &x in &r.latency_ns {
                h = (h ^ x).wrapping_mul(0x100000001b3);
            }
            println!(
                "{p:12} events {} wall {:.4} s ({:.2} M ev/s best {:.4} s) p99 {:.6} ms latency sum {sum} fnv {h:016x}",
                r.events,
                wall,
                r.events as f64 / best / 1e6,
                best,
                r.summary.p99_ms
            );
        }
    }
}
