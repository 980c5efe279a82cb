//! Replays the `bench/sim_speed.py` model (128 servers × 8 slots, RF 3, lognormal(2.5, 1.25) multiget sizes,
//! uniform keys over 1 M ids, Poisson arrivals at 75% load) and prints, per (policy, replica selector), events,
//! wall time and checksums of every request latency and of the summary (so two builds can be checked
//! bit-identical).
//!
//! Usage:
//! - `sim-callgrind [requests] [policy,policy,...] [repeat] [selector,selector,...] [large_share]`: the speed
//!   cases (also replayed by `checksums.sh`).
//!   - selector: a replica selector name with optional parameters, `name[:param=value[/param=value]]`, e.g.
//!     `heron:busy_capacity=8`.
//!   - large_share (default 0): keys with id mod round(1 / share) == 0 hold 512 KiB values, the others 1 KiB;
//!     the op demands follow the default demand model (`DemandModel::for_service_rate`), the client's size
//!     estimates are exact (large_est = large_true) and Rein's opset cost is size-aware. 0 = one value size,
//!     demand 1/service_rate.
//! - `sim-callgrind ext [requests]`: server speeds and slowdowns, writes at every replica, closed-loop clients,
//!   per-op records and warm-up cuts under several policies and selectors (checksum lines only).
//! - `sim-callgrind stock [requests]`: the `stock` policy (coordinator speculative retry forms, stalls, the
//!   drivers' speculative executions and routing, the multiget shapes) over `dynamic-snitch` and `ds`
//!   (checksum lines only).
//! - `sim-callgrind memcached [requests]`: the memcached engine, batching and chisel at several split / merge
//!   levels, two seeds, with and without service jitter (checksum lines only).
//!
//! The replay itself is called in [`replay_case`] (never inlined): `run.sh` counts the instructions of that
//! function only, whatever the core's API looks like.
use std::time::Instant;

use kvsim_core::client_model::{ClosedLoop, ThinkDist};
use kvsim_core::demand::{DemandModel, LARGE_REF_BYTES, SMALL_REF_BYTES};
use kvsim_core::hash::token_of_u64;
use kvsim_core::memcached;
use kvsim_core::replica::SelectorConfig;
use kvsim_core::rng::Rng;
use kvsim_core::server_model::{ServerModelConfig, Slowdown};
use kvsim_core::{
    replay, Arrivals, ClientModel, Cluster, ClusterConfig, CoordinatorConfig, PolicyConfig, ReplayConfig, RunResult, SizeClasses,
    Workload, WorkloadSpec,
};

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

/// FNV-1a over 64-bit words.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf29ce484222325)
    }
    fn u(&mut self, x: u64) -> &mut Self {
        self.0 = (self.0 ^ x).wrapping_mul(0x100000001b3);
        self
    }
    fn f(&mut self, x: f64) -> &mut Self {
        self.u(x.to_bits())
    }
    fn all<T: Copy + Into<u64>>(&mut self, xs: &[T]) -> &mut Self {
        for &x in xs {
            self.u(x.into());
        }
        self
    }
}

/// Everything one replay case may set beyond the policy and the selector.
#[derive(Clone, Default)]
struct Case {
    warmup: Option<f64>,
    record_ops: bool,
    size_aware_cost: bool,
    seed: u64,
    servers: ServerModelConfig,
    write: Vec<bool>,
    closed: Option<ClosedLoop>,
}

/// The one place the driver calls the core's replay API (callgrind counts this function).
#[inline(never)]
fn replay_case(
    cluster: &Cluster,
    wl: &Workload,
    (policy, coordinator): (&PolicyConfig, &CoordinatorConfig),
    sel: &SelectorConfig,
    large: &[bool],
    case: &Case,
) -> RunResult {
    let cfg = ReplayConfig {
        policy: policy.clone(),
        selector: sel.clone(),
        coordinator: coordinator.clone(),
        sizes: SizeClasses {
            large_est: large.to_vec(),
            large_true: large.to_vec(),
        },
        servers: case.servers.clone(),
        writes: case.write.clone(),
        client: case.closed.clone().map_or(ClientModel::Open, ClientModel::Closed),
        warmup: case.warmup.unwrap_or(0.1),
        record_ops: case.record_ops,
        size_aware_cost: case.size_aware_cost,
        seed: case.seed,
        stop: None,
        latency_history: Vec::new(),
    };
    replay(cluster, wl, &cfg).expect("replay")
}

/// Checksum of the summary and of every reported figure besides the latencies.
fn summary_hash(r: &RunResult) -> u64 {
    let s = &r.summary;
    let mut h = Fnv::new();
    h.f(s.p50_ms).f(s.p95_ms).f(s.p99_ms).f(s.p999_ms).f(s.mean_ms).u(s.measured as u64);
    h.f(s.utilization).f(s.server_load_max).f(s.half_ratio).u(s.steady_state as u64);
    for &x in &s.server_load {
        h.f(x);
    }
    h.u(r.requests as u64).u(r.ops as u64).f(r.bytes_per_op);
    for c in r.policy.bytes() {
        h.u(c as u64);
    }
    for (k, v) in &r.params {
        for c in k.bytes() {
            h.u(c as u64);
        }
        h.f(*v);
    }
    h.0
}

/// The extension figures (held opsets, copies, writes, served ops, makespan, closed-loop arrivals) and records.
fn ext_line(r: &RunResult) -> String {
    let (h, c, w) = (&r.held, &r.copies, &r.writes);
    let rec = r.records.as_ref().map_or(0, |rec| {
        Fnv::new()
            .all(&rec.request)
            .all(&rec.opset)
            .all(&rec.server)
            .all(&rec.slot)
            .all(&rec.enqueue)
            .all(&rec.start)
            .all(&rec.end)
            .all(&rec.demand)
            .0
    });
    format!(
        "held {}/{}/{:016x}/{}/{}/{} copies {}/{} writes {}/{} served {} makespan {} arrivals {:016x} records {rec:016x}",
        h.opsets,
        h.max,
        h.mean_ms.to_bits(),
        h.at_half,
        h.at_end,
        h.unstable,
        c.ops,
        c.wins,
        w.ops,
        w.copies,
        r.served_ops,
        r.makespan_ns,
        Fnv::new().all(&r.arrival_ns).0,
    )
}

fn latency_line(r: &RunResult) -> String {
    let sum: u128 = r.latency_ns.iter().map(|&x| x as u128).sum();
    let h = Fnv::new().all(&r.latency_ns).0;
    format!("latency sum {sum} fnv {h:016x} summary {:016x}", summary_hash(r))
}

/// The `sim_speed.py` workload: `n` requests, a `large_share` of 512 KiB keys, Poisson arrivals at `load`.
fn workload(cluster: &Cluster, n: usize, large_share: f64, load: f64) -> (Workload, Vec<bool>) {
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
            large_in.push(every > 0 && key.is_multiple_of(every));
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
        arrivals: Arrivals::Poisson { load },
        seed: 1,
    };
    let wl = Workload::materialize(cluster, &spec).expect("workload");
    let large: Vec<bool> = if every > 0 {
        wl.op_input.iter().map(|&i| large_in[i as usize]).collect()
    } else {
        Vec::new()
    };
    (wl, large)
}

fn speed(args: &[String]) {
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
    let (wl, large) = workload(&cluster, n, large_share, 0.75);
    println!(
        "requests {} opsets {} ops {} large ops {}",
        wl.requests(),
        wl.opsets(),
        wl.ops(),
        large.iter().filter(|&&b| b).count()
    );
    let case = Case {
        size_aware_cost: large_share > 0.0,
        seed: 1,
        ..Case::default()
    };
    for sel in &selectors {
        let sel_cfg = selector(sel);
        for p in &policies {
            let cfg = PolicyConfig::from_name(p).expect("policy");
            let mut best = f64::INFINITY;
            for _ in 0..repeat {
                let c0 = thread_cpu_ns();
                let t = Instant::now();
                let co = CoordinatorConfig::for_policy(&cfg);
                let r = replay_case(&cluster, &wl, (&cfg, &co), &sel_cfg, &large, &case);
                let wall = t.elapsed().as_secs_f64();
                let cpu = (thread_cpu_ns() - c0) as f64 / 1e9;
                best = best.min(wall);
                println!(
                    "{p:12} {sel:20} events {} wall {:.4} s ({:.2} M ev/s best {:.4} s) p99 {:.6} ms held {} {} \
                     cpu {cpu:.4} s",
                    r.events,
                    wall,
                    r.events as f64 / best / 1e6,
                    best,
                    r.summary.p99_ms,
                    r.held.opsets,
                    latency_line(&r),
                );
            }
        }
    }
}

/// Server speeds, slowdowns, writes, closed-loop clients, records and warm-up cuts.
fn ext(args: &[String]) {
    let n: usize = args.get(2).map_or(3_000, |s| s.parse().expect("requests"));
    let cluster = Cluster::new(ClusterConfig::default()).expect("cluster");
    let (wl, large) = workload(&cluster, n, 0.1, 0.5);
    let mut rng = Rng::new(3, 11);
    let writes: Vec<bool> = (0..wl.ops()).map(|_| rng.uniform() < 0.15).collect();
    let speeds = ServerModelConfig {
        speeds: ServerModelConfig::slow_servers(128, 8, 3.0).expect("speeds"),
        slowdown: None,
        stalls: None,
        ..ServerModelConfig::default()
    };
    let slowdown = ServerModelConfig {
        speeds: Vec::new(),
        slowdown: Some(Slowdown {
            interval_ns: 20_000_000,
            fraction: 0.1,
            factor: 4.0,
            duration_ns: 10_000_000,
        }),
        stalls: None,
        ..ServerModelConfig::default()
    };
    let closed = ClosedLoop {
        threads: 96,
        think_ns: 200_000,
        think: ThinkDist::Exponential,
    };
    let closed_fixed = ClosedLoop {
        threads: 32,
        think_ns: 0,
        think: ThinkDist::Fixed,
    };
    let base = Case {
        size_aware_cost: true,
        seed: 1,
        ..Case::default()
    };
    let everything = Case {
        servers: ServerModelConfig {
            speeds: speeds.speeds.clone(),
            slowdown: slowdown.slowdown.clone(),
            stalls: None,
            ..ServerModelConfig::default()
        },
        write: writes.clone(),
        closed: Some(closed.clone()),
        ..base.clone()
    };
    type Group<'a> = (&'a str, Case, &'a [&'a str], &'a [&'a str]);
    let groups: Vec<Group<'_>> = vec![
        (
            "speeds",
            Case { servers: speeds.clone(), ..base.clone() },
            &["fifo", "rein", "rein-sds", "tailx", "speculative"],
            &["round-robin", "ds", "c3"],
        ),
        (
            "slowdown",
            Case { servers: slowdown.clone(), ..base.clone() },
            &["fifo", "rein", "brb-unifincr", "duplicate"],
            &["round-robin", "heron:busy_capacity=8", "least-outstanding"],
        ),
        (
            "slowdown-seed2",
            Case { servers: slowdown.clone(), seed: 2, ..base.clone() },
            &["fifo", "rein"],
            &["round-robin", "random"],
        ),
        (
            "writes",
            Case { write: writes.clone(), ..base.clone() },
            &["fifo", "rein", "duplicate", "speculative", "tailx"],
            &["round-robin", "ds", "c3"],
        ),
        (
            "closed",
            Case { closed: Some(closed.clone()), ..base.clone() },
            &["fifo", "rein", "oracle", "tailx"],
            &["round-robin", "c3", "heron"],
        ),
        (
            "closed-fixed",
            Case { closed: Some(closed_fixed), seed: 2, ..base.clone() },
            &["fifo", "rein-sbf", "speculative"],
            &["round-robin", "ds"],
        ),
        ("everything", everything.clone(), &["rein", "speculative", "duplicate"], &["ds", "c3"]),
        (
            "records",
            Case { record_ops: true, write: writes.clone(), ..base.clone() },
            &["fifo", "rein", "duplicate"],
            &["round-robin", "ds"],
        ),
        (
            "records-everything",
            Case { record_ops: true, ..everything },
            &["fifo", "tailx"],
            &["heron"],
        ),
        ("warmup-0", Case { warmup: Some(0.0), ..base.clone() }, &["rein"], &["round-robin", "c3"]),
        ("warmup-0.5", Case { warmup: Some(0.5), ..base.clone() }, &["rein"], &["round-robin"]),
        ("count-cost", Case { size_aware_cost: false, ..base.clone() }, &["rein", "rein-sds"], &["round-robin", "ds"]),
    ];
    for (name, case, policies, selectors) in &groups {
        for sel in selectors.iter() {
            let sel_cfg = selector(sel);
            for p in policies.iter() {
                let cfg = PolicyConfig::from_name(p).expect("policy");
                let co = CoordinatorConfig::for_policy(&cfg);
                let r = replay_case(&cluster, &wl, (&cfg, &co), &sel_cfg, &large, case);
                println!(
                    "ext {name:18} {p:12} {sel:20} events {} {} {}",
                    r.events,
                    latency_line(&r),
                    ext_line(&r)
                );
            }
        }
    }
}

/// `name[:param=value[/param=value]]` → the policy and its coordinator section with those parameters.
fn policy(spec: &str) -> (PolicyConfig, CoordinatorConfig) {
    let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
    let params: Vec<(String, f64)> = params
        .split('/')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').expect("policy parameter: name=value");
            (k.to_string(), v.parse().expect("policy parameter value"))
        })
        .collect();
    kvsim_core::coordinator::build_policy(name, &params).expect("policy")
}

/// `stock`: Cassandra's coordinator speculative retry, stalls, the drivers and the multiget shapes.
fn stock_cases(args: &[String]) {
    use kvsim_core::server_model::Stalls;
    let n: usize = args.get(2).map_or(3_000, |s| s.parse().expect("requests"));
    let cluster = Cluster::new(ClusterConfig::default()).expect("cluster");
    let (wl, large) = workload(&cluster, n, 0.0, 0.5);
    let base = Case {
        seed: 1,
        ..Case::default()
    };
    let stalls = Case {
        servers: ServerModelConfig {
            speeds: Vec::new(),
            slowdown: None,
            stalls: Some(Stalls { rate_per_s: 2.0, duration_ns: 20_000_000 }),
            ..ServerModelConfig::default()
        },
        ..base.clone()
    };
    let slow = Case {
        servers: ServerModelConfig {
            speeds: ServerModelConfig::slow_servers(128, 8, 3.0).expect("speeds"),
            slowdown: None,
            stalls: None,
            ..ServerModelConfig::default()
        },
        ..base.clone()
    };
    let policies: &[&str] = &[
        "stock:spec_kind=0",
        "stock",
        "stock:spec_kind=1",
        "stock:spec_kind=3/spec_fixed_ms=5",
        "stock:spec_kind=4/spec_fixed_ms=5/spec_refresh_ms=50",
        "stock:spec_kind=0/se_max=2/se_delay_ms=5",
        "stock:spec_kind=3/spec_fixed_ms=5/se_max=3/se_delay_ms=2/chunk=8",
        "stock:shape=1/se_max=2/se_delay_ms=5",
        "stock:shape=1/driver=1/shuffle=1/se_max=2/se_delay_ms=1",
        "stock:shape=1/slow_avoid=0",
    ];
    let groups: Vec<(&str, &Case, &[&str])> = vec![
        ("calm", &base, &["dynamic-snitch", "ds:badness=1"]),
        ("stalls", &stalls, &["dynamic-snitch", "dynamic-snitch:update_ms=10/badness=0.1"]),
        ("slow", &slow, &["dynamic-snitch", "round-robin"]),
    ];
    for (name, case, selectors) in groups {
        for sel in selectors {
            let sel_cfg = selector(sel);
            for p in policies {
                let (pc, co) = policy(p);
                let r = replay_case(&cluster, &wl, (&pc, &co), &sel_cfg, &large, case);
                println!(
                    "stock {name:8} {p:62} {sel:40} events {} {} {}",
                    r.events,
                    latency_line(&r),
                    ext_line(&r)
                );
            }
        }
    }
}

/// The memcached engine: batching and chisel at several split / merge levels.
fn memcached_cases(args: &[String]) {
    use memcached::{BatchingConfig, ChiselConfig, Deployment, Policy, ServiceProfile, SplitRule};
    let n: usize = args.get(2).map_or(4_000, |s| s.parse().expect("requests"));
    let policies: Vec<(&str, Policy)> = vec![
        ("batching", Policy::Batching(BatchingConfig)),
        ("chisel-none", Policy::Chisel(ChiselConfig::default())),
        (
            "chisel-L25-B1",
            Policy::Chisel(ChiselConfig { split: SplitRule::ChunkKeys(25), merge: 1, elephant_threshold: 50 }),
        ),
        (
            "chisel-L50-B2",
            Policy::Chisel(ChiselConfig { split: SplitRule::ChunkKeys(50), merge: 2, elephant_threshold: 50 }),
        ),
        (
            "chisel-N4-B4",
            Policy::Chisel(ChiselConfig { split: SplitRule::Chunks(4), merge: 4, elephant_threshold: 50 }),
        ),
        (
            "chisel-L10-B8-T20",
            Policy::Chisel(ChiselConfig { split: SplitRule::ChunkKeys(10), merge: 8, elephant_threshold: 20 }),
        ),
    ];
    for servers in [2u32, 3] {
        for (cv, overhead, setup) in [(0.0, 0.0, 0.0), (0.5, 5.0, 20.0)] {
            for seed in [1u64, 2] {
                // Mice of 1..=10 keys, one elephant in ten of 100..=300 keys, Poisson arrivals.
                let mut rng = Rng::new(seed, 21);
                let mut t = 0.0;
                let (mut arrivals_us, mut keys, mut server_of) = (Vec::new(), Vec::new(), Vec::new());
                for _ in 0..n {
                    t += rng.exp(60.0 / servers as f64);
                    arrivals_us.push(t);
                    keys.push(if rng.uniform() < 0.1 { 100 + rng.below(201) as u32 } else { 1 + rng.below(10) as u32 });
                    server_of.push(rng.below(servers as u64) as u32);
                }
                let wl = memcached::Workload { arrivals_us, keys, server_of, shards: None };
                let dep = Deployment {
                    servers,
                    worker_threads: 4,
                    query_threads: if cv > 0.0 { 12 } else { memcached::query_threads_rule(servers, 4, 0.0, 1.0) },
                    client_overhead_us: overhead,
                    setup_us: setup,
                    profile: ServiceProfile::PAPER,
                    service_cv: cv,
                    ..Deployment::default()
                };
                for (name, pol) in &policies {
                    let r = memcached_case(&dep, pol, &wl, seed);
                    let s = r.summary();
                    let lat = Fnv::new().all(&r.latencies_us.iter().map(|x| x.to_bits()).collect::<Vec<u64>>()).0;
                    let sum = Fnv::new()
                        .u(s.requests)
                        .f(s.mean_us)
                        .f(s.p50_us)
                        .f(s.p95_us)
                        .f(s.p99_us)
                        .f(s.p999_us)
                        .f(s.utilization)
                        .f(s.server_load_max)
                        .u(s.steady_state as u64)
                        .0;
                    let figures = Fnv::new()
                        .f(r.client_wait_us)
                        .f(r.server_wait_us)
                        .f(r.thread_busy_us)
                        .f(r.server_busy_max_us)
                        .f(r.span_us)
                        .u(r.query_threads as u64)
                        .u(r.worker_threads as u64)
                        .0;
                    println!(
                        "memcached servers {servers} cv {cv} setup {setup} seed {seed} {name:18} {} events {} queries \
                         {} keys {} merged {} split {}/{} p99 {:.3} us latency {lat:016x} summary {sum:016x} \
                         figures {figures:016x}",
                        pol.name(),
                        r.events,
                        r.queries,
                        r.query_keys,
                        r.merged_queries,
                        r.split_requests,
                        r.chunks,
                        s.p99_us,
                    );
                }
            }
        }
    }
}

/// The one place the driver calls the memcached replay.
#[inline(never)]
fn memcached_case(
    dep: &memcached::Deployment,
    pol: &memcached::Policy,
    wl: &memcached::Workload,
    seed: u64,
) -> memcached::Report {
    memcached::replay(dep, pol, wl, seed).expect("memcached replay")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("ext") => ext(&args),
        Some("memcached") => memcached_cases(&args),
        Some("stock") => stock_cases(&args),
        _ => speed(&args),
    }
}
