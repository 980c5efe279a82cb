//! `random`: every opset goes to a uniformly random replica of its group (own random stream of the seed).
use super::feedback::SelectCtx;
use super::ReplicaSelector;
use crate::rng::Rng;

crate::params! {
    /// `random` has no parameters (its stream comes from the replay's seed).
    pub struct RandomConfig for "replica selector 'random'" {}
}

/// Stream of the seed used by replica selectors (demands use 1, arrivals 2).
pub const STREAM_REPLICA: u64 = 3;

#[derive(Debug, Clone)]
pub struct RandomSel {
    rng: Rng,
}

impl RandomSel {
    pub fn new(seed: u64) -> Self {
        RandomSel {
            rng: Rng::new(seed, STREAM_REPLICA),
        }
    }
}

impl ReplicaSelector for RandomSel {
    #[inline]
    fn choose(&mut self, ctx: &SelectCtx<'_>) -> Option<u32> {
        Some(ctx.replicas[self.rng.below(ctx.replicas.len() as u64) as usize])
    }
}
