//! The coordinator section under a patched policy: hand-worked schedules replayed exactly, and the section off
//! (every policy's default but `stock`'s) is the policy's own replay.
mod common;

use common::{cluster, run, MS};
use kvsim_core::{Cluster, ClusterConfig, ReplayConfig, Workload};

#[test]
fn rein_with_one_slow_replica_and_a_50ms_retry() {
    // d = 0.5 ms. Server 0 runs at 1/100 speed: R0 (1 ms on g0) reaches it at 0.5 and would end at 100.5
    // (answer 101). speculative_retry = 50ms: at 50 the coordinator reads server 1: reaches it at 50.5, served
    // 50.5–51.5, answered at 52 → 52 ms; the extra read is served (real load) and wins.
    let c = cluster(MS / 2);
    let wl = Workload::from_parts(&[(0, vec![(0, vec![MS])])], 1);
    for policy in ["rein", "rein-sbf", "brb-equalmax", "fifo"] {
        assert_eq!(
            run(&c, &wl, policy, 0.01, &[]).latency_ns,
            vec![101 * MS],
            "{policy}"
        );
        let r = run(
            &c,
            &wl,
            policy,
            0.01,
            &[("spec_kind", 3.0), ("spec_fixed_ms", 50.0)],
        );
        assert_eq!(r.latency_ns, vec![52 * MS], "{policy}");
        assert_eq!((r.copies.ops, r.copies.wins), (1, 1), "{policy}");
    }
}

#[test]
fn rein_with_a_2ms_retry_over_three_requests() {
    // d = 0, server 0 at 1/10 speed. R0 at 0: one op on g0 → server 0 (10 ms: 0–10). R1 at 1: g0 twice, an opset of
    // two ops (round-robin: → server 1, served 1–2 and 2–3). R2 at 1.5: one op on g0 → server 0 (queued behind R0).
    // With speculative_retry = 2ms, R0's read is retried at 2 on server 1, where R1's second op starts at 2
    // (2–3): the retry is served 3–4 → R0 at 4.
    // R2's read (at server 0 from 1.5, behind R0's 0–10) is retried at 3.5 on server 1: served 4–5 → 3.5 ms.
    // R1's timer (at 3) fires before its second op's end at 3 (armed earlier): that op is retried too, at server
    // 0, where it loses — three extra reads, two wins.
    let c = cluster(0);
    let wl = Workload::from_parts(
        &[
            (0, vec![(0, vec![MS])]),
            (MS, vec![(0, vec![MS, MS])]),
            (3 * MS / 2, vec![(0, vec![MS])]),
        ],
        1,
    );
    let off = run(&c, &wl, "rein", 0.1, &[]);
    // Without the knob: R0 ends at 10; R2 waits for it at server 0 and is served 10–20 → 18.5 ms.
    assert_eq!(off.latency_ns, vec![10 * MS, 2 * MS, 37 * MS / 2]);
    let r = run(
        &c,
        &wl,
        "rein",
        0.1,
        &[("spec_kind", 3.0), ("spec_fixed_ms", 2.0)],
    );
    assert_eq!(r.latency_ns, vec![4 * MS, 2 * MS, 7 * MS / 2]);
    assert_eq!((r.copies.ops, r.copies.wins), (3, 2));
}

#[test]
fn always_doubles_the_reads_of_rein() {
    let c = cluster(MS / 2);
    let parts: Vec<_> = (0..20u64)
        .map(|i| (i * 10 * MS, vec![(0, vec![MS, MS])]))
        .collect();
    let wl = Workload::from_parts(&parts, 1);
    assert_eq!(run(&c, &wl, "rein", 1.0, &[]).copies.ops, 0);
    let always = run(&c, &wl, "rein", 1.0, &[("spec_kind", 1.0)]);
    assert_eq!(always.copies.ops, 40, "one extra read per read");
    assert_eq!(always.served_ops, 80);
}

#[test]
fn the_section_off_is_the_policys_own_replay() {
    // Settings that change nothing (NEVER, one execution, the `in` shape, the Python driver) give the replay of
    // the policy without them, event for event; only the reported parameters name them.
    let c = Cluster::new(ClusterConfig {
        servers: 6,
        replication: 3,
        clients: 3,
        ..ClusterConfig::default()
    })
    .unwrap();
    let parts: Vec<_> = (0..400u64)
        .map(|i| {
            let ops: Vec<(u32, Vec<u64>)> = (0..1 + i % 4)
                .map(|k| (((i + k) % 6) as u32, vec![MS / 4 + (i * k) % 7 * MS / 10]))
                .collect();
            (i * MS / 3, ops)
        })
        .collect();
    let wl = Workload::from_parts(&parts, 3);
    for policy in ["rein", "rein-sds", "brb-unifincr", "tailx", "oracle"] {
        let base = run(&c, &wl, policy, 0.2, &[]);
        let off = run(
            &c,
            &wl,
            policy,
            0.2,
            &[
                ("spec_kind", 0.0),
                ("se_max", 1.0),
                ("shape", 0.0),
                ("driver", 1.0),
            ],
        );
        assert_eq!(base.latency_ns, off.latency_ns, "{policy}");
        assert_eq!(base.events, off.events, "{policy}");
        assert!(off.params.iter().any(|(k, v)| *k == "driver" && *v == 1.0));
        assert!(
            !base.params.iter().any(|(k, _)| *k == "spec_kind"),
            "{policy}"
        );
    }
}

#[test]
fn duplicate_and_speculative_refuse_the_section() {
    for policy in ["duplicate", "speculative"] {
        let e = ReplayConfig::build(policy, &[("spec_kind".into(), 1.0)]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("spec_kind") && msg.contains(policy), "{msg}");
    }
    // `speculative`'s own `window` is its own parameter, not the coordinator's.
    assert!(ReplayConfig::build("speculative", &[("window".into(), 50.0)]).is_ok());
}

#[test]
fn boosted_priority_queues_take_the_coordinators_copies() {
    // rein-sbf and rein-sds with a starvation boost: the retries' ids (op + n_ops) run past the op count (a
    // replay once panicked there). Server 0 at 1/100 speed, a 2 ms retry: the copy at server 1 answers.
    let c = cluster(MS / 2);
    let wl = Workload::from_parts(&[(0, vec![(0, vec![MS])])], 1);
    for policy in ["rein-sbf", "rein-sds"] {
        let r = run(
            &c,
            &wl,
            policy,
            0.01,
            &[
                ("boost_after_ms", 1.0),
                ("spec_kind", 3.0),
                ("spec_fixed_ms", 2.0),
            ],
        );
        // retry at 2, reaches server 1 at 2.5, served 2.5–3.5, answered at 4
        assert_eq!(r.latency_ns, vec![4 * MS], "{policy}");
        assert_eq!((r.copies.ops, r.copies.wins), (1, 1), "{policy}");
    }
}
