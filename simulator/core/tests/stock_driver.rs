//! `stock`'s client side (the driver's speculative executions and query plans, the multiget shape):
//! hand-worked schedules replayed exactly.
use kvsim_core::server_model::ServerModelConfig;
use kvsim_core::stall_schedule::{StallInterval, StallSchedule};
use kvsim_core::{replay, Cluster, ClusterConfig, ReplayConfig, RunResult, Workload};

const MS: u64 = 1_000_000;

/// 3 single-slot servers, RF 2, d = 0.5 ms, one client; groups g0 → [0, 1], g1 → [1, 2], g2 → [2, 0].
fn cluster() -> Cluster {
    let c = Cluster::new(ClusterConfig {
        servers: 3,
        slots: 1,
        replication: 2,
        vnodes: 1,
        service_rate: 1000.0,
        net_latency_ns: MS / 2,
        clients: 1,
    })
    .unwrap();
    assert_eq!(
        (c.replicas(0), c.replicas(1), c.replicas(2)),
        (&[0, 1][..], &[1, 2][..], &[2, 0][..])
    );
    c
}

/// `stock` (coordinator retry NEVER unless given) with server 0 at 1/100 speed; replicas chosen round-robin per
/// (client, group), starting at the group's first replica.
fn run(wl: &Workload, params: &[(&str, f64)]) -> RunResult {
    let mut all: Vec<(String, f64)> = vec![("spec_kind".into(), 0.0)];
    all.extend(params.iter().map(|(k, v)| (k.to_string(), *v)));
    let cfg = ReplayConfig {
        servers: ServerModelConfig {
            speeds: vec![0.01, 1.0, 1.0],
            ..ServerModelConfig::default()
        },
        warmup: 0.0,
        seed: 0,
        ..ReplayConfig::build("stock", &all).unwrap()
    };
    replay(&cluster(), wl, &cfg).unwrap()
}

const PYTHON: (&str, f64) = ("driver", 1.0);
const PER_PARTITION: (&str, f64) = ("shape", 1.0);

fn hedge(delay_ms: f64, max: f64) -> [(&'static str, f64); 2] {
    [("se_delay_ms", delay_ms), ("se_max", max)]
}

fn one_key() -> Workload {
    Workload::from_parts(&[(0, vec![(0, vec![MS])])], 1)
}

/// As [`run`], with Cassandra's snitch (`dynamic-snitch`, updating every `update_ms`) choosing each
/// coordinator's replicas: the `per-partition` shape's coordinators are nodes, each with its own snitch.
fn run_snitch(wl: &Workload, update_ms: f64, params: &[(&str, f64)]) -> RunResult {
    let mut all: Vec<(String, f64)> = vec![("spec_kind".into(), 0.0)];
    all.extend(params.iter().map(|(k, v)| (k.to_string(), *v)));
    let cfg = ReplayConfig {
        servers: ServerModelConfig {
            speeds: vec![0.01, 1.0, 1.0],
            ..ServerModelConfig::default()
        },
        selector: kvsim_core::replica::SelectorConfig::build(
            "dynamic-snitch",
            &[("update_ms".into(), update_ms)],
        )
        .unwrap(),
        warmup: 0.0,
        seed: 0,
        ..ReplayConfig::build("stock", &all).unwrap()
    };
    replay(&cluster(), wl, &cfg).unwrap()
}

#[test]
fn one_slow_replica_and_a_5ms_driver_execution() {
    // R0 (1 ms on g0) goes to server 0 (1/100 speed): reaches it at 0.5, ends at 100.5, answered at 101.
    assert_eq!(run(&one_key(), &[]).latency_ns, vec![101 * MS]);
    // Driver delay 5 ms, max_executions 2, the `in` shape: the second execution's coordinator reads from the
    // snitch's choice (round-robin: now server 1): reaches it at 5.5, served 5.5–6.5, answered at 7 → 7 ms. The
    // first read is still served (real load): 2 reads for 1 key.
    let h = hedge(5.0, 2.0);
    let r = run(&one_key(), &[h[0], h[1]]);
    assert_eq!(r.latency_ns, vec![7 * MS]);
    assert_eq!((r.copies.ops, r.copies.wins), (1, 1));
    assert_eq!(r.served_ops, 2);
    // max_executions 1 (the default) = no driver speculation.
    let r = run(&one_key(), &[PYTHON, PER_PARTITION, ("se_delay_ms", 5.0)]);
    assert_eq!(r.copies.ops, 0);
}

#[test]
fn a_per_partition_coordinator_reads_the_ring_primary_through_its_own_snitch() {
    // Python driver (plan in ring order), per-partition, executions every 5 ms (at most 2), each node's snitch
    // updating every 10 ms. R0 at 0 and R1 at 300, one 1 ms key each on g0 = [0, 1].
    let wl = Workload::from_parts(
        &[(0, vec![(0, vec![MS])]), (300 * MS, vec![(0, vec![MS])])],
        1,
    );
    let h = hedge(5.0, 2.0);
    let r = run_snitch(&wl, 10.0, &[PYTHON, PER_PARTITION, h[0], h[1]]);
    // R0's query goes to node 0, whose snitch has no scores: `SimpleSnitch`'s ring order, the primary — itself.
    // The read is local and its server free: it runs inline (no hop, no retry timer), 0–100, answered at 100. At
    // 5 the second execution goes to node 1, whose snitch also keeps the ring order: it reads server 0 too
    // (5.5, behind the first read: 100–200, answered at 200.5: a sample of 195 ms from that execution's start).
    // R0: 100 ms. The update at 210 scores server 0 1 for node 1, itself none (0). R1's query: node 0 again
    // reads itself inline (300–400); its second execution, at 305, finds node 1's snitch sorting by score:
    // server 1, itself, inline (305–306) → R1 6 ms.
    assert_eq!(r.latency_ns, vec![100 * MS, 6 * MS]);
    assert_eq!((r.copies.ops, r.copies.wins), (2, 1));
    assert_eq!(r.served_ops, 4);
}

#[test]
fn an_answered_query_starts_no_more_executions() {
    // max_executions 3, delay 2 ms, `in`: the second execution (at 2, server 1: 2.5–3.5) is answered at 4 →
    // 4 ms; the third, due at 4, finds the query answered and is not sent.
    let h = hedge(2.0, 3.0);
    let r = run(&one_key(), &[h[0], h[1]]);
    assert_eq!(r.latency_ns, vec![4 * MS]);
    assert_eq!(
        r.copies.ops, 1,
        "the query was answered when the third execution was due"
    );
}

#[test]
fn a_zero_delay_doubles_every_read() {
    let parts: Vec<_> = (0..10u64)
        .map(|i| (i * 300 * MS, vec![(1, vec![MS, MS]), (2, vec![MS])]))
        .collect();
    let wl = Workload::from_parts(&parts, 1);
    let h = hedge(0.0, 2.0);
    for shape in [0.0, 1.0] {
        let r = run(&wl, &[("shape", shape), h[0], h[1]]);
        assert_eq!(r.copies.ops, 30, "shape {shape}: one extra read per read");
        assert_eq!(r.served_ops, 60);
    }
}

/// R0 at 0: three keys, each 1 ms, on g0, g1, g2 (input order).
fn three_keys() -> Workload {
    Workload::from_parts(&[(0, vec![(0, vec![MS]), (1, vec![MS]), (2, vec![MS])])], 1)
}

#[test]
fn per_partition_versus_in_on_a_three_key_multiget() {
    let h = hedge(5.0, 2.0);
    // per-partition (python, ring order; the nodes' snitches): k0 → node 0, which reads itself (slow: inline,
    // 0–100), k1 → node 1 and k2 → node 2 read themselves, answered at 1. At 5 only k0's query is unanswered:
    // its second execution goes to node 1, which reads the primary, server 0 (behind k0's read) → 100 ms, 1
    // extra read.
    let pp = run_snitch(&three_keys(), 100.0, &[PYTHON, PER_PARTITION, h[0], h[1]]);
    assert_eq!(pp.latency_ns, vec![100 * MS]);
    assert_eq!(pp.copies.ops, 1);
    // in (one IN query of the 3 keys): the first execution reads k0 at 0, k1 at 1, k2 at 2 (round-robin's first
    // picks). At 5 the query is unanswered (k0), so the driver re-sends the whole query: k0 → server 1 (answers
    // at 7), k1 → server 2, k2 → server 0 (behind the slow read). Latency 7 ms, 3 extra reads; the slow server
    // still serves k2's copy (after k0's read, at 1/100 speed): 6 reads served.
    let all = run(&three_keys(), &[h[0], h[1]]);
    assert_eq!(all.latency_ns, vec![7 * MS]);
    assert_eq!((all.copies.ops, all.served_ops), (3, 6));
    // in with chunk 1 (one IN query per key): only k0's query is re-sent → 1 extra read.
    let chunk1 = run(&three_keys(), &[h[0], h[1], ("chunk", 1.0)]);
    assert_eq!((chunk1.latency_ns[0], chunk1.copies.ops), (7 * MS, 1));
    // chunk 2: k0 and k1 in one query (re-sent: k0 → 1, k1 → 2), k2 alone (answered).
    let chunk2 = run(&three_keys(), &[h[0], h[1], ("chunk", 2.0)]);
    assert_eq!((chunk2.latency_ns[0], chunk2.copies.ops), (7 * MS, 2));
}

#[test]
fn per_partition_refuses_a_chunk() {
    let e =
        ReplayConfig::build("stock", &[("shape".into(), 1.0), ("chunk".into(), 4.0)]).unwrap_err();
    assert!(e.to_string().contains("chunk"), "{e}");
}

#[test]
fn an_in_query_records_its_whole_latency_for_each_key() {
    // d = 0, server 0 at 1/8 speed, `50p` with the warm start (no warm-up cut: each coordinator recomputes at its
    // first sample), replicas from `dynamic-snitch` (no update before 100 ms: the ring order; per partition, the
    // python driver's ring order sends each key's query to its primary, which reads itself). R0 at 0: k0 on g0
    // (server 0: 8 ms), k1 on g1 (server 1: 1 ms). Rb at 19: 0.5 ms on g0 (server 0: 19–23). R1 at 20: 2 ms on
    // g0 (server 0, queued behind Rb: 23–39 without a retry).
    let c = Cluster::new(ClusterConfig {
        net_latency_ns: 0,
        ..cluster().config
    })
    .unwrap();
    let wl = Workload::from_parts(
        &[
            (0, vec![(0, vec![MS]), (1, vec![MS])]),
            (19 * MS, vec![(0, vec![MS / 2])]),
            (20 * MS, vec![(0, vec![2 * MS])]),
        ],
        1,
    );
    let go = |extra: &[(&str, f64)]| {
        let mut params: Vec<(String, f64)> = vec![
            ("spec_kind".into(), 2.0),
            ("spec_percentile".into(), 50.0),
            ("driver".into(), 1.0),
            // the exact sample window: the hand-worked thresholds below are the samples themselves
            ("spec_histogram".into(), 0.0),
        ];
        params.extend(extra.iter().map(|(k, v)| (k.to_string(), *v)));
        let cfg = ReplayConfig {
            servers: ServerModelConfig {
                speeds: vec![0.125, 1.0, 1.0],
                ..ServerModelConfig::default()
            },
            selector: kvsim_core::replica::SelectorConfig::build("dynamic-snitch", &[]).unwrap(),
            warmup: 0.0,
            seed: 0,
            ..ReplayConfig::build("stock", &params).unwrap()
        };
        replay(&c, &wl, &cfg).unwrap().latency_ns
    };
    // in (one query for R0's two keys): R0's query ends at 8 and is recorded twice (8, 8): the threshold is the
    // median, 8 ms. Rb answers at 23, before its retry (27). R1's read is retried at 28 on server 1 (28–30) →
    // 10 ms.
    assert_eq!(go(&[]), vec![8 * MS, 4 * MS, 10 * MS]);
    // per-partition: k1's query ends at 1 (the first sample: threshold 1 ms), k0's at 8 (no recomputation before
    // the period). Rb's query goes to node 0, which reads itself: its server is free, so the read runs inline
    // (no retry timer) → 4 ms. R1's read is local too, but server 0 is busy: it waits in the read stage, and is
    // retried at 21 on server 1 (21–23) → 3 ms.
    assert_eq!(go(&[("shape", 1.0)]), vec![8 * MS, 4 * MS, 3 * MS]);
    // in with chunk 1: one query per key, the samples of per-partition → Rb retried at 20 on server 1
    // (20–20.5) → 1.5 ms; R1 retried at 21 → 3 ms.
    assert_eq!(go(&[("chunk", 1.0)]), vec![8 * MS, 3 * MS / 2, 3 * MS]);
}

#[test]
fn writes_are_not_driver_reads() {
    // RF 3 (every server holds every group), per-partition java4 with avoidance and hedging, one key in three
    // written: the writes' copies at the other replicas are not driver requests (nor re-sent by an execution).
    let c = Cluster::new(ClusterConfig {
        replication: 3,
        ..cluster().config
    })
    .unwrap();
    let parts: Vec<_> = (0..30u64)
        .map(|i| (i * MS, vec![((i % 3) as u32, vec![MS, MS, MS])]))
        .collect();
    let wl = Workload::from_parts(&parts, 1);
    let writes: Vec<bool> = (0..wl.ops()).map(|i| i % 3 == 0).collect();
    let params: Vec<(String, f64)> = [
        ("spec_kind", 0.0),
        ("shape", 1.0),
        ("se_max", 2.0),
        ("se_delay_ms", 0.0),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), *v))
    .collect();
    let cfg = ReplayConfig {
        writes,
        warmup: 0.0,
        seed: 0,
        ..ReplayConfig::build("stock", &params).unwrap()
    };
    let r = replay(&c, &wl, &cfg).unwrap();
    // delay 0: every read (60 of 90 ops) read twice; each write (30) at its 3 replicas.
    assert_eq!((r.copies.ops, r.writes.ops, r.writes.copies), (60, 30, 60));
    assert_eq!(r.served_ops, 90 + 60 + 60);
}

const TICK_100: (&str, f64) = ("se_tick_ms", 100.0);
const TICK_1: (&str, f64) = ("se_tick_ms", 1.0);

#[test]
fn the_java_drivers_timer_tick_delays_a_hedge_to_its_first_tick_past_the_deadline() {
    // One 1 ms key on g0 = [0, 1] at 0.3 ms; server 0 at 1/100 speed: the first read reaches it at 0.8, ends at
    // 100.8, answered at 101.3 → 101 ms alone. A 10 ms hedge (max_executions 2, `in`): deadline 10.3 ms after the
    // timer's start (the replay's time 0).
    let wl = Workload::from_parts(&[(300_000, vec![(0, vec![MS])])], 1);
    let h = hedge(10.0, 2.0);
    // Tick 0 (exact): the second execution at 10.3 → server 1 at 10.8, served to 11.8, answered at 12.3 → 12 ms.
    let exact = run(&wl, &[h[0], h[1]]);
    assert_eq!(exact.latency_ns, vec![12 * MS]);
    // Tick 1 ms: it fires at 11 (the first tick past 10.3) → answered at 13 → 12.7 ms.
    let one = run(&wl, &[h[0], h[1], TICK_1]);
    assert_eq!(one.latency_ns, vec![12_700_000]);
    assert_eq!((one.copies.ops, one.copies.wins), (1, 1));
    // Tick 100 ms (the driver's default): it fires at 100 → server 1 at 100.5–101.5, answered at 102, after the
    // first read's answer at 101.3: the hedge is sent (real load) but wins nothing → 101 ms.
    let hundred = run(&wl, &[h[0], h[1], TICK_100]);
    assert_eq!(hundred.latency_ns, vec![101 * MS]);
    assert_eq!((hundred.copies.ops, hundred.copies.wins), (1, 0));
    // The Python driver has no wheel timer, but a tick given is the model's: the same rule.
    let python = run(&wl, &[PYTHON, h[0], h[1], TICK_1]);
    assert_eq!(python.latency_ns, vec![12_700_000]);
}

#[test]
fn a_third_execution_is_armed_from_the_seconds_firing() {
    // RF 3 (g0 on [0, 1, 2], read round-robin in that order), servers 0 and 1 at 1/100 speed. R0 at 0: one 1 ms
    // key; delay 10 ms, max_executions 3, `in`. The first read (server 0) answers at 101; the second execution
    // reads server 1 (slow too); the third, server 2, answers 2 ms after it starts.
    let c = Cluster::new(ClusterConfig {
        replication: 3,
        ..cluster().config
    })
    .unwrap();
    assert_eq!(c.replicas(0), &[0, 1, 2][..]);
    let go = |tick: f64| {
        let params: Vec<(String, f64)> = [
            ("spec_kind", 0.0),
            ("se_delay_ms", 10.0),
            ("se_max", 3.0),
            ("se_tick_ms", tick),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
        let cfg = ReplayConfig {
            servers: ServerModelConfig {
                speeds: vec![0.01, 0.01, 1.0],
                ..ServerModelConfig::default()
            },
            warmup: 0.0,
            seed: 0,
            ..ReplayConfig::build("stock", &params).unwrap()
        };
        replay(&c, &one_key(), &cfg).unwrap()
    };
    // Exact: the executions at 10 and 20 → 22 ms.
    assert_eq!(go(0.0).latency_ns, vec![22 * MS]);
    // Tick 4 ms: the second's deadline 10 fires at 12; the third, armed then, 22 → 24 → 26 ms.
    let r = go(4.0);
    assert_eq!((r.latency_ns.clone(), r.copies.ops), (vec![26 * MS], 2));
    // Tick 100 ms: the second at 100; the third's deadline 110 → 200, after the answer at 101: never sent.
    let r = go(100.0);
    assert_eq!((r.latency_ns.clone(), r.copies.ops), (vec![101 * MS], 1));
}

#[test]
fn a_10ms_hedge_on_a_100ms_tick_does_not_cut_a_stalled_replicas_tail() {
    // 300 one-key requests, one every 5 ms over g0, g1, g2 in turn (1 ms each, all servers at full speed);
    // server 0 stalled over [200, 700) ms and [1000, 1300) ms. Reads are spread round-robin, so a third of the
    // reads during a stall wait on server 0; a 10 ms hedge (max_executions 2, `in`) re-sends them to the other
    // replica.
    let parts: Vec<_> = (0..300u64)
        .map(|i| (i * 5 * MS, vec![((i % 3) as u32, vec![MS])]))
        .collect();
    let wl = Workload::from_parts(&parts, 1);
    let iv = |a: u64, b: u64| StallInterval {
        server: 0,
        start_ns: a * MS,
        end_ns: b * MS,
    };
    let stalls = StallSchedule::new(vec![iv(200, 700), iv(1000, 1300)]);
    let go = |extra: &[(&str, f64)]| {
        let mut params: Vec<(String, f64)> = vec![("spec_kind".into(), 0.0)];
        params.extend(extra.iter().map(|(k, v)| (k.to_string(), *v)));
        let cfg = ReplayConfig {
            servers: ServerModelConfig {
                stall_schedule: Some(stalls.clone()),
                ..ServerModelConfig::default()
            },
            warmup: 0.0,
            seed: 0,
            ..ReplayConfig::build("stock", &params).unwrap()
        };
        let mut l = replay(&cluster(), &wl, &cfg).unwrap().latency_ns;
        l.sort_unstable();
        (l[l.len() * 99 / 100], l[l.len() - 1])
    };
    let h = hedge(10.0, 2.0);
    // No hedge: a read reaching server 0 early in a stall waits for its end (up to ~500 ms).
    let (p99_none, _) = go(&[]);
    assert!(p99_none > 400 * MS, "{p99_none}");
    // Exact timing: a stalled read is re-sent at its arrival + 10 ms (arrivals on whole ms) to the other replica,
    // answered 2 ms later, or 3 when that replica is serving the request that arrived at the same moment.
    let (p99_exact, max_exact) = go(&[h[0], h[1]]);
    assert_eq!((p99_exact, max_exact), (13 * MS, 13 * MS));
    // Tick 1 ms: the deadlines are on tick boundaries, so each hedge fires a whole tick late (arrival + 11 ms),
    // clear of the request arriving then: 13 ms, every one.
    let (p99_one, max_one) = go(&[h[0], h[1], TICK_1]);
    assert_eq!((p99_one, max_one), (13 * MS, 13 * MS));
    // Tick 100 ms (the driver's default): the hedge fires on the first 100 ms boundary past arrival + 10 ms, up to
    // 100 ms late — and by then the group's next request has taken the other replica in the round-robin, so the
    // late hedge often reads the stalled server too: the tail stays the stall's.
    let (p99_hundred, max_hundred) = go(&[h[0], h[1], TICK_100]);
    assert!(p99_hundred > 300 * MS, "p99 {p99_hundred}");
    assert!(max_hundred > 100 * MS, "max {max_hundred}");
}
