//! `brb-unifincr`: BRB's UnifIncr — ops are ranked by how long they may slack behind the bottleneck:
//! priority = cost(bottleneck sub-task) − cost(own sub-task) (0 for the bottleneck), per-server priority queue.
use super::prio::{Prio, PrioKey};
use super::{bottleneck, Tag, TagCtx, TagFields};

crate::params! {
    /// `brb-unifincr` has no parameters.
    pub struct BrbUnifIncrConfig for "policy 'brb-unifincr'" {}
}

impl PrioKey for BrbUnifIncrConfig {
    const FIELDS: TagFields = TagFields::PRIO;
    #[inline]
    fn key(&self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
        let (_, cb) = bottleneck(ctx.costs);
        for (i, t) in tags.iter_mut().enumerate() {
            t.prio = cb - ctx.costs[i];
        }
    }
}

/// The priority-queue scheduler under UnifIncr's key.
pub type BrbUnifIncr = Prio<BrbUnifIncrConfig>;
