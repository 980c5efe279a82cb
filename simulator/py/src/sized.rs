//! Binding of issue 4's additions: replay with a replica selector and per-op size classes, the large-key Bloom
//! filter, the size → demand model and the selector catalogue.
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use kvsim_core::bloom::build_large_filter;
use kvsim_core::demand::DemandModel;
use kvsim_core::engine::run_with;
use kvsim_core::replica::{SelectorConfig, REPLICA_NAMES};
use kvsim_core::run_ext::RunExt;
use kvsim_core::{PolicyConfig, RunOptions};

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
#[pyo3(signature = (workload, policy, params, *, replica="round-robin", replica_params=Vec::new(), warmup=0.1, record_ops=false, size_aware_cost=false, large_est=None, large_true=None, seed=0))]
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
) -> PyResult<Bound<'py, PyDict>> {
    let cfg = PolicyConfig::build(policy, &params).map_err(to_py)?;
    let sel = SelectorConfig::build(replica, &replica_params).map_err(to_py)?;
    let wl = &workload.inner;
    let est = large_est.map(|a| vec_of::<u8>(py, a, "large_est")).transpose()?;
    let tru = large_true.map(|a| vec_of::<u8>(py, a, "large_true")).transpose()?;
    let ext = RunExt {
        selector: sel.clone(),
        large_est: per_workload_op(wl, est, "large_est")?,
        large_true: per_workload_op(wl, tru, "large_true")?,
        seed,
    };
    let opts = RunOptions {
        warmup,
        record_ops,
        size_aware_cost,
    };
    let cluster = &workload.cluster;
    let res = py
        .detach(|| run_with(cluster, wl, &cfg, &opts, &ext))
        .map_err(to_py)?;
    let d = result_dict(py, &res)?;
    d.set_item("replica", sel.name())?;
    d.set_item("replica_params", sel.params())?;
    let h = PyDict::new(py);
    h.set_item("opsets", res.ext.held_opsets)?;
    h.set_item("max", res.ext.held_max)?;
    h.set_item("mean_ms", res.ext.held_mean_ms)?;
    h.set_item("at_half", res.ext.held_at_half)?;
    h.set_item("at_end", res.ext.held_at_end)?;
    h.set_item("unstable", res.ext.unstable)?;
    d.set_item("held", h)?;
    let c = PyDict::new(py);
    c.set_item("ops", res.ext.copy_ops)?;
    c.set_item("wins", res.ext.copy_wins)?;
    d.set_item("copies", c)?;
    Ok(d)
}

/// Registers issue 4's functions on the extension module.
pub fn register_sized(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(replica_names, m)?)?;
    m.add_function(wrap_pyfunction!(replica_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(default_demand_model, m)?)?;
    m.add_function(wrap_pyfunction!(large_filter, m)?)?;
    m.add_function(wrap_pyfunction!(replay_ext, m)?)?;
    Ok(())
}
