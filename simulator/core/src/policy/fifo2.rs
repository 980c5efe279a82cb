//! `fifo2`: a scratch copy of `fifo` — every server serves ops in arrival order, the clients tag nothing.
use super::fifo::Fifo;

crate::params! {
    /// `fifo2` has no parameters.
    pub struct Fifo2Config for "policy 'fifo2'" {}
}

/// `fifo`'s scheduler under `fifo2`'s config.
pub type Fifo2 = Fifo<Fifo2Config>;
