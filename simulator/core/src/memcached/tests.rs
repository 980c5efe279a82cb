//! Hand-worked exact cases. Profile used: P_S = 1 + k, N_S = 10 + 2k (out 5, back 5 + 2k), so one query of k
//! keys takes 11 + 3k µs after its client phase when it does not wait.

use super::*;
use crate::memcached::engine::percentile;

const SIMPLE: ServiceProfile = ServiceProfile {
    a: 1.0,
    b: 1.0,
    c: 10.0,
    d: 2.0,
};

fn dep(servers: u32, workers: u32, threads: u32, setup: f64) -> Deployment {
    Deployment {
        servers,
        worker_threads: workers,
        query_threads: threads,
        client_overhead_us: 0.0,
        setup_us: setup,
        profile: SIMPLE,
        service_cv: 0.0,
        ..Deployment::default()
    }
}

fn wl(arrivals: &[f64], keys: &[u32]) -> Workload {
    Workload {
        arrivals_us: arrivals.to_vec(),
        keys: keys.to_vec(),
        server_of: vec![0; keys.len()],
        shards: None,
    }
}

/// A sharded workload: each request as its (server, keys) batches.
fn sharded(arrivals: &[f64], batches: &[&[(u32, u32)]]) -> Workload {
    let mut sh = Shards {
        offsets: vec![0],
        server: Vec::new(),
        keys: Vec::new(),
    };
    let mut keys = Vec::new();
    for b in batches {
        keys.push(b.iter().map(|&(_, k)| k).sum());
        for &(s, k) in *b {
            sh.server.push(s);
            sh.keys.push(k);
        }
        sh.offsets.push(sh.keys.len() as u32);
    }
    Workload {
        arrivals_us: arrivals.to_vec(),
        server_of: vec![0; keys.len()],
        keys,
        shards: Some(sh),
    }
}

fn chisel(l: u32, b: u32) -> Policy {
    Policy::Chisel(ChiselConfig {
        split: SplitRule::ChunkKeys(l),
        merge: b,
        elephant_threshold: 20,
    })
}

fn run(d: &Deployment, p: &Policy, w: &Workload) -> Report {
    replay(d, p, w, 7).expect("valid replay")
}

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
}

#[test]
fn batching_one_request_is_one_round_trip() {
    let r = run(
        &dep(1, 1, 2, 0.0),
        &Policy::Batching(BatchingConfig),
        &wl(&[0.0], &[100]),
    );
    assert!(close(&r.latencies_us, &[311.0]), "{:?}", r.latencies_us);
    assert_eq!(r.queries, 1);
    assert_eq!(r.query_keys, 100);
}

#[test]
fn split_into_two_chunks_over_two_threads_and_two_servers() {
    // chunks of 50 on threads 0 and 1, servers 0 and 1: both take 11 + 150 = 161 in parallel
    let r = run(&dep(2, 1, 2, 0.0), &chisel(50, 1), &wl(&[0.0], &[100]));
    assert!(close(&r.latencies_us, &[161.0]), "{:?}", r.latencies_us);
    assert_eq!((r.queries, r.split_requests, r.chunks), (2, 1, 2));
}

#[test]
fn split_chunks_wait_for_a_single_server_worker() {
    // both chunks reach server 0 at 5; first processed 5..56, second 56..107, back 5 + 100 -> 212
    let r = run(&dep(1, 1, 2, 0.0), &chisel(50, 1), &wl(&[0.0], &[100]));
    assert!(close(&r.latencies_us, &[212.0]), "{:?}", r.latencies_us);
    assert!((r.server_wait_us - 51.0).abs() < 1e-9);
}

#[test]
fn split_chunks_on_one_thread_run_one_after_the_other() {
    let r = run(&dep(2, 1, 1, 0.0), &chisel(50, 1), &wl(&[0.0], &[100]));
    assert!(close(&r.latencies_us, &[322.0]), "{:?}", r.latencies_us);
}

#[test]
fn merge_of_two_mice_within_setup() {
    // mouse 1 starts at 0, setup ends at 10; mouse 2 (arrived 3) is piggybacked: 10 keys, 10 + 5 + 11 + 25 = 51
    let r = run(
        &dep(1, 1, 1, 10.0),
        &chisel(50, 2),
        &wl(&[0.0, 3.0], &[5, 5]),
    );
    assert!(
        close(&r.latencies_us, &[51.0, 48.0]),
        "{:?}",
        r.latencies_us
    );
    assert_eq!((r.queries, r.merged_queries, r.query_keys), (1, 1, 10));
}

#[test]
fn without_merge_the_second_mouse_waits_for_the_thread() {
    // 0 + 10 + 5 + 6 + 15 = 36; the second starts at 36 and ends at 72
    let r = run(
        &dep(1, 1, 1, 10.0),
        &chisel(50, 1),
        &wl(&[0.0, 3.0], &[5, 5]),
    );
    assert!(
        close(&r.latencies_us, &[36.0, 69.0]),
        "{:?}",
        r.latencies_us
    );
    let b = run(
        &dep(1, 1, 1, 10.0),
        &Policy::Batching(BatchingConfig),
        &wl(&[0.0, 3.0], &[5, 5]),
    );
    assert_eq!(r.latencies_us, b.latencies_us);
}

#[test]
fn setup_time_bounds_merging_and_a_group_is_pinned_to_one_thread() {
    // mouse 2 arrives at 12, after the setup window [0, 10]: not merged, and it queues on the group's thread
    let r = run(
        &dep(1, 1, 2, 10.0),
        &chisel(50, 2),
        &wl(&[0.0, 12.0], &[5, 5]),
    );
    assert!(
        close(&r.latencies_us, &[36.0, 60.0]),
        "{:?}",
        r.latencies_us
    );
    assert_eq!(r.merged_queries, 0);
    // batching spreads them over the two threads
    let b = run(
        &dep(1, 1, 2, 10.0),
        &Policy::Batching(BatchingConfig),
        &wl(&[0.0, 12.0], &[5, 5]),
    );
    assert!(
        close(&b.latencies_us, &[36.0, 36.0]),
        "{:?}",
        b.latencies_us
    );
}

#[test]
fn queued_group_members_merge_without_setup_time() {
    // B = 3, no setup: mouse 1 goes alone (0..26); at 26 mouse 2 starts and takes mouse 3 from the queue:
    // 10 keys, 26 + 5 + 11 + 25 = 67
    let r = run(
        &dep(1, 1, 1, 0.0),
        &chisel(50, 3),
        &wl(&[0.0, 1.0, 2.0], &[5, 5, 5]),
    );
    assert!(
        close(&r.latencies_us, &[26.0, 66.0, 65.0]),
        "{:?}",
        r.latencies_us
    );
    assert_eq!((r.queries, r.merged_queries), (2, 1));
}

#[test]
fn client_overhead_is_paid_per_query() {
    let mut d = dep(2, 1, 2, 0.0);
    d.client_overhead_us = 60.0;
    let r = run(&d, &chisel(50, 1), &wl(&[0.0], &[100]));
    assert!(close(&r.latencies_us, &[221.0]), "{:?}", r.latencies_us);
}

#[test]
fn elephant_threshold_is_inclusive_for_mice() {
    // threshold 20: a 20-key request is a mouse (not split), a 21-key one is split
    let r = run(
        &dep(2, 1, 4, 0.0),
        &chisel(10, 1),
        &wl(&[0.0, 1000.0], &[20, 21]),
    );
    assert_eq!((r.split_requests, r.chunks, r.queries), (1, 3, 4));
}

#[test]
fn balanced_chunks_and_rules() {
    let mut st = DispatchState::new(4, 2);
    let mut out = Vec::new();
    let p = Policy::Chisel(ChiselConfig {
        split: SplitRule::ChunkKeys(50),
        merge: 1,
        elephant_threshold: 50,
    });
    p.dispatch(&mut st, 0, 101, 1, &mut out);
    let sizes: Vec<u32> = out.iter().map(|s| s.keys).collect();
    let servers: Vec<u32> = out.iter().map(|s| s.server).collect();
    let threads: Vec<usize> = out.iter().map(|s| s.thread).collect();
    assert_eq!(sizes, vec![34, 34, 33]);
    assert_eq!(servers, vec![1, 0, 1]);
    assert_eq!(threads, vec![0, 1, 2]);
    assert_eq!(SplitRule::Chunks(8).chunks(5), 5);
    assert_eq!(SplitRule::ChunkKeys(13).chunks(100), 8);
    assert_eq!(query_threads_rule(2, 4, 0.0, 95.4), 8);
    assert_eq!(query_threads_rule(2, 4, 180.0, 95.4), 16);
}

#[test]
fn percentiles_are_nearest_rank() {
    let v: Vec<f64> = (1..=20).map(f64::from).collect();
    assert_eq!(percentile(&v, 0.5), 10.0);
    assert_eq!(percentile(&v, 0.95), 19.0);
    assert_eq!(percentile(&v, 0.99), 20.0);
    let r = Report {
        latencies_us: v,
        ..run(&dep(1, 1, 1, 0.0), &chisel(50, 1), &wl(&[0.0], &[1]))
    };
    let s = r.summary();
    assert_eq!((s.p50_us, s.p95_us, s.mean_us), (10.0, 19.0, 10.5));
}

#[test]
fn jitter_is_seeded_and_deterministic() {
    let mut d = dep(2, 2, 4, 0.0);
    d.service_cv = 0.3;
    let arrivals: Vec<f64> = (0..200).map(|i| f64::from(i) * 40.0).collect();
    let keys: Vec<u32> = (0..200)
        .map(|i| if i % 10 == 0 { 100 } else { 5 })
        .collect();
    let w = wl(&arrivals, &keys);
    let a = replay(&d, &chisel(25, 2), &w, 1).unwrap();
    let b = replay(&d, &chisel(25, 2), &w, 1).unwrap();
    let c = replay(&d, &chisel(25, 2), &w, 2).unwrap();
    assert_eq!(a, b);
    assert_ne!(a.latencies_us, c.latencies_us);
    d.service_cv = 0.0;
    let e = replay(&d, &chisel(25, 2), &w, 1).unwrap();
    let f = replay(&d, &chisel(25, 2), &w, 99).unwrap();
    assert_eq!(e, f);
}

#[test]
fn bad_inputs_are_rejected() {
    let d = dep(1, 1, 1, 0.0);
    assert!(replay(&d, &chisel(0, 1), &wl(&[0.0], &[1]), 0).is_err());
    assert!(replay(&d, &chisel(5, 0), &wl(&[0.0], &[1]), 0).is_err());
    assert!(replay(&d, &chisel(5, 1), &wl(&[1.0, 0.0], &[1, 1]), 0).is_err());
    assert!(replay(&d, &chisel(5, 1), &wl(&[0.0], &[0]), 0).is_err());
    let mut w = wl(&[0.0], &[1]);
    w.server_of = vec![3];
    assert!(replay(&d, &chisel(5, 1), &w, 0).is_err());
    assert!(replay(&dep(1, 0, 1, 0.0), &chisel(5, 1), &wl(&[0.0], &[1]), 0).is_err());
}

// ---- sharded pool -------------------------------------------------------------------------------------------

#[test]
fn sharded_batching_sends_one_multiget_per_server_touched() {
    // 20 keys on server 0 (11 + 60 = 71 µs) and 10 on server 1 (41 µs), in parallel: the request takes 71.
    let r = run(
        &dep(2, 1, 2, 0.0),
        &Policy::Batching(BatchingConfig),
        &sharded(&[0.0], &[&[(0, 20), (1, 10)]]),
    );
    assert!(close(&r.latencies_us, &[71.0]), "{:?}", r.latencies_us);
    assert_eq!((r.queries, r.query_keys, r.query_threads), (2, 30, 2));
}

#[test]
fn sharded_chisel_splits_each_server_batch_of_an_elephant() {
    // 30 keys > threshold 20: an elephant. Server 0's batch of 20 becomes two chunks of 10 on the lane's two
    // threads; with one worker the second waits for the first: at server 5, processed 16..27, back 27 + 25 = 52.
    // Server 1's batch of 10 is one chunk (41 µs).
    let r = run(
        &dep(2, 1, 4, 0.0),
        &chisel(10, 1),
        &sharded(&[0.0], &[&[(0, 20), (1, 10)]]),
    );
    assert!(close(&r.latencies_us, &[52.0]), "{:?}", r.latencies_us);
    assert_eq!((r.queries, r.query_threads), (3, 4));
    assert_eq!(r.server_wait_us, 11.0);
}

#[test]
fn sharded_chisel_decides_elephants_on_the_request_total() {
    // 15 keys ≤ 20: a mouse, so server 0's batch of 15 is not split although it is larger than L = 10.
    let r = run(
        &dep(2, 1, 4, 0.0),
        &chisel(10, 1),
        &sharded(&[0.0], &[&[(0, 15)]]),
    );
    assert!(close(&r.latencies_us, &[56.0]), "{:?}", r.latencies_us);
    assert_eq!(r.queries, 1);
}

#[test]
fn sharded_chisel_merges_mice_per_server_lane() {
    // B = 2, setup 10, one thread per lane. Mouse A (t=0): 2 keys on server 0, 3 on server 1. Mouse B (t=1): 4
    // keys on server 0, joins A's group on lane 0 and is piggybacked at the end of A's setup (t=10): one query of
    // 6 keys, back at 10 + 11 + 18 = 39. A's lane-1 query (3 keys) is back at 10 + 20 = 30.
    let r = run(
        &dep(2, 1, 2, 10.0),
        &chisel(10, 2),
        &sharded(&[0.0, 1.0], &[&[(0, 2), (1, 3)], &[(0, 4)]]),
    );
    assert!(
        close(&r.latencies_us, &[39.0, 38.0]),
        "{:?}",
        r.latencies_us
    );
    assert_eq!((r.queries, r.merged_queries, r.query_keys), (2, 1, 9));
}

#[test]
fn sharded_workload_is_checked() {
    let mut w = sharded(&[0.0], &[&[(0, 20), (1, 10)]]);
    w.keys[0] = 31;
    let err = replay(&dep(2, 1, 2, 0.0), &Policy::Batching(BatchingConfig), &w, 7).unwrap_err();
    assert!(err.contains("batches hold 30 keys"), "{err}");
    let w = sharded(&[0.0], &[&[(2, 5)]]);
    let err = replay(&dep(2, 1, 2, 0.0), &Policy::Batching(BatchingConfig), &w, 7).unwrap_err();
    assert!(err.contains("server 2 is not in 0..2"), "{err}");
}
