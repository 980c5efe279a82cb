//! Thin PyO3 binding over `kvsim-core`. All model logic lives in the core crate; the typed API is the Python
//! package's (`simulator/py/python/kvsim`).
use pyo3::prelude::*;

mod buffers;
mod catalogue;
mod errors;
mod memcached;
mod models;
mod replay;
mod ring;

/// Model version of the core simulator.
#[pyfunction]
fn model_version() -> u32 {
    kvsim_core::MODEL_VERSION
}

#[pymodule]
fn _kvsim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(model_version, m)?)?;
    errors::register_errors(m)?;
    replay::register_replay(m)?;
    catalogue::register_catalogue(m)?;
    models::register_models(m)?;
    memcached::register_memcached(m)?;
    Ok(())
}
