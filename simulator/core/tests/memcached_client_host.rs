//! The memcached client host: per-query client work (overhead, per-key parse) served on each client process's
//! CPUs first come, first served, against the unbounded (parallel) client. Hand-worked schedules, exact times.
//!
//! Profile: P_S = 1 + k, N_S = 10 + 2k (out 5, back 5 + 2k), so a query of k keys takes 11 + 3k µs from the
//! end of its client phase to its response when it does not wait.
use kvsim_core::memcached::{
    replay, BatchingConfig, Deployment, Policy, Report, ServiceProfile, Shards, Workload,
};

const SIMPLE: ServiceProfile = ServiceProfile {
    a: 1.0,
    b: 1.0,
    c: 10.0,
    d: 2.0,
};

fn dep(servers: u32, workers: u32, threads: u32, overhead: f64) -> Deployment {
    Deployment {
        servers,
        worker_threads: workers,
        query_threads: threads,
        client_overhead_us: overhead,
        setup_us: 0.0,
        profile: SIMPLE,
        service_cv: 0.0,
        ..Deployment::default()
    }
}

/// One request made of the given (server, keys) batches, arriving at 0, on a sharded pool.
fn one_sharded(batches: &[(u32, u32)]) -> Workload {
    let keys: u32 = batches.iter().map(|&(_, k)| k).sum();
    Workload {
        arrivals_us: vec![0.0],
        keys: vec![keys],
        server_of: vec![0],
        shards: Some(Shards {
            offsets: vec![0, batches.len() as u32],
            server: batches.iter().map(|&(s, _)| s).collect(),
            keys: batches.iter().map(|&(_, k)| k).collect(),
        }),
    }
}

fn run(d: &Deployment, w: &Workload) -> Report {
    replay(d, &Policy::Batching(BatchingConfig), w, 0).unwrap()
}

#[test]
fn one_cpu_serializes_the_overhead_of_a_request_fanned_out_to_three_servers() {
    // One key on each of 3 servers, overhead c = 100, one thread per lane, one worker per server.
    let w = one_sharded(&[(0, 1), (1, 1), (2, 1)]);
    let mut d = dep(3, 1, 3, 100.0);
    // Parallel (the paper's client): every query's overhead at once: c + 14 = 114.
    d.client_cpus = 0;
    let r = run(&d, &w);
    assert_eq!(r.latencies_us, vec![114.0]);
    assert_eq!(r.client_cpu_wait_us, 0.0);
    assert_eq!(r.client_cpu_load, 0.0);
    // One CPU (CPython): overheads at 0–100, 100–200, 200–300; the last query is sent at 300 → 3c + 14 = 314.
    d.client_cpus = 1;
    let r = run(&d, &w);
    assert_eq!(r.latencies_us, vec![314.0]);
    assert_eq!(r.client_cpu_wait_us, 100.0 + 200.0);
    assert!((r.client_cpu_load - 300.0 / 314.0).abs() < 1e-12);
    // Two CPUs: two overheads at once, the third at 100–200 → 214; three CPUs: as parallel.
    d.client_cpus = 2;
    assert_eq!(run(&d, &w).latencies_us, vec![214.0]);
    d.client_cpus = 3;
    assert_eq!(run(&d, &w).latencies_us, vec![114.0]);
}

#[test]
fn the_per_key_parse_queues_on_the_cpu_behind_earlier_work() {
    // Batches: server 0 one key, server 1 one key, server 2 ten keys; overhead 100, parse 10 µs per key.
    let w = one_sharded(&[(0, 1), (1, 1), (2, 10)]);
    let mut d = dep(3, 1, 3, 100.0);
    d.client_key_us = 10.0;
    // Parallel: q0, q1 end at 100 + 14 + 10 = 124; q2 at 100 + (5 + 11 + 25) + 100 = 241.
    d.client_cpus = 0;
    assert_eq!(run(&d, &w).latencies_us, vec![241.0]);
    // One CPU, first come first served:
    //   0–100 overhead q0 (q1, q2 queue at 0); 100–200 overhead q1; q0 back at 114, its parse queues;
    //   200–300 overhead q2; q1 back at 214, its parse queues; 300–310 parse q0; 310–320 parse q1;
    //   q2 sent at 300, back at 300 + 41 = 341, parse 341–441.
    d.client_cpus = 1;
    let r = run(&d, &w);
    assert_eq!(r.latencies_us, vec![441.0]);
    // waits: q1 100, q2 200, parse q0 300 − 114, parse q1 310 − 214, parse q2 0.
    assert_eq!(r.client_cpu_wait_us, 100.0 + 200.0 + 186.0 + 96.0);
}

#[test]
fn each_client_process_has_its_own_cpu_and_requests_are_dealt_round_robin() {
    // Replica pool of one server with two workers, two query threads, two one-key requests at 0, overhead 100.
    let w = Workload {
        arrivals_us: vec![0.0, 0.0],
        keys: vec![1, 1],
        server_of: vec![0, 0],
        shards: None,
    };
    let mut d = dep(1, 2, 2, 100.0);
    d.client_cpus = 1;
    // One process: the two overheads one after the other: 114 and 214.
    d.client_processes = 1;
    assert_eq!(run(&d, &w).latencies_us, vec![114.0, 214.0]);
    // Two processes, one thread and one CPU each: request 0 on process 0, request 1 on process 1, in parallel.
    d.client_processes = 2;
    let r = run(&d, &w);
    assert_eq!(r.latencies_us, vec![114.0, 114.0]);
    assert_eq!(r.query_threads, 2);
    // Unbounded CPUs: as two processes here.
    d.client_processes = 1;
    d.client_cpus = 0;
    assert_eq!(run(&d, &w).latencies_us, vec![114.0, 114.0]);
}

#[test]
fn sharded_lanes_are_per_process() {
    // 2 servers, 2 processes, 4 query threads → 2 per process → 1 per lane per process; 4 requests of one key
    // on server 0 at 0: processes 0, 1, 0, 1. One CPU per process, overhead 100, two workers per server.
    let batches: Vec<(u32, u32)> = vec![(0, 1)];
    let mut sh = Shards {
        offsets: vec![0],
        server: Vec::new(),
        keys: Vec::new(),
    };
    for _ in 0..4 {
        sh.server.extend(batches.iter().map(|b| b.0));
        sh.keys.extend(batches.iter().map(|b| b.1));
        sh.offsets.push(sh.keys.len() as u32);
    }
    let w = Workload {
        arrivals_us: vec![0.0; 4],
        keys: vec![1; 4],
        server_of: vec![0; 4],
        shards: Some(sh),
    };
    let mut d = dep(2, 2, 4, 100.0);
    d.client_processes = 2;
    d.client_cpus = 1;
    // Requests 0 and 1 run at once on their processes' one lane thread (114); requests 2 and 3 queue behind
    // them on those threads and start at 114: overhead to 214, answer at 228.
    let r = run(&d, &w);
    assert_eq!(r.latencies_us, vec![114.0, 114.0, 228.0, 228.0]);
    assert_eq!(r.query_threads, 4);
}

#[test]
fn client_processes_must_be_at_least_one_and_parse_cost_finite() {
    let w = one_sharded(&[(0, 1)]);
    let mut d = dep(1, 1, 1, 0.0);
    d.client_processes = 0;
    assert!(run_err(&d, &w).contains("client_processes"));
    d.client_processes = 1;
    d.client_key_us = f64::NAN;
    assert!(run_err(&d, &w).contains("client_key_us"));
}

fn run_err(d: &Deployment, w: &Workload) -> String {
    replay(d, &Policy::Batching(BatchingConfig), w, 0).unwrap_err()
}
