//! `brb-equalmax`: BRB's EqualMax — every op gets the cost of its task's bottleneck sub-task as priority, served
//! by a per-server priority queue (no starvation boost, as in BRB).
use super::queues::PrioQueues;
use super::{bottleneck, PolicyImpl, QItem, Scheduler, Tag, TagCtx, TagFields};

crate::params! {
    /// `brb-equalmax` has no parameters.
    pub struct BrbEqualMaxConfig for "policy 'brb-equalmax'" {}
}

#[derive(Debug, Clone)]
pub struct BrbEqualMax {
    q: PrioQueues,
}

impl PolicyImpl for BrbEqualMax {
    type Config = BrbEqualMaxConfig;
    fn new(_cfg: &BrbEqualMaxConfig, servers: usize, _ops: usize) -> Self {
        BrbEqualMax {
            q: PrioQueues::new(servers, 0, None),
        }
    }
}

impl Scheduler for BrbEqualMax {
    #[inline]
    fn tag(&mut self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
        let (_, cb) = bottleneck(ctx.costs);
        for t in tags.iter_mut() {
            t.prio = cb;
        }
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
        TagFields::REQUEST_PRIO
    }
}
