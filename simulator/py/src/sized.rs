//! Binding of issue 4's additions: replay with a replica selector and per-op size classes, the large-key Bloom
//! filter, the size → demand model and the selector catalogue.
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use kvsim_core::bloom::build_large_filter;
use kvsim_core::client_model::{ClosedLoop, ThinkDist};
use kvsim_core::server_model::{ServerModelConfig, Slowdown};
use kvsim_core::demand::DemandModel;
use kvsim_core::replica::{SelectorConfig, REPLICA_NAMES};
use kvsim_core::{replay, ClientModel, PolicyConfig, ReplayConfig, SizeClasses};

use crate::replay::{bytes_of, result_dict, to_py, vec_of, PyWorkload, WorkloadError};

/// Replica-selection names.
#[pyfunction]
fn replica_names() -> Vec<&'static str> {
    REPLICA_NAMES.to_vec()
}

/// Default parameters of a replica selector.
#[pyfunction]
fn replica_defaults(name: &str) -> PyResult<Vec<(&'static str, f64)>> {
    Ok(SelectorConfig::from_name(name).map_err(to_py)?.params())
}

/// (t0_s, bandwidth_bps) of the default size → demand calibration for a slot rate.
#[pyfunction]
fn default_demand_model(service_rate: f64) -> (f64, f64) {
    let m = DemandModel::for_service_rate(service_rate);
    (m.t0_s, m.bandwidth_bps)
}

/// Builds the large-key filter from (token, value size) pairs and answers it for `query` tokens.
/// Returns (answers as uint8 bytes, measured false-positive rate over the small keys, bits, hashes).
#[pyfunction]
#[pyo3(signature = (tokens, sizes, query, thr_l_bytes, fp=kvsim_core::bloom::DEFAULT_FP_TARGET, parts=1))]
#[allow(clippy::type_complexity)]
fn large_filter<'py>(
    py: Python<'py>,
    tokens: &Bound<'py, PyAny>,
    sizes: &Bound<'py, PyAny>,
    query: &Bound<'py, PyAny>,
    thr_l_bytes: f64,
    fp: f64,
    parts: usize,
) -> PyResult<(Bound<'py, PyBytes>, f64, u64, u32)> {
    let t: Vec<i64> = vec_of(py, tokens, "tokens")?;
    let s: Vec<f64> = vec_of(py, sizes, "sizes")?;
    let q: Vec<i64> = vec_of(py, query, "query")?;
    let (f, measured) = build_large_filter(&t, &s, thr_l_bytes, fp, parts).map_err(to_py)?;
    let ans: Vec<u8> = q.iter().map(|&x| f.contains(x) as u8).collect();
    let (m, k) = f.shape();
    Ok((bytes_of(py, &ans), measured, m, k))
}

/// The server model of the keyword arguments (slowdown_interval_ns = 0: no slowdowns).
fn server_model(
    py: Python<'_>,
    speeds: Option<&Bound<'_, PyAny>>,
    slowdown_interval_ns: u64,
    slowdown_fraction: f64,
    slowdown_factor: f64,
    slowdown_duration_ns: u64,
) -> PyResult<ServerModelConfig> {
    Ok(ServerModelConfig {
        speeds: speeds.map(|a| vec_of::<f64>(py, a, "server_speeds")).transpose()?.unwrap_or_default(),
        slowdown: (slowdown_interval_ns > 0).then_some(Slowdown {
            interval_ns: slowdown_interval_ns,
            fraction: slowdown_fraction,
            factor: slowdown_factor,
            duration_ns: if slowdown_duration_ns == 0 {
                slowdown_interval_ns
            } else {
                slowdown_duration_ns
            },
        }),
    })
}

/// Time-averaged capacity of the servers relative to all at speed 1 (validates the model).
#[pyfunction]
#[pyo3(signature = (servers, *, server_speeds=None, slowdown_interval_ns=0, slowdown_fraction=0.0, slowdown_factor=1.0, slowdown_duration_ns=0))]
fn capacity_factor(
    py: Python<'_>,
    servers: usize,
    server_speeds: Option<&Bound<'_, PyAny>>,
    slowdown_interval_ns: u64,
    slowdown_fraction: f64,
    slowdown_factor: f64,
    slowdown_duration_ns: u64,
) -> PyResult<f64> {
    let m = server_model(
        py,
        server_speeds,
        slowdown_interval_ns,
        slowdown_fraction,
        slowdown_factor,
        slowdown_duration_ns,
    )?;
    m.validate(servers).map_err(to_py)?;
    Ok(m.capacity_factor(servers))
}

/// Speed factors with `n` of `servers` servers `factor` times slower, spread evenly over the ring.
#[pyfunction]
fn slow_server_speeds(servers: usize, n: usize, factor: f64) -> PyResult<Vec<f64>> {
    ServerModelConfig::slow_servers(servers, n, factor).map_err(to_py)
}

fn per_workload_op(wl: &kvsim_core::Workload, flags: Option<Vec<u8>>, what: &str) -> PyResult<Vec<bool>> {
    let Some(f) = flags else { return Ok(Vec::new()) };
    if f.len() != wl.ops() {
        return Err(WorkloadError::new_err(format!(
            "{what} has {} flags for {} ops",
            f.len(),
            wl.ops()
        )));
    }
    Ok(wl.op_input.iter().map(|&i| f[i as usize] != 0).collect())
}

/// Replays under `policy` with replica selector `replica`; `large_est` / `large_true` are uint8 flags per input
/// op (the order of the workload's `tokens`). Returns the `replay` dict plus `replica`, `replica_params`, `held`.
#[pyfunction]
#[pyo3(signature = (workload, policy, params, *, replica="round-robin", replica_params=Vec::new(), warmup=0.1, record_ops=false, size_aware_cost=false, large_est=None, large_true=None, seed=0, server_speeds=None, slowdown_interval_ns=0, slowdown_fraction=0.0, slowdown_factor=1.0, slowdown_duration_ns=0, write=None, closed_threads=0, think_ns=0, think_dist="exponential"))]
#[allow(clippy::too_many_arguments)]
fn replay_ext<'py>(
    py: Python<'py>,
    workload: &PyWorkload,
    policy: &str,
    params: Vec<(String, f64)>,
    replica: &str,
    replica_params: Vec<(String, f64)>,
    warmup: f64,
    record_ops: bool,
    size_aware_cost: bool,
    large_est: Option<&Bound<'py, PyAny>>,
    large_true: Option<&Bound<'py, PyAny>>,
    seed: u64,
    server_speeds: Option<&Bound<'py, PyAny>>,
    slowdown_interval_ns: u64,
    slowdown_fraction: f64,
    slowdown_factor: f64,
    slowdown_duration_ns: u64,
    write: Option<&Bound<'py, PyAny>>,
    closed_threads: u32,
    think_ns: u64,
    think_dist: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg = PolicyConfig::build(policy, &params).map_err(to_py)?;
    let sel = SelectorConfig::build(replica, &replica_params).map_err(to_py)?;
    let wl = &workload.inner;
    let est = large_est.map(|a| vec_of::<u8>(py, a, "large_est")).transpose()?;
    let tru = large_true.map(|a| vec_of::<u8>(py, a, "large_true")).transpose()?;
    let wr = write.map(|a| vec_of::<u8>(py, a, "write")).transpose()?;
    let servers = server_model(
        py,
        server_speeds,
        slowdown_interval_ns,
        slowdown_fraction,
        slowdown_factor,
        slowdown_duration_ns,
    )?;
    let think = ThinkDist::from_name(think_dist).map_err(to_py)?;
    let client = if closed_threads > 0 {
        ClientModel::Closed(ClosedLoop {
            threads: closed_threads,
            think_ns,
            think,
        })
    } else {
        ClientModel::Open
    };
    let rc = ReplayConfig {
        policy: cfg,
        selector: sel.clone(),
        sizes: SizeClasses {
            large_est: per_workload_op(wl, est, "large_est")?,
            large_true: per_workload_op(wl, tru, "large_true")?,
        },
        servers,
        writes: per_workload_op(wl, wr, "write")?,
        client,
        warmup,
        record_ops,
        size_aware_cost,
        seed,
    };
    let cluster = &workload.cluster;
    let res = py.detach(|| replay(cluster, wl, &rc)).map_err(to_py)?;
    let d = result_dict(py, &res)?;
    d.set_item("replica", sel.name())?;
    d.set_item("replica_params", sel.params())?;
    let h = PyDict::new(py);
    h.set_item("opsets", res.held.opsets)?;
    h.set_item("max", res.held.max)?;
    h.set_item("mean_ms", res.held.mean_ms)?;
    h.set_item("at_half", res.held.at_half)?;
    h.set_item("at_end", res.held.at_end)?;
    h.set_item("unstable", res.held.unstable)?;
    d.set_item("held", h)?;
    let c = PyDict::new(py);
    c.set_item("ops", res.copies.ops)?;
    c.set_item("wins", res.copies.wins)?;
    d.set_item("copies", c)?;
    let w = PyDict::new(py);
    w.set_item("ops", res.writes.ops)?;
    w.set_item("copies", res.writes.copies)?;
    d.set_item("writes", w)?;
    d.set_item("served_ops", res.served_ops)?;
    d.set_item("makespan_ns", res.makespan_ns)?;
    d.set_item("capacity_factor", res.capacity_factor)?;
    if !res.arrival_ns.is_empty() {
        d.set_item("arrival_ns", bytes_of(py, &res.arrival_ns))?;
    }
    Ok(d)
}

/// Registers issue 4's functions on the extension module.
pub fn register_sized(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(replica_names, m)?)?;
    m.add_function(wrap_pyfunction!(replica_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(default_demand_model, m)?)?;
    m.add_function(wrap_pyfunction!(large_filter, m)?)?;
    m.add_function(wrap_pyfunction!(replay_ext, m)?)?;
    m.add_function(wrap_pyfunction!(capacity_factor, m)?)?;
    m.add_function(wrap_pyfunction!(slow_server_speeds, m)?)?;
    Ok(())
}
