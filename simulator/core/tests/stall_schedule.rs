//! Stalls on an explicit schedule, replayed exactly: a read reaching a stalled server waits for the stall's end,
//! a read on another server does not, and the result's capacity factor takes the schedule over the replay's span.
use kvsim_core::server_model::ServerModelConfig;
use kvsim_core::stall_schedule::{StallInterval, StallSchedule};
use kvsim_core::{replay, Cluster, ClusterConfig, ReplayConfig, Workload};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn cluster() -> Cluster {
    // 2 servers × 1 slot, RF 1 (group g lives on server g), 50 µs one way.
    Cluster::new(ClusterConfig {
        servers: 2,
        slots: 1,
        replication: 1,
        vnodes: 1,
        service_rate: 1000.0,
        net_latency_ns: 50 * US,
        clients: 1,
    })
    .unwrap()
}

fn config(schedule: Option<StallSchedule>) -> ReplayConfig {
    ReplayConfig {
        warmup: 0.0,
        record_ops: true,
        servers: ServerModelConfig {
            stall_schedule: schedule,
            ..ServerModelConfig::default()
        },
        ..ReplayConfig::default()
    }
}

#[test]
fn a_read_reaching_a_stalled_server_finishes_at_the_stalls_end_plus_its_service() {
    let c = cluster();
    // Requests at 2 ms on server 0 and on server 1, and at 10 ms on server 1; 1 ms of demand each.
    let wl = Workload::from_parts(
        &[
            (2 * MS, vec![(0, vec![MS])]),
            (2 * MS, vec![(1, vec![MS])]),
            (10 * MS, vec![(1, vec![MS])]),
        ],
        1,
    );
    // Server 0 stalled [1 ms, 5 ms).
    let schedule = StallSchedule::new(vec![StallInterval {
        server: 0,
        start_ns: MS,
        end_ns: 5 * MS,
    }]);
    let r = replay(&c, &wl, &config(Some(schedule))).unwrap();
    let rec = r.records.as_ref().unwrap();
    // The read reaches server 0 at 2.05 ms, inside the stall: its service runs from 5 ms to 6 ms, the answer is
    // back at 6.05 ms → latency 4.05 ms. Server 1's reads: 1 ms of service + 2 × 50 µs.
    assert_eq!(rec.start, vec![2_050 * US, 2_050 * US, 10_050 * US]);
    assert_eq!(rec.end, vec![6 * MS, 3_050 * US, 11_050 * US]);
    assert_eq!(r.latency_ns, vec![4_050 * US, 1_100 * US, 1_100 * US]);
    // Without the schedule every read takes 1.1 ms.
    let plain = replay(&c, &wl, &config(None)).unwrap();
    assert_eq!(plain.latency_ns, vec![1_100 * US; 3]);
    // Capacity over the arrivals' span [2 ms, 10 ms): server 0 stalled 3 ms of 2 × 8 ms.
    assert!(
        (r.capacity_factor - (1.0 - 3.0 / 16.0)).abs() < 1e-12,
        "{}",
        r.capacity_factor
    );
}

#[test]
fn an_op_in_service_when_the_stall_starts_is_paused() {
    let c = cluster();
    // 2 ms of demand reaching server 0 at 0.05 ms; stalls [1 ms, 3 ms) and [3.5 ms, 4 ms): 0.95 ms of work, the
    // first stall, 0.5 ms, the second, 0.55 ms → ends 4.55 ms.
    let wl = Workload::from_parts(&[(0, vec![(0, vec![2 * MS])])], 1);
    let iv = |a, b| StallInterval {
        server: 0,
        start_ns: a,
        end_ns: b,
    };
    let schedule = StallSchedule::new(vec![iv(3_500 * US, 4 * MS), iv(MS, 3 * MS)]);
    let r = replay(&c, &wl, &config(Some(schedule))).unwrap();
    assert_eq!(r.records.as_ref().unwrap().end, vec![4_550 * US]);
    assert_eq!(r.latency_ns, vec![4_600 * US]);
}

#[test]
fn a_bad_schedule_is_refused_naming_the_entry() {
    let c = cluster();
    let wl = Workload::from_parts(&[(0, vec![(0, vec![MS])])], 1);
    let iv = |server, a, b| StallInterval {
        server,
        start_ns: a,
        end_ns: b,
    };
    let e = replay(
        &c,
        &wl,
        &config(Some(StallSchedule::new(vec![iv(0, 0, MS), iv(2, 0, MS)]))),
    )
    .unwrap_err();
    assert!(e.to_string().contains("'stall_schedule[1].server'"), "{e}");
    let e = replay(
        &c,
        &wl,
        &config(Some(StallSchedule::new(vec![
            iv(0, 0, 2 * MS),
            iv(0, MS, 3 * MS),
        ]))),
    )
    .unwrap_err();
    assert!(e.to_string().contains("'stall_schedule[1]'"), "{e}");
}
