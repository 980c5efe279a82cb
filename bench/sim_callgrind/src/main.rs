//! Replays the `bench/sim_speed.py` model (128 servers × 8 slots, RF 3, lognormal(2.5, 1.25) multiget sizes,
//! uniform keys over 1 M ids, Poisson arrivals at 75% load) with `kvsim_core::engine::run` / `run_with` and prints,
//! per (policy, replica selector), events, wall time and a checksum of every request latency (so two builds can be
//! checked bit-identical).
//!
//! Usage: sim-callgrind [requests] [policy,policy,...] [repeat] [selector,selector,...] [large_share]
//! - selector: a replica selector name with optional parameters, `name[:param=value[/param=value]]`, e.g.
//!   `heron:busy_capacity=8`; `round-robin` alone (the default) runs `engine::run`, the core issue's path.
//! - large_share (default 0): keys with id mod round(1 / share) == 0 hold 512 KiB values, the others 1 KiB; the op
//!   demands follow the default demand model (`DemandModel::for_service_rate`), the client's size estimates are
//!   exact (large_est = large_true) and Rein's opset cost is size-aware. 0 = one value size, demand 1/service_rate.
use std::time::Instant;

use kvsim_core::demand::{DemandModel, LARGE_REF_BYTES, SMALL_REF_BYTES};
use kvsim_core::engine::run_with;
use kvsim_core::hash::token_of_u64;
use kvsim_core::replica::SelectorConfig;
use kvsim_core::rng::Rng;
use kvsim_core::run_ext::RunExt;
use kvsim_core::{run, Arrivals, Cluster, ClusterConfig, PolicyConfig, RunOptions, Workload, WorkloadSpec};

fn selector(spec: &str) -> SelectorConfig {
    let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
    let params: Vec<(String, f64)> = params
        .split('/')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').expect("selector parameter: name=value");
            (k.to_string(), v.parse().expect("selector parameter value"))
        })
        .collect();
    SelectorConfig::build(name, &params).expect("selector")
}

/// On-CPU time of this thread, ns (Linux schedstat; 0 elsewhere): unlike wall time it does not count the time the
/// thread waits for a core, so before/after comparisons stay meaningful on a busy machine.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(20_000, |s| s.parse().expect("requests"));
    let policies: Vec<String> = args
        .get(2)
        .map_or_else(|| vec!["fifo".to_string(), "rein".to_string()], |s| s.split(',').map(String::from).collect());
    let repeat: usize = args.get(3).map_or(1, |s| s.parse().expect("repeat"));
    let selectors: Vec<String> = args
        .get(4)
        .map_or_else(|| vec!["round-robin".to_string()], |s| s.split(',').map(String::from).collect());
    let large_share: f64 = args.get(5).map_or(0.0, |s| s.parse().expect("large_share"));
    let cluster = Cluster::new(ClusterConfig::default()).expect("cluster");
    let mut rng = Rng::new(1, 7);
    let mut offsets = vec![0u64];
    let mut tokens = Vec::new();
    let mut large_in = Vec::new();
    let every = if large_share > 0.0 { (1.0 / large_share).round().max(1.0) as u64 } else { 0 };
    for _ in 0..n {
        let size = (2.5 + 1.25 * rng.normal()).exp().ceil().max(1.0) as u64;
        for _ in 0..size {
            let key = rng.below(1_000_000);
            tokens.push(token_of_u64(key));
            large_in.push(every > 0 && key % every == 0);
        }
        offsets.push(tokens.len() as u64);
    }
    let model = DemandModel::for_service_rate(cluster.config.service_rate);
    let mean_demand = (every > 0).then(|| {
        large_in
            .iter()
            .map(|&l| model.mean_s(if l { LARGE_REF_BYTES } else { SMALL_REF_BYTES }))
            .collect::<Vec<f64>>()
    });
    let spec = WorkloadSpec {
        req_offsets: offsets,
        tokens,
        mean_demand,
        clients: None,
        arrivals: Arrivals::Poisson { load: 0.75 },
        seed: 1,
    };
    let wl = Workload::materialize(&cluster, &spec).expect("workload");
    let large: Vec<bool> = if every > 0 {
        wl.op_input.iter().map(|&i| large_in[i as usize]).collect()
    } else {
        Vec::new()
    };
    println!(
        "requests {} opsets {} ops {} large ops {}",
        wl.requests(),
        wl.opsets(),
        wl.ops(),
        large.iter().filter(|&&b| b).count()
    );
    let opts = RunOptions {
        size_aware_cost: every > 0,
        ..RunOptions::default()
    };
    for sel in &selectors {
        let ext = RunExt {
            selector: selector(sel),
            large_est: large.clone(),
            large_true: large.clone(),
            seed: 1,
            ..RunExt::default()
        };
        for p in &policies {
            let cfg = PolicyConfig::from_name(p).expect("policy");
            let mut best = f64::INFINITY;
            for _ in 0..repeat {
                let c0 = thread_cpu_ns();
                let t = Instant::now();
                let r = if ext == RunExt::default() && every == 0 {
                    run(&cluster, &wl, &cfg, &opts)
                } else {
                    run_with(&cluster, &wl, &cfg, &opts, &ext)
                }
                .expect("run");
                let wall = t.elapsed().as_secs_f64();
                let cpu = (thread_cpu_ns() - c0) as f64 / 1e9;
                best = best.min(wall);
                let sum: u128 = r.latency_ns.iter().map(|&x| x as u128).sum();
                let mut h = 0xcbf29ce484222325u64;
                for &x in &r.latency_ns {
                    h = (h ^ x).wrapping_mul(0x100000001b3);
                }
                println!(
                    "{p:12} {sel:20} events {} wall {:.4} s ({:.2} M ev/s best {:.4} s) p99 {:.6} ms held {} \
                     latency sum {sum} fnv {h:016x} cpu {cpu:.4} s",
                    r.events,
                    wall,
                    r.events as f64 / best / 1e6,
                    best,
                    r.summary.p99_ms,
                    r.ext.held_opsets,
                );
            }
        }
    }
}
