//! Hand-worked schedules from the papers, replayed exactly.
mod common;

use kvsim_core::{replay, Cluster, ClusterConfig, PolicyConfig, ReplayConfig, Workload};

use common::MS;

/// Three single-slot servers, RF 1, no network latency, 1 op/ms: group g is served by server g.
fn three_servers() -> Cluster {
    common::single_slot_cluster(3, 1, 0)
}

fn latencies(wl: &Workload, policy: &str, size_aware: bool) -> Vec<u64> {
    let rc = ReplayConfig {
        warmup: 0.0,
        size_aware_cost: size_aware,
        ..ReplayConfig::new(PolicyConfig::build(policy, &[]).unwrap())
    };
    let r = replay(&three_servers(), wl, &rc).unwrap();
    r.latency_ns.iter().map(|l| l / MS).collect()
}

/// Rein Fig. 2: R1 = {A @Srv1, B C @Srv2}, R2 = {D @Srv3, E @Srv1}, both at t = 0.
fn rein_fig2() -> Workload {
    Workload::from_parts(
        &[
            (0, vec![(0, vec![MS]), (1, vec![MS, MS])]),
            (0, vec![(2, vec![MS]), (0, vec![MS])]),
        ],
        1,
    )
}

#[test]
fn rein_fig2_fifo_serves_a_before_e() {
    // Fig. 2a: both requests complete at 2, average 2.
    assert_eq!(latencies(&rein_fig2(), "fifo", false), vec![2, 2]);
}

#[test]
fn rein_fig2_multiget_aware_policies_serve_e_first() {
    // Fig. 2b: R2 completes at 1, average 1.5.
    for p in [
        "rein",
        "rein-sbf",
        "rein-sds",
        "brb-equalmax",
        "brb-unifincr",
        "oracle",
    ] {
        let l = latencies(&rein_fig2(), p, false);
        assert_eq!(l, vec![2, 1], "policy {p}");
        assert_eq!(l.iter().sum::<u64>() as f64 / 2.0, 1.5);
    }
}

/// TailX Fig. 2: Srv1 holds A B, Srv2 C D, Srv3 E F G H I; D is large (5 units), the rest 1 unit.
/// mget(A,B,C), mget(D,E), mget(F,G), mget(H,I) are queued at t = 0 in this order.
fn tailx_fig2() -> Workload {
    Workload::from_parts(
        &[
            (0, vec![(0, vec![MS, MS]), (1, vec![MS])]),
            (0, vec![(1, vec![5 * MS]), (2, vec![MS])]),
            (0, vec![(2, vec![MS, MS])]),
            (0, vec![(2, vec![MS, MS])]),
        ],
        1,
    )
}

#[test]
fn tailx_fig2_fifo() {
    // Left of Fig. 2: 2, 6, 3, 5 — average 4.
    let l = latencies(&tailx_fig2(), "fifo", false);
    assert_eq!(l, vec![2, 6, 3, 5]);
    assert_eq!(l.iter().sum::<u64>() as f64 / 4.0, 4.0);
}

#[test]
fn tailx_fig2_size_aware_slack_procrastinates_e() {
    // Right of Fig. 2: E (delay allowance 5) waits behind F G H I: 2, 6, 2, 4 — average 3.5.
    let l = latencies(&tailx_fig2(), "rein-sds", true);
    assert_eq!(l, vec![2, 6, 2, 4]);
    assert_eq!(l.iter().sum::<u64>() as f64 / 4.0, 3.5);
    // Size-oblivious SDS (op counts) treats D and E as equal bottlenecks and serves D before C at Srv2.
    assert_eq!(
        latencies(&tailx_fig2(), "rein-sds", false),
        vec![6, 5, 2, 4]
    );
}

#[test]
fn network_latency_adds_two_hops() {
    let c = Cluster::new(ClusterConfig {
        servers: 3,
        slots: 1,
        replication: 1,
        net_latency_ns: 50_000,
        service_rate: 1000.0,
        clients: 1,
        vnodes: 1,
    })
    .unwrap();
    let r = replay(
        &c,
        &rein_fig2(),
        &ReplayConfig::new(PolicyConfig::build("fifo", &[]).unwrap()),
    )
    .unwrap();
    assert_eq!(r.latency_ns, vec![2 * MS + 100_000, 2 * MS + 100_000]);
    assert_eq!(r.events, 2 + 2 + 5);
}
