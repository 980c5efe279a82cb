//! Server speeds and slowdowns, writes at every replica, closed-loop clients: hand-worked schedules
//! replayed exactly, and randomized invariants combining them with every policy and selector.
use kvsim_core::client_model::{ClosedLoop, ThinkDist};
use kvsim_core::hash::token_of_u64;
use kvsim_core::replica::SelectorConfig;
use kvsim_core::rng::Rng;
use kvsim_core::server_model::{ServerModelConfig, Slowdown};
use kvsim_core::{
    replay, Arrivals, ClientModel, Cluster, ClusterConfig, PolicyConfig, ReplayConfig, RunResult,
    SizeClasses, Workload, WorkloadSpec,
};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn cluster(servers: u32, replication: u32, slots: u32) -> Cluster {
    Cluster::new(ClusterConfig {
        servers,
        slots,
        replication,
        vnodes: 1,
        service_rate: 1000.0,
        net_latency_ns: 50 * US,
        clients: 1,
    })
    .unwrap()
}

/// `fifo`, round-robin replicas, no warm-up cut, per-op records.
fn base() -> ReplayConfig {
    ReplayConfig {
        warmup: 0.0,
        record_ops: true,
        ..ReplayConfig::default()
    }
}

fn run(c: &Cluster, wl: &Workload, cfg: &ReplayConfig) -> RunResult {
    replay(c, wl, cfg).unwrap()
}

#[test]
fn a_half_speed_server_takes_twice_the_demand() {
    // 2 servers × 1 slot, RF 1: group g lives on server g; server 1 runs at half speed. d = 50 µs.
    let c = cluster(2, 1, 1);
    let wl = Workload::from_parts(
        &[
            (0, vec![(0, vec![MS]), (1, vec![MS])]),
            (500 * US, vec![(1, vec![MS])]),
        ],
        1,
    );
    let ext = ReplayConfig {
        servers: ServerModelConfig {
            speeds: vec![1.0, 0.5],
            slowdown: None,
            stalls: None,
            stall_schedule: None,
        },
        ..base()
    };
    let r = run(&c, &wl, &ext);
    // Request 0: server 0 ends at 1.05 ms, server 1 at 0.05 + 2 = 2.05 ms → latency 2.1 ms.
    // Request 1 reaches server 1 at 0.55 ms, waits until 2.05, served 2 ms → 4.05 ms; latency 4.1 − 0.5 = 3.6 ms.
    assert_eq!(r.latency_ns, vec![2_100 * US, 3_600 * US]);
    let rec = r.records.as_ref().unwrap();
    assert_eq!(rec.start, vec![50 * US, 50 * US, 2_050 * US]);
    assert_eq!(rec.end, vec![1_050 * US, 2_050 * US, 4_050 * US]);
    // Load counts busy time at the server's own speed: 1 ms and 4 ms over the 0.5 ms arrival span (1 slot each).
    assert_eq!(r.summary.server_load, vec![2.0, 8.0]);
    assert_eq!(r.served_ops, 3);
    // The same workload at full speed (plain loop): request 0 takes 1.1 ms.
    let plain = run(&c, &wl, &base());
    assert_eq!(plain.latency_ns[0], 1_100 * US);
}

#[test]
fn a_slowdown_stretches_the_ops_it_overlaps() {
    // 1 server × 1 slot, slowed 4× for the first 1 ms of every 10 ms. Op of 1 ms reaches it at 50 µs:
    // 0.95 ms slowed = 0.2375 ms of work, then 0.7625 ms at full speed → ends 1.7625 ms.
    let c = cluster(1, 1, 1);
    let wl = Workload::from_parts(
        &[(0, vec![(0, vec![MS])]), (9 * MS, vec![(0, vec![MS])])],
        1,
    );
    let ext = ReplayConfig {
        servers: ServerModelConfig {
            speeds: vec![],
            slowdown: Some(Slowdown {
                interval_ns: 10 * MS,
                fraction: 1.0,
                factor: 4.0,
                duration_ns: MS,
            }),
            stalls: None,
            stall_schedule: None,
        },
        ..base()
    };
    let r = run(&c, &wl, &ext);
    let rec = r.records.as_ref().unwrap();
    assert_eq!(rec.end[0], 1_762_500);
    // Request 1 starts at 9.05 ms: 0.95 ms at full speed, then the slowdown from 10 ms: 0.05 ms of work at 1/4
    // speed takes 0.2 ms → ends 10.2 ms.
    assert_eq!(rec.end[1], 10_200 * US);
    assert_eq!(r.latency_ns, vec![1_812_500, 1_250 * US]);
}

#[test]
fn a_write_is_served_at_every_replica_and_answered_by_the_first() {
    // 3 servers × 1 slot, RF 3: group 0 = servers 0, 1, 2. Server 0 (the round-robin's first choice) is slow.
    let c = cluster(3, 3, 1);
    let wl = Workload::from_parts(
        &[(0, vec![(0, vec![MS])]), (100 * US, vec![(0, vec![MS])])],
        1,
    );
    let ext = ReplayConfig {
        writes: vec![true, false],
        servers: ServerModelConfig {
            speeds: vec![0.5, 1.0, 1.0],
            slowdown: None,
            stalls: None,
            stall_schedule: None,
        },
        ..base()
    };
    let r = run(&c, &wl, &ext);
    // The write reaches all three at 50 µs; servers 1 and 2 finish at 1.05 ms, server 0 at 2.05 ms. Consistency
    // ONE: the first ack (1.05 ms) answers → latency 1.1 ms. The read (round-robin: replica 1) reaches server 1
    // at 0.15 ms, waits for the write's copy until 1.05, served until 2.05 → latency 2.1 − 0.1 = 2.0 ms.
    assert_eq!(r.latency_ns, vec![1_100 * US, 2_000 * US]);
    assert_eq!((r.writes.ops, r.writes.copies, r.served_ops), (1, 2, 4));
    // Busy time: server 0 2 ms (the write at half speed), server 1 2 ms, server 2 1 ms; span 0.1 ms.
    let load: Vec<f64> = r
        .summary
        .server_load
        .iter()
        .map(|x| (x * 1e6).round() / 1e6)
        .collect();
    assert_eq!(load, vec![20.0, 20.0, 10.0]);
    // Reads only: the read goes to server 1 at once → 1.1 ms.
    let reads = run(
        &c,
        &wl,
        &ReplayConfig {
            writes: vec![false, false],
            ..ext.clone()
        },
    );
    assert_eq!(reads.latency_ns[1], 1_100 * US);
    assert_eq!(reads.writes.copies, 0);
}

#[test]
fn one_closed_loop_thread_with_fixed_think_time() {
    // 1 server × 1 slot, one thread, think 300 µs, d = 50 µs. Request r: demand (r + 1) ms. The workload's own
    // arrival times (all at 0 here) are ignored.
    let c = cluster(1, 1, 1);
    let wl = Workload::from_parts(
        &[
            (0, vec![(0, vec![MS])]),
            (0, vec![(0, vec![2 * MS])]),
            (0, vec![(0, vec![3 * MS])]),
        ],
        1,
    );
    let ext = ReplayConfig {
        client: ClientModel::Closed(ClosedLoop {
            threads: 1,
            think_ns: 300 * US,
            think: ThinkDist::Fixed,
        }),
        ..base()
    };
    let r = run(&c, &wl, &ext);
    // a0 = 0, latency 1.1 ms; a1 = 1.1 + 0.3 = 1.4 ms, latency 2.1; a2 = 3.5 + 0.3 = 3.8 ms, latency 3.1.
    assert_eq!(r.arrival_ns, vec![0, 1_400 * US, 3_800 * US]);
    assert_eq!(r.latency_ns, vec![1_100 * US, 2_100 * US, 3_100 * US]);
    assert_eq!(
        r.records.as_ref().unwrap().start,
        vec![50 * US, 1_450 * US, 3_850 * US]
    );
    assert_eq!(r.makespan_ns, 6_900 * US);
    // A closed loop's load is busy time over the makespan (6 ms of 6.9 ms), never the span of the issue times
    // (3.8 ms, which would read 1.58 — "overloaded" — for a server that idles 13% of the run).
    assert_eq!(
        r.summary.server_load,
        vec![(6 * MS) as f64 / (6_900 * US) as f64]
    );
    // Two threads: requests 0 and 1 both at 0; request 1 waits for the slot (0.05 + 1 → 1.05, ends 3.05 ms);
    // request 2 goes to thread 0 at 1.1 + 0.3 = 1.4 ms, queues behind request 1 → starts 3.05, ends 6.05 ms.
    let two = ClosedLoop {
        threads: 2,
        think_ns: 300 * US,
        think: ThinkDist::Fixed,
    };
    let r = run(
        &c,
        &wl,
        &ReplayConfig {
            client: ClientModel::Closed(two),
            ..base()
        },
    );
    assert_eq!(r.arrival_ns, vec![0, 0, 1_400 * US]);
    assert_eq!(r.latency_ns, vec![1_100 * US, 3_100 * US, 4_700 * US]);
    // Saturated from 50 µs to the end: busy 6 ms over the makespan 6.1 ms — under 1, as a closed loop must be.
    assert_eq!(
        r.summary.server_load,
        vec![(6 * MS) as f64 / (6_100 * US) as f64]
    );
    assert!(r.summary.server_load_max < 1.0);
}

fn random_case(seed: u64) -> (Cluster, Workload) {
    let mut r = Rng::new(seed, 77);
    let servers = 3 + r.below(8) as u32;
    let cfg = ClusterConfig {
        servers,
        slots: 1 + r.below(4) as u32,
        replication: 2 + r.below(2) as u32,
        vnodes: 1,
        service_rate: 1000.0 + r.below(4000) as f64,
        net_latency_ns: r.below(100_000),
        clients: 1 + r.below(4) as u32,
    };
    let cluster = Cluster::new(cfg).unwrap();
    let n = 1 + r.below(150) as usize;
    let mut offsets = vec![0u64];
    let mut tokens = Vec::new();
    for _ in 0..n {
        for _ in 0..1 + r.below(8) {
            tokens.push(token_of_u64(r.below(200)));
        }
        offsets.push(tokens.len() as u64);
    }
    let spec = WorkloadSpec {
        req_offsets: offsets,
        tokens,
        mean_demand: None,
        clients: None,
        arrivals: Arrivals::Poisson {
            load: 0.2 + 0.6 * r.uniform(),
        },
        seed,
    };
    (
        cluster.clone(),
        Workload::materialize(&cluster, &spec).unwrap(),
    )
}

#[test]
fn every_copy_served_once_no_slot_double_booked_in_every_combination() {
    let policies = [
        "fifo",
        "rein",
        "brb-equalmax",
        "tailx",
        "duplicate",
        "speculative",
    ];
    let selectors = ["round-robin", "least-outstanding", "c3", "ds", "heron"];
    for seed in 0..40u64 {
        let (c, wl) = random_case(seed);
        let mut r = Rng::new(seed, 78);
        let n_servers = c.config.servers as usize;
        let write: Vec<bool> = (0..wl.ops()).map(|_| r.uniform() < 0.3).collect();
        let speeds: Vec<f64> = (0..n_servers)
            .map(|_| [1.0, 0.5, 0.25, 2.0][r.below(4) as usize])
            .collect();
        let slowdown = (r.below(2) == 0).then(|| Slowdown {
            interval_ns: 1 + r.below(5 * MS),
            fraction: r.uniform(),
            factor: 1.0 + 5.0 * r.uniform(),
            duration_ns: 1,
        });
        let slowdown = slowdown.map(|s| Slowdown {
            duration_ns: 1 + r.below(s.interval_ns),
            ..s
        });
        let closed = (r.below(2) == 0).then(|| ClosedLoop {
            threads: 1 + r.below(6) as u32,
            think_ns: r.below(2 * MS),
            think: if r.below(2) == 0 {
                ThinkDist::Fixed
            } else {
                ThinkDist::Exponential
            },
        });
        let policy = policies[(seed % policies.len() as u64) as usize];
        let selector = selectors[(seed / 2 % selectors.len() as u64) as usize];
        let large: Vec<bool> = (0..wl.ops()).map(|_| r.uniform() < 0.1).collect();
        let cfg = ReplayConfig {
            selector: SelectorConfig::build(selector, &[]).unwrap(),
            sizes: SizeClasses {
                large_est: large.clone(),
                large_true: large,
            },
            seed,
            servers: ServerModelConfig {
                speeds,
                slowdown,
                stalls: None,
                stall_schedule: None,
            },
            writes: write.clone(),
            client: closed
                .clone()
                .map_or(ClientModel::Open, ClientModel::Closed),
            warmup: 0.0,
            record_ops: true,
            ..ReplayConfig::new(PolicyConfig::build(policy, &[]).unwrap())
        };
        let res = run(&c, &wl, &cfg);
        let rf = c.config.replication as u64;
        let writes = write.iter().filter(|&&w| w).count() as u64;
        let ctx = format!("seed {seed} {policy} {selector}");
        assert_eq!(res.writes.ops, writes, "{ctx}");
        assert_eq!(res.writes.copies, writes * (rf - 1), "{ctx}");
        // Every original, every write copy and every read copy is served exactly once.
        assert_eq!(
            res.served_ops,
            wl.ops() as u64 + res.writes.copies + res.copies.ops,
            "{ctx}"
        );
        // Originals: no slot runs two ops at once; each op runs at least its demand / fastest speed.
        let rec = res.records.as_ref().unwrap();
        let mut by_slot: Vec<(u32, u32, u64, u64)> = (0..wl.ops())
            .map(|i| (rec.server[i], rec.slot[i], rec.start[i], rec.end[i]))
            .collect();
        by_slot.sort_unstable();
        for w in by_slot.windows(2) {
            if (w[0].0, w[0].1) == (w[1].0, w[1].1) {
                assert!(w[0].3 <= w[1].2, "{ctx}: slot double-booked {w:?}");
            }
        }
        for i in 0..wl.ops() {
            assert!(
                rec.end[i] - rec.start[i] + 1 >= wl.demand[i] / 2,
                "{ctx}: op {i} served too fast"
            );
        }
        let d = c.config.net_latency_ns;
        assert!(res.latency_ns.iter().all(|&l| l >= 2 * d), "{ctx}");
        if let Some(cl) = &closed {
            // Never more requests in flight than threads.
            let arr = &res.arrival_ns;
            assert_eq!(arr.len(), wl.requests(), "{ctx}");
            let mut ev: Vec<(u64, i32)> = Vec::new();
            for (q, &a) in arr.iter().enumerate() {
                ev.push((a, 1));
                ev.push((a + res.latency_ns[q], -1));
            }
            ev.sort_unstable();
            let mut live = 0;
            for (_, x) in ev {
                live += x;
                assert!(live <= cl.threads as i32, "{ctx}: {live} in flight");
            }
        }
        // Deterministic.
        let again = run(&c, &wl, &cfg);
        assert_eq!(res.latency_ns, again.latency_ns, "{ctx}");
    }
}

#[test]
fn uniform_extensions_equal_the_plain_loop() {
    // Speeds all 1, no writes, open loop: the plain loop runs; with a 1× "slowdown" (factor 1) too.
    for seed in 0..10u64 {
        let (c, wl) = random_case(seed);
        let plain = run(&c, &wl, &base());
        let ext = ReplayConfig {
            servers: ServerModelConfig {
                speeds: vec![1.0; c.config.servers as usize],
                slowdown: Some(Slowdown {
                    interval_ns: MS,
                    fraction: 0.5,
                    factor: 1.0,
                    duration_ns: MS,
                }),
                stalls: None,
                stall_schedule: None,
            },
            writes: vec![false; wl.ops()],
            ..base()
        };
        assert!(ext.plain_model());
        assert_eq!(run(&c, &wl, &ext).latency_ns, plain.latency_ns);
        // Writes on, but through the extension loop with a heron selector (any combination is accepted).
        let mut w = vec![false; wl.ops()];
        w[0] = true;
        let ext = ReplayConfig {
            writes: w,
            selector: SelectorConfig::build("heron", &[]).unwrap(),
            ..base()
        };
        assert!(run(&c, &wl, &ext).writes.ops == 1);
    }
}

#[test]
fn bad_extension_inputs_are_named() {
    let c = cluster(2, 1, 1);
    let wl = Workload::from_parts(&[(0, vec![(0, vec![MS])])], 1);
    let bad = |cfg: ReplayConfig| replay(&c, &wl, &cfg).unwrap_err().to_string();
    let e = bad(ReplayConfig {
        servers: ServerModelConfig {
            speeds: vec![1.0],
            slowdown: None,
            stalls: None,
            stall_schedule: None,
        },
        ..base()
    });
    assert!(e.contains("'server_speeds'"), "{e}");
    let e = bad(ReplayConfig {
        writes: vec![true, false],
        ..base()
    });
    assert!(e.contains("write has 2 flags for 1 ops"), "{e}");
    let e = bad(ReplayConfig {
        client: ClientModel::Closed(ClosedLoop {
            threads: 0,
            think_ns: 0,
            think: ThinkDist::Fixed,
        }),
        ..base()
    });
    assert!(e.contains("'threads'"), "{e}");
}
