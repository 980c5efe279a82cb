//! `brb-equalmax`: BRB's EqualMax — every op gets the cost of its task's bottleneck sub-task as priority, served
//! by a per-server priority queue (no starvation boost, as in BRB).
use super::prio::{Prio, PrioKey};
use super::{bottleneck, Tag, TagCtx, TagFields};

crate::params! {
    /// `brb-equalmax` has no parameters.
    pub struct BrbEqualMaxConfig for "policy 'brb-equalmax'" {}
}

/// EqualMax's priorities: the cost of the request's bottleneck opset for every opset (also `rein-sbf`'s).
#[inline]
pub fn equal_max(ctx: &TagCtx<'_>, tags: &mut [Tag]) {
    let (_, cb) = bottleneck(ctx.costs);
    for t in tags.iter_mut() {
        t.prio = cb;
    }
}

impl PrioKey for BrbEqualMaxConfig {
    const FIELDS: TagFields = TagFields::REQUEST_PRIO;
    #[inline]
    fn key(&self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
        equal_max(ctx, tags);
    }
}

/// The priority-queue scheduler under EqualMax's key.
pub type BrbEqualMax = Prio<BrbEqualMaxConfig>;
