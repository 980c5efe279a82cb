//! kvsim-core: a deterministic discrete-event replay of a key-value cluster serving multigets.
//!
//! This crate has no Python dependency; `simulator/py` wraps it with PyO3.

/// Version of the simulator model (bumped when results for the same inputs change).
pub const MODEL_VERSION: u32 = 1;

pub mod memcached;

#[cfg(test)]
mod tests {
    #[test]
    fn model_version_is_positive() {
        assert!(super::MODEL_VERSION >= 1);
    }
}
