//! The per-partition client/coordinator cost (`Cluster::with_client_key`): hand-worked latencies of one- and
//! four-key requests (alone and with the measured client round trip), the cost outside the coordinator (threshold
//! samples, timeouts, selectors unchanged), the closed loop waiting for the reported completion, 0 changing
//! nothing, and a bad value named.
mod common;

use std::sync::Arc;

use common::{
    assert_same_engine, busy_cluster, busy_stock, closed_one_thread, single_slot_cluster, Lcg, MS,
};
use kvsim_core::{replay, Cluster, ReplayConfig, RunResult, Workload};

fn go(c: &Cluster, wl: &Workload, policy: &str) -> RunResult {
    let cfg = ReplayConfig {
        warmup: 0.0,
        ..ReplayConfig::build(policy, &[]).unwrap()
    };
    replay(c, wl, &cfg).unwrap()
}

fn keyed(c: &Cluster, ns: u64) -> Cluster {
    c.clone().with_client_key(ns).unwrap()
}

/// Four single-slot servers, RF 1 (group g on server g), d = 0.5 ms; a one-key request at 0, a four-key request
/// at 10 ms (one key on each server: its reads run in parallel), and a four-key request at 20 ms whose keys share
/// one group (one opset of four ops, read one after the other on server 0). Every read 1 ms.
fn one_and_four() -> (Cluster, Workload) {
    let c = single_slot_cluster(4, 1, MS / 2);
    let wl = Workload::from_parts(
        &[
            (0, vec![(0, vec![MS])]),
            (10 * MS, (0..4).map(|g| (g, vec![MS])).collect()),
            (20 * MS, vec![(0, vec![MS; 4])]),
        ],
        1,
    );
    (c, wl)
}

#[test]
fn a_four_key_request_pays_three_times_the_cost_a_one_key_request_does_not() {
    let (c, wl) = one_and_four();
    // engine: 0.5 + 1 + 0.5 = 2 ms (one key, and four keys in parallel); 0.5 + 4 + 0.5 = 5 ms (four in a row)
    assert_eq!(go(&c, &wl, "fifo").latency_ns, vec![2 * MS, 2 * MS, 5 * MS]);
    let cost = 70_000; // 70 µs a partition beyond the first
    for policy in ["fifo", "rein", "stock"] {
        let r = go(&keyed(&c, cost), &wl, policy);
        assert_eq!(
            r.latency_ns,
            vec![2 * MS, 2 * MS + 3 * cost, 5 * MS + 3 * cost],
            "{policy}"
        );
        assert_eq!(r.latency_ns[1] - r.latency_ns[0], 3 * cost);
    }
}

#[test]
fn the_cost_adds_to_the_measured_round_trip() {
    // a round trip of exactly 1.25 ms replaces the two 0.5 ms hops; the per-partition cost comes on top
    let (c, wl) = one_and_four();
    let cost = 40_000;
    let both = keyed(&c, cost)
        .with_client_rtt(Some(Arc::from(vec![1_250_000, 1_250_000])))
        .unwrap();
    let r = go(&both, &wl, "fifo");
    assert_eq!(
        r.latency_ns,
        vec![
            MS + 1_250_000,
            MS + 1_250_000 + 3 * cost,
            4 * MS + 1_250_000 + 3 * cost
        ]
    );
}

#[test]
fn zero_changes_nothing() {
    let (c, wl) = one_and_four();
    let (a, b) = (go(&c, &wl, "stock"), go(&keyed(&c, 0), &wl, "stock"));
    assert_eq!(
        (a.latency_ns, a.arrival_ns, a.events, a.served_ops),
        (b.latency_ns, b.arrival_ns, b.events, b.served_ops)
    );
}

#[test]
fn the_cost_stays_outside_the_coordinator() {
    // 6 servers × 2 slots, RF 3, two clients, stock with its p99 speculative retry, read timeouts and the dynamic
    // snitch, open loop, requests of 1 to 6 keys. The cost changes nothing inside the engine: the same extra reads,
    // timeouts, served ops and events; each request's latency moves by exactly (keys − 1) × the cost.
    let c = busy_cluster();
    let mut parts = Vec::new();
    let mut keys = Vec::new();
    let mut lcg = Lcg(11);
    for r in 0..3000u64 {
        let mut opsets = Vec::new();
        let x = lcg.next();
        let n = 1 + (x >> 50) % 6;
        for _ in 0..n {
            let x = lcg.next();
            let demand = 100_000 + (x >> 40) % 900_000;
            opsets.push((((x >> 33) % c.groups() as u64) as u32, vec![demand]));
        }
        keys.push(n);
        parts.push((r * 150_000, opsets));
    }
    let wl = Workload::from_parts(&parts, 2);
    let rc = |c: &Cluster| busy_stock(c, &wl, 2.5);
    let cost = 123_456;
    let base = rc(&c);
    let with = rc(&keyed(&c, cost));
    assert_same_engine(&base, &with);
    let moved: Vec<u64> = base
        .latency_ns
        .iter()
        .zip(&keys)
        .map(|(&l, &n)| l + (n - 1) * cost)
        .collect();
    assert_eq!(with.latency_ns, moved);
}

#[test]
fn a_closed_loop_thread_waits_for_the_reported_completion() {
    // One thread, no think time, d = 0.5 ms, four-key requests read in parallel (2 ms each in the engine), a cost
    // of 1 ms a partition beyond the first: each takes 5 ms, and the next is issued when it is complete.
    let c = single_slot_cluster(4, 1, MS / 2);
    let four: Vec<(u32, Vec<u64>)> = (0..4).map(|g| (g, vec![MS])).collect();
    let wl = Workload::from_parts(&[(0, four.clone()), (0, four.clone()), (0, four)], 1);
    let closed = |c: &Cluster| closed_one_thread(c, &wl);
    let base = closed(&c);
    assert_eq!(base.arrival_ns, vec![0, 2 * MS, 4 * MS]);
    let r = closed(&keyed(&c, MS));
    assert_eq!(r.latency_ns, vec![5 * MS; 3]);
    assert_eq!(r.arrival_ns, vec![0, 5 * MS, 10 * MS]);
    assert_eq!(r.makespan_ns, 15 * MS);
}

#[test]
fn a_bad_cost_is_refused_naming_the_field() {
    let c = single_slot_cluster(1, 1, MS / 2);
    let e = c
        .clone()
        .with_client_key(2_000_000_000_000)
        .unwrap_err()
        .to_string();
    assert!(e.contains("'client_key_ns'"), "{e}");
    assert_eq!(c.with_client_key(5).unwrap().client_key_ns(), 5);
}
