//! Binding of the model helpers: the size → demand model, the large-key Bloom filter and the server model.
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use kvsim_core::bloom::build_large_filter;
use kvsim_core::demand::DemandModel;
use kvsim_core::server_model::ServerModelConfig;

use crate::buffers::{bytes_of, vec_of};
use crate::errors::to_py;
use crate::replay::server_model;

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

/// Time-averaged capacity of the servers relative to all at speed 1 (validates the model). `slowdown`:
/// (interval ns, fraction, factor, duration ns); `stall_schedule`: [(server, start ns, end ns)], its stalled
/// fraction over `span_ns` = (from, to) ns (None: the schedule's own span, 0 to its last end).
#[pyfunction]
#[pyo3(signature = (servers, *, server_speeds=None, slowdown=None, stalls=None, stall_schedule=None, span_ns=None))]
fn capacity_factor(
    py: Python<'_>,
    servers: usize,
    server_speeds: Option<&Bound<'_, PyAny>>,
    slowdown: Option<(u64, f64, f64, u64)>,
    stalls: Option<(f64, u64)>,
    stall_schedule: Option<Vec<(usize, u64, u64)>>,
    span_ns: Option<(u64, u64)>,
) -> PyResult<f64> {
    let m = server_model(
        py,
        server_speeds,
        slowdown,
        stalls,
        stall_schedule.as_deref(),
    )?;
    m.validate(servers).map_err(to_py)?;
    Ok(m.capacity_factor_over(servers, span_ns))
}

/// Speed factors with `n` of `servers` servers `factor` times slower, spread evenly over the ring.
#[pyfunction]
fn slow_server_speeds(servers: usize, n: usize, factor: f64) -> PyResult<Vec<f64>> {
    ServerModelConfig::slow_servers(servers, n, factor).map_err(to_py)
}

/// Registers the model helpers on the extension module.
pub fn register_models(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(default_demand_model, m)?)?;
    m.add_function(wrap_pyfunction!(large_filter, m)?)?;
    m.add_function(wrap_pyfunction!(capacity_factor, m)?)?;
    m.add_function(wrap_pyfunction!(slow_server_speeds, m)?)?;
    Ok(())
}
