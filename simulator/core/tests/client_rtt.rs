//! The client ↔ coordinator round trip as a measured distribution (`Cluster::with_client_rtt`): hand-worked
//! latencies, the draws outside the coordinator (threshold samples, timeouts, selectors unchanged), the closed
//! loop waiting for the reported completion, and bad quantiles named.
mod common;

use std::sync::Arc;

use common::{
    assert_same_engine, busy_cluster, busy_stock, closed_one_thread, single_slot_cluster, Lcg, MS,
};
use kvsim_core::client_rtt::STREAM_CLIENT_RTT;
use kvsim_core::rng::Rng;
use kvsim_core::{replay, Cluster, ReplayConfig, RunResult, Workload};

fn with_rtt(c: &Cluster, q: &[u64]) -> Cluster {
    c.clone().with_client_rtt(Some(Arc::from(q))).unwrap()
}

fn go(c: &Cluster, wl: &Workload, policy: &str, params: &[(&str, f64)], seed: u64) -> RunResult {
    let params: Vec<(String, f64)> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let cfg = ReplayConfig {
        warmup: 0.0,
        seed,
        ..ReplayConfig::build(policy, &params).unwrap()
    };
    replay(c, wl, &cfg).unwrap()
}

/// The `n` first uniforms of the round trip's stream of `seed`.
fn uniforms(seed: u64, n: usize) -> Vec<f64> {
    let mut rng = Rng::new(seed, STREAM_CLIENT_RTT);
    (0..n).map(|_| rng.uniform()).collect()
}

#[test]
fn one_request_meets_its_drawn_round_trip_in_place_of_the_two_hops() {
    // d = 0.5 ms, one 1 ms read: the engine's latency is 0.5 + 1 + 0.5 = 2 ms. With quantiles [1 ms, 3 ms] the
    // round trip is 1 ms + u · 2 ms (u: the stream's first uniform), so the latency is 1 ms + that round trip.
    let c = single_slot_cluster(1, 1, MS / 2);
    let wl = Workload::from_parts(&[(0, vec![(0, vec![MS])])], 1);
    assert_eq!(go(&c, &wl, "fifo", &[], 0).latency_ns, vec![2 * MS]);
    for seed in [0u64, 1, 2, 7] {
        let u = uniforms(seed, 1)[0];
        let rtt = MS + (u * 2e6).round() as u64;
        let r = go(&with_rtt(&c, &[MS, 3 * MS]), &wl, "fifo", &[], seed);
        assert_eq!(r.latency_ns, vec![MS + rtt], "seed {seed}");
        assert!((2 * MS..=4 * MS).contains(&r.latency_ns[0]));
        // a single point: exactly service + x, whatever the draw
        let r = go(
            &with_rtt(&c, &[1_234_567, 1_234_567]),
            &wl,
            "fifo",
            &[],
            seed,
        );
        assert_eq!(r.latency_ns, vec![MS + 1_234_567], "seed {seed}");
    }
    // the quantiles' ends are reached: [x, x] with x = 0 leaves the service alone
    let r = go(&with_rtt(&c, &[0, 0]), &wl, "fifo", &[], 0);
    assert_eq!(r.latency_ns, vec![MS]);
}

#[test]
fn each_request_draws_in_request_order_and_every_policy_meets_the_same_draws() {
    // Three requests at 0, 10, 20 ms, one 1 ms read each, no queueing, d = 0.25 ms: engine latency 1.5 ms each.
    // Quantiles [2, 4, 10] ms (p0, p50, p100): u < 0.5 → 2 + 4u ms, else 4 + 12 (u − 0.5) ms.
    let c = single_slot_cluster(1, 1, MS / 4);
    let wl = Workload::from_parts(
        &[
            (0, vec![(0, vec![MS])]),
            (10 * MS, vec![(0, vec![MS])]),
            (20 * MS, vec![(0, vec![MS])]),
        ],
        1,
    );
    let q = [2 * MS, 4 * MS, 10 * MS];
    let want: Vec<u64> = uniforms(5, 3)
        .iter()
        .map(|&u| {
            let pos = u * 2.0;
            let i = pos.floor() as usize;
            MS + q[i] + ((pos - i as f64) * (q[i + 1] - q[i]) as f64).round() as u64
        })
        .collect();
    for policy in ["fifo", "rein", "brb-equalmax", "stock"] {
        let r = go(&with_rtt(&c, &q), &wl, policy, &[], 5);
        assert_eq!(r.latency_ns, want, "{policy}");
    }
}

#[test]
fn the_round_trip_stays_outside_the_coordinator() {
    // 6 servers × 2 slots, RF 3, two clients, stock with its p99 speculative retry, read timeouts and the dynamic
    // snitch, open loop. The draws change nothing inside the engine: the same extra reads, timeouts, served ops
    // and events; each request's latency moves by exactly its draw less the two hops.
    let c = busy_cluster();
    let mut parts = Vec::new();
    let mut lcg = Lcg(11);
    for r in 0..4000u64 {
        let x = lcg.next();
        let demand = 100_000 + (x >> 40) % 900_000;
        parts.push((
            r * 60_000,
            vec![(((x >> 33) % c.groups() as u64) as u32, vec![demand])],
        ));
    }
    let wl = Workload::from_parts(&parts, 2);
    let q: Vec<u64> = vec![30_000, 200_000, 400_000, 5 * MS];
    let rc = |c: &Cluster| busy_stock(c, &wl, 2.0);
    let base = rc(&c);
    let with = rc(&with_rtt(&c, &q));
    assert_same_engine(&base, &with);
    let draws = kvsim_core::client_rtt::draws(&Arc::from(q), wl.requests(), 9);
    let moved: Vec<u64> = base
        .latency_ns
        .iter()
        .zip(&draws)
        .map(|(&l, &rtt)| l - 2 * 50_000 + rtt)
        .collect();
    assert_eq!(with.latency_ns, moved);
}

#[test]
fn a_closed_loop_thread_waits_for_the_reported_completion() {
    // One thread, no think time, d = 0.5 ms, 1 ms reads, round trip exactly 3 ms: each request takes 1 + 3 = 4 ms
    // and the next one is issued when it is complete at the client.
    let c = single_slot_cluster(1, 1, MS / 2);
    let wl = Workload::from_parts(
        &[
            (0, vec![(0, vec![MS])]),
            (0, vec![(0, vec![MS])]),
            (0, vec![(0, vec![MS])]),
        ],
        1,
    );
    let closed = |c: &Cluster| closed_one_thread(c, &wl);
    let base = closed(&c);
    assert_eq!(base.arrival_ns, vec![0, 2 * MS, 4 * MS]);
    let r = closed(&with_rtt(&c, &[3 * MS, 3 * MS]));
    assert_eq!(r.latency_ns, vec![4 * MS; 3]);
    assert_eq!(r.arrival_ns, vec![0, 4 * MS, 8 * MS]);
    assert_eq!(r.makespan_ns, 12 * MS);
    // A round trip shorter than one hop (0.2 ms < d): the latency is 1.2 ms, but the engine's answer leaves its
    // server at 1.5 ms; the thread cannot issue before that instant.
    let r = closed(&with_rtt(&c, &[MS / 5, MS / 5]));
    assert_eq!(r.latency_ns, vec![6 * MS / 5; 3]);
    assert_eq!(r.arrival_ns, vec![0, 3 * MS / 2, 3 * MS]);
    assert_eq!(r.makespan_ns, 9 * MS / 2);
}

#[test]
fn the_stop_rule_counts_the_reported_latencies() {
    // Ten requests, engine latency 2 ms each; with a 10 ms round trip every one is above 5 ms: a rule stopping
    // after 3 such requests stops the replay.
    let c = single_slot_cluster(1, 1, MS / 2);
    let parts: Vec<_> = (0..10u64)
        .map(|i| (i * 20 * MS, vec![(0, vec![MS])]))
        .collect();
    let wl = Workload::from_parts(&parts, 1);
    let cfg = ReplayConfig {
        warmup: 0.0,
        stop: Some(kvsim_core::StopRule {
            above_ns: 5 * MS,
            quantile: 0.7,
        }),
        ..ReplayConfig::build("fifo", &[]).unwrap()
    };
    assert!(!replay(&c, &wl, &cfg).unwrap().stopped);
    let r = replay(&with_rtt(&c, &[10 * MS, 10 * MS]), &wl, &cfg).unwrap();
    assert!(r.stopped);
}

#[test]
fn bad_quantiles_are_refused_naming_the_field() {
    let c = single_slot_cluster(1, 1, MS / 2);
    for bad in [vec![MS], vec![], vec![3 * MS, 2 * MS, 4 * MS]] {
        let e = c
            .clone()
            .with_client_rtt(Some(Arc::from(bad.clone())))
            .unwrap_err()
            .to_string();
        assert!(e.contains("'client_rtt_ns'"), "{bad:?}: {e}");
    }
    assert!(c.with_client_rtt(None).unwrap().client_rtt().is_none());
}
