//! Thin PyO3 binding over `kvsim-core`. All model logic lives in the core crate.
use pyo3::prelude::*;

mod memcached;
mod replay;
mod sized;

/// Model version of the core simulator.
#[pyfunction]
fn model_version() -> u32 {
    kvsim_core::MODEL_VERSION
}

#[pymodule]
fn _kvsim(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(model_version, m)?)?;
    memcached::register_memcached(m)?;
    replay::register_replay(m)?;
    sized::register_sized(m)?;
    Ok(())
}
