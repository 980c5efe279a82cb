//! The priority-queue policies' one scheduler: `rein-sbf`, `rein-sds`, `brb-equalmax`, `brb-unifincr` and
//! `oracle` differ only in the priority their client gives each op (and whether a starvation boost may be set);
//! their servers all serve one [`PrioQueues`] per server — lowest priority first, arrival order among equal
//! priorities (ties are broken by the order of the pushes, never by op id), an op waiting past the boost first.
//!
//! [`Prio<C>`] is that scheduler for the policy whose config is `C`; the config says the policy's part by
//! implementing [`PrioKey`]. Each policy's file keeps its config, its key and its alias
//! (`pub type ReinSbf = Prio<ReinSbfConfig>`), so the registry keeps one row and one config per policy.
use super::queues::PrioQueues;
use super::{PolicyImpl, QItem, Scheduler, Tag, TagCtx, TagFields};
use crate::params::Params;

/// A priority-queue policy's own part, implemented by its config.
pub trait PrioKey: Params + Clone {
    /// The tag fields [`PrioKey::key`] sets: [`TagFields::PRIO`], or [`TagFields::REQUEST_PRIO`] when every
    /// opset of a request gets the same priority.
    const FIELDS: TagFields;
    /// Client side: `tags[i].prio` for every opset of one request (lower = served first). It sets no other
    /// field.
    fn key(&self, ctx: &TagCtx<'_>, tags: &mut [Tag]);
    /// The starvation boost in ns (an op that has waited this long is served first); `None` = no boost.
    fn boost_ns(&self) -> Option<u64> {
        None
    }
}

/// One priority queue per server, keyed by the policy whose config is `C`.
#[derive(Debug, Clone)]
pub struct Prio<C> {
    cfg: C,
    q: PrioQueues,
}

impl<C: PrioKey> PolicyImpl for Prio<C> {
    type Config = C;
    fn new(cfg: &C, servers: usize, ops: usize) -> Self {
        Prio {
            q: PrioQueues::new(servers, ops, cfg.boost_ns()),
            cfg: cfg.clone(),
        }
    }
}

impl<C: PrioKey> Scheduler for Prio<C> {
    #[inline]
    fn tag(&mut self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
        self.cfg.key(ctx, tags);
    }
    #[inline]
    fn enqueue(&mut self, server: usize, item: QItem) {
        self.q.push(server, item);
    }
    #[inline]
    fn pick(&mut self, server: usize, now: u64) -> Option<QItem> {
        self.q.pop(server, now)
    }
    #[inline]
    fn tag_fields(&self) -> TagFields {
        C::FIELDS
    }
}
