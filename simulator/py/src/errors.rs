//! kvsim's exceptions and the one translation of the core's errors into them. Every other module of the binding
//! raises through these; this one imports none of them.
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use kvsim_core::SimError;

create_exception!(
    _kvsim,
    KvsimError,
    PyValueError,
    "Base of kvsim's errors (a ValueError)."
);
create_exception!(
    _kvsim,
    ParameterError,
    KvsimError,
    "A parameter is out of range or unknown; the message names it and the valid values."
);
create_exception!(
    _kvsim,
    RingError,
    ParameterError,
    "An explicit token ring is invalid; the message names the part at fault."
);
create_exception!(
    _kvsim,
    WorkloadError,
    KvsimError,
    "The workload arrays are inconsistent."
);

pub(crate) fn to_py(e: SimError) -> PyErr {
    match e {
        SimError::BadParam { .. } | SimError::UnknownParam { .. } => {
            ParameterError::new_err(e.to_string())
        }
        SimError::BadInput(_) => WorkloadError::new_err(e.to_string()),
        SimError::BadRing { .. } => RingError::new_err(e.to_string()),
    }
}

/// Registers the exceptions on the extension module.
pub fn register_errors(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("KvsimError", py.get_type::<KvsimError>())?;
    m.add("ParameterError", py.get_type::<ParameterError>())?;
    m.add("RingError", py.get_type::<RingError>())?;
    m.add("WorkloadError", py.get_type::<WorkloadError>())?;
    Ok(())
}
