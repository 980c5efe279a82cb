//! Errors of the simulator core: a bad parameter (named, with its valid range), an unknown parameter (with the
//! valid ones) or bad input data.
use std::fmt;

/// Everything that can go wrong before or during a replay. The engine itself never fails once validated.
#[derive(Debug, Clone, PartialEq)]
pub enum SimError {
    /// A parameter is out of range: `name`, the offending value and a description of the valid range.
    BadParam {
        name: String,
        value: String,
        valid: String,
    },
    /// `owner` (e.g. `policy 'rein'`) has no parameter `name`; `valid` lists its parameters with their ranges.
    UnknownParam {
        owner: String,
        name: String,
        valid: String,
    },
    /// The workload arrays are inconsistent (lengths, ordering, ...).
    BadInput(String),
    /// An explicit token ring is invalid: `field` names the part (`nodes[3].tokens`, `local_dc`, ...).
    BadRing { field: String, msg: String },
}

impl SimError {
    pub fn param(name: &str, value: impl fmt::Display, valid: &str) -> Self {
        SimError::BadParam {
            name: name.to_string(),
            value: value.to_string(),
            valid: valid.to_string(),
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::BadParam { name, value, valid } => {
                write!(
                    f,
                    "parameter '{name}' = {value} is out of range: valid {valid}"
                )
            }
            SimError::UnknownParam { owner, name, valid } => {
                write!(f, "unknown parameter '{name}' for {owner}: valid {valid}")
            }
            SimError::BadInput(msg) => write!(f, "bad workload input: {msg}"),
            SimError::BadRing { field, msg } => write!(f, "bad ring: '{field}': {msg}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Checks `lo <= v <= hi` (and finiteness) for a named parameter.
pub fn check_range(name: &str, v: f64, lo: f64, hi: f64, valid: &str) -> Result<(), SimError> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(SimError::param(name, v, valid))
    }
}
