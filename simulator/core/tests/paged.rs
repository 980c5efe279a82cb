//! `paged` (Cassandra's `MultiPartitionPager`): a paged `IN` query's partitions are read one at a time, each with
//! its own latency sample and its own speculative retry. Hand-worked schedules replayed exactly.
mod common;

use common::{cluster, MS};
use kvsim_core::{ReplayConfig, RunResult, Workload};

/// `stock` on [`cluster`] (3 single-slot servers, RF 2, g0 → [0, 1], g1 → [1, 2], g2 → [2, 0]), d = 0.5 ms;
/// server 0 at `slow` speed.
fn run(wl: &Workload, slow: f64, params: &[(&str, f64)]) -> RunResult {
    common::run(&cluster(MS / 2), wl, "stock", slow, params)
}

const NEVER: (&str, f64) = ("spec_kind", 0.0);
const PAGED: (&str, f64) = ("paged", 1.0);

fn fixed(ms: f64) -> [(&'static str, f64); 2] {
    [("spec_kind", 3.0), ("spec_fixed_ms", ms)]
}

/// One request at 0 of three 1 ms keys on `groups`, in this order.
fn one_request(groups: [u32; 3]) -> Workload {
    Workload::from_parts(&[(0, groups.iter().map(|&g| (g, vec![MS])).collect())], 1)
}

#[test]
fn the_partitions_are_read_one_after_another() {
    // Each key on its own server. In parallel: sent at 0, served 0.5–1.5, answered at 2 → 2 ms. Paged: key 1
    // answered at 2, key 2 sent then (answered at 4), key 3 at 4 (answered at 6) → 6 ms.
    let wl = one_request([0, 1, 2]);
    assert_eq!(run(&wl, 1.0, &[NEVER]).latency_ns, vec![2 * MS]);
    let paged = run(&wl, 1.0, &[NEVER, PAGED]);
    assert_eq!(paged.latency_ns, vec![6 * MS]);
    assert_eq!(paged.copies.ops, 0);
    // Off is the default: the same replay as without the parameter.
    assert_eq!(
        run(&wl, 1.0, &[NEVER, ("paged", 0.0)]).latency_ns,
        vec![2 * MS]
    );
}

#[test]
fn every_partition_read_speculates_from_the_requests_start() {
    // Keys on g1, g2, g0: servers 1, 2 and the slow server 0 (1/100 speed: its
    // read would end at 100.5+). Fixed 5 ms. In parallel: the g0 read is retried at 5 on server 1 (5.5–6.5)
    // → 7 ms. Paged: key 1 sent at 0, answered at 2; key 2 sent at 2, answered at 4; key 3 sent at 4 waits until
    // the request's start + 5 (`shouldSpeculateAndMaybeWait`: `startedAtNanos() + T`, not its own send + T),
    // retried at 5 on server 1 (5.5–6.5), answered at 7 → 7 ms: one extra read, which wins.
    let wl = one_request([1, 2, 0]);
    let parallel = run(&wl, 0.01, &fixed(5.0));
    assert_eq!(parallel.latency_ns, vec![7 * MS]);
    let paged = run(&wl, 0.01, &[&fixed(5.0)[..], &[PAGED]].concat());
    assert_eq!(paged.latency_ns, vec![7 * MS]);
    assert_eq!((paged.copies.ops, paged.copies.wins), (1, 1));
    // 3 ms: key 2 (sent at 2) is retried at 3 on server 0 (the original still wins, at 4); key 3, sent at 4,
    // is past start + 3 and retried at once, at 4, on server 1 (4.5–5.5), answered at 6 → 6 ms: two extra
    // reads, one win.
    let paged = run(&wl, 0.01, &[&fixed(3.0)[..], &[PAGED]].concat());
    assert_eq!(paged.latency_ns, vec![6 * MS]);
    assert_eq!((paged.copies.ops, paged.copies.wins), (2, 1));
}

#[test]
fn the_99p_threshold_samples_each_partition_read() {
    // R0 at 0: two 1 ms keys on g1, g2 (servers 1, 2). R1 at 20: one 1 ms key on g0 (slow server 0).
    // 99p over the exact window, warm start at the first sample.
    let wl = Workload::from_parts(
        &[
            (0, vec![(1, vec![MS]), (2, vec![MS])]),
            (20 * MS, vec![(0, vec![MS])]),
        ],
        1,
    );
    let p99 = [
        ("spec_kind", 2.0),
        ("spec_percentile", 99.0),
        ("spec_warm", 1.0),
        ("spec_histogram", 0.0),
    ];
    // In parallel R0 takes 2 ms: its query's 2 ms, once per key → threshold 2 ms; R1 retried at 22 on server
    // 1 (22.5–23.5) → 4 ms.
    let parallel = run(&wl, 0.01, &p99);
    assert_eq!(parallel.latency_ns, vec![2 * MS, 4 * MS]);
    // Paged R0 takes 4 ms, but each partition read 2 ms: the samples are {2, 2} (not the query's 4 ms twice)
    // → threshold 2 ms → R1 as above. (Key 2's read, sent at 2 under the 2 ms threshold, is past the request's
    // start + 2 ms: retried at once, at 2, on server 0; the original answers first, at 4. R1's read then
    // queues on server 0 behind that copy, and its retry at 22 answers.)
    let paged = run(&wl, 0.01, &[&p99[..], &[PAGED]].concat());
    assert_eq!(paged.latency_ns, vec![4 * MS, 4 * MS]);
    assert_eq!((paged.copies.ops, paged.copies.wins), (2, 1));
}

#[test]
fn the_99p_threshold_is_not_the_paged_query_latency() {
    // As above with R0's keys both on g1 (server 1, one opset): paged, R0 reads them one after another (0–2,
    // 2–4) → 4 ms, samples {2, 2}. Were the query's 4 ms the samples, R1 (slow server 0) would be retried at
    // 24 → 6 ms; it is retried at 22 → 4 ms.
    let wl = Workload::from_parts(
        &[(0, vec![(1, vec![MS, MS])]), (20 * MS, vec![(0, vec![MS])])],
        1,
    );
    let p99 = [
        ("spec_kind", 2.0),
        ("spec_percentile", 99.0),
        ("spec_warm", 1.0),
        ("spec_histogram", 0.0),
    ];
    // In parallel: both keys reach server 1 at 0.5, served 0.5–1.5–2.5 → the query's 3 ms, twice → R1 retried
    // at 23 → 5 ms.
    assert_eq!(run(&wl, 0.01, &p99).latency_ns, vec![3 * MS, 5 * MS]);
    let paged = run(&wl, 0.01, &[&p99[..], &[PAGED]].concat());
    assert_eq!(paged.latency_ns, vec![4 * MS, 4 * MS]);
}

#[test]
fn a_partition_sent_after_the_deadline_times_its_request_out() {
    // Read timeout 20 ms, NEVER. Keys on g1 (server 1), g0 (the slow server 0), g2: key 1 answered at 2; key 2
    // sent at 2 to server 0, served 2.5–102.5 (it started in time), answered at 103. Key 3 would leave then, but
    // the request's wait ends at its start + 20 (`computeDeadline` counts from `startedAtNanos`): the request is
    // answered with a timeout at once (latency 20 ms) and key 3 is never read.
    let wl = one_request([1, 0, 2]);
    let r = run(
        &wl,
        0.01,
        &[NEVER, PAGED, ("read_timeout_ms", 20.0), ("drop_expired", 1.0)],
    );
    assert_eq!(r.latency_ns, vec![20 * MS]);
    assert_eq!((r.timeouts.requests, r.timeouts.dropped_reads), (1, 0));
    assert_eq!(r.served_ops, 2);
}

#[test]
fn paged_refuses_what_it_does_not_model() {
    for (name, value) in [("shape", 1.0), ("chunk", 2.0), ("se_max", 2.0)] {
        let params = vec![("paged".to_string(), 1.0), (name.to_string(), value)];
        let err = ReplayConfig::build("stock", &params)
            .unwrap_err()
            .to_string();
        assert!(err.contains(name), "{err}");
    }
}
