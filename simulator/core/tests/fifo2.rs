//! `fifo2` (a scratch copy of `fifo`): servers serve in arrival order, so a request behind another waits for it.
mod common;

use kvsim_core::{replay, PolicyConfig, ReplayConfig, Workload};

use common::MS;

#[test]
fn fifo2_serves_in_arrival_order() {
    // R1 = {A, B @Srv1} at 0, R2 = {C @Srv1} at 0: Srv1 serves A, B, C; R1 ends at 2, R2 at 3.
    let wl = Workload::from_parts(&[(0, vec![(0, vec![MS, MS])]), (0, vec![(0, vec![MS])])], 1);
    let rc = ReplayConfig {
        warmup: 0.0,
        ..ReplayConfig::new(PolicyConfig::build("fifo2", &[]).unwrap())
    };
    let r = replay(&common::single_slot_cluster(3, 1, 0), &wl, &rc).unwrap();
    let ms: Vec<u64> = r.latency_ns.iter().map(|l| l / MS).collect();
    assert_eq!(ms, vec![2, 3]);
}
