//! `duplicate` (Rein §5.1 baseline): every opset is sent to two replicas — the one the replica selector picks
//! and the next replica of its group — and each op's first answer wins. The loser is **not cancelled**: it stays
//! queued and is served, consuming capacity (the baseline Rein measured; "it simply doubles the load").
//! Servers serve FIFO. The copies are made by the engine (`engine.rs`); this file is the policy's
//! configuration.
use super::fifo::Fifo;

crate::params! {
    /// `duplicate` has no parameters.
    pub struct DuplicateConfig for "policy 'duplicate'" {}
}

/// `fifo`'s scheduler under `duplicate`'s config.
pub type Duplicate = Fifo<DuplicateConfig>;
