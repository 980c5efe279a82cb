//! Binding of the memcached deployment kind (`kvsim_core::memcached`): one function returning a dict (typed by
//! `kvsim.memcached.MemcachedResult` on the Python side).
use kvsim_core::memcached::{
    replay, BatchingConfig, ChiselConfig, Deployment, Policy, ServiceProfile, Shards, SplitRule,
    Workload,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{KvsimError, ParameterError};

fn policy_from(
    name: &str,
    split_keys: Option<u32>,
    split_chunks: Option<u32>,
    merge: u32,
    elephant_threshold: u32,
) -> PyResult<Policy> {
    let split = match (split_keys, split_chunks) {
        (Some(_), Some(_)) => {
            return Err(ParameterError::new_err(
                "give split_keys (chunk size L) or split_chunks, not both",
            ))
        }
        (Some(l), None) => SplitRule::ChunkKeys(l),
        (None, Some(n)) => SplitRule::Chunks(n),
        (None, None) => SplitRule::ChunkKeys(u32::MAX),
    };
    match name {
        BatchingConfig::NAME => Ok(Policy::Batching(BatchingConfig)),
        ChiselConfig::NAME => Ok(Policy::Chisel(ChiselConfig {
            split,
            merge,
            elephant_threshold,
        })),
        other => Err(ParameterError::new_err(format!(
            "unknown memcached policy {other:?} (batching, chisel)"
        ))),
    }
}

/// Replay an open-loop workload (arrival µs, keys, first server per request) through a memcached deployment.
/// With `shards` = (offsets, server, keys) the pool is sharded: each request is its per-server batches.
#[pyfunction]
#[pyo3(signature = (
    arrivals_us, keys, server_of, *, policy, servers, worker_threads, query_threads,
    client_overhead_us, setup_us, profile, service_cv, seed,
    split_keys=None, split_chunks=None, merge=1, elephant_threshold=50, shards=None,
    client_cpus=0, client_processes=1, client_key_us=0.0
))]
#[allow(clippy::too_many_arguments)]
fn replay_memcached_raw<'py>(
    py: Python<'py>,
    arrivals_us: Vec<f64>,
    keys: Vec<u32>,
    server_of: Vec<u32>,
    policy: &str,
    servers: u32,
    worker_threads: u32,
    query_threads: u32,
    client_overhead_us: f64,
    setup_us: f64,
    profile: (f64, f64, f64, f64),
    service_cv: f64,
    seed: u64,
    split_keys: Option<u32>,
    split_chunks: Option<u32>,
    merge: u32,
    elephant_threshold: u32,
    shards: Option<(Vec<u32>, Vec<u32>, Vec<u32>)>,
    client_cpus: u32,
    client_processes: u32,
    client_key_us: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let pol = policy_from(policy, split_keys, split_chunks, merge, elephant_threshold)?;
    let dep = Deployment {
        servers,
        worker_threads,
        query_threads,
        client_overhead_us,
        setup_us,
        profile: ServiceProfile {
            a: profile.0,
            b: profile.1,
            c: profile.2,
            d: profile.3,
        },
        service_cv,
        client_cpus,
        client_processes,
        client_key_us,
    };
    let wl = Workload {
        arrivals_us,
        keys,
        server_of,
        shards: shards.map(|(offsets, server, keys)| Shards {
            offsets,
            server,
            keys,
        }),
    };
    let started = std::time::Instant::now();
    let report = py
        .detach(|| replay(&dep, &pol, &wl, seed))
        .map_err(KvsimError::new_err)?;
    let wall = started.elapsed().as_secs_f64();
    let s = report.summary();
    let out = PyDict::new(py);
    out.set_item("policy", pol.name())?;
    out.set_item("requests", s.requests)?;
    out.set_item("mean_us", s.mean_us)?;
    out.set_item("p50_us", s.p50_us)?;
    out.set_item("p95_us", s.p95_us)?;
    out.set_item("p99_us", s.p99_us)?;
    out.set_item("p999_us", s.p999_us)?;
    out.set_item("utilization", s.utilization)?;
    out.set_item("server_load_max", s.server_load_max)?;
    out.set_item("steady_state", s.steady_state)?;
    out.set_item("queries", report.queries)?;
    out.set_item("query_keys", report.query_keys)?;
    out.set_item("merged_queries", report.merged_queries)?;
    out.set_item("split_requests", report.split_requests)?;
    out.set_item("chunks", report.chunks)?;
    out.set_item("events", report.events)?;
    out.set_item("client_wait_us", report.client_wait_us)?;
    out.set_item("server_wait_us", report.server_wait_us)?;
    out.set_item("client_cpu_wait_us", report.client_cpu_wait_us)?;
    out.set_item("client_cpu_load", report.client_cpu_load)?;
    out.set_item("span_us", report.span_us)?;
    out.set_item("query_threads", report.query_threads)?;
    out.set_item("sim_wall_s", wall)?;
    out.set_item("latencies_us", report.latencies_us)?;
    Ok(out)
}

/// Add the memcached deployment kind to the `kvsim._kvsim` module.
pub fn register_memcached(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(replay_memcached_raw, m)?)?;
    Ok(())
}
