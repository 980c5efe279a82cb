//! `brb-unifincr`: BRB's UnifIncr — ops are ranked by how long they may slack behind the bottleneck:
//! priority = cost(bottleneck sub-task) − cost(own sub-task) (0 for the bottleneck), per-server priority queue.
use super::queues::PrioQueues;
use super::{bottleneck, PolicyImpl, QItem, Scheduler, Tag, TagCtx, TagFields};

crate::params! {
    /// `brb-unifincr` has no parameters.
    pub struct BrbUnifIncrConfig for "policy 'brb-unifincr'" {}
}

#[derive(Debug, Clone)]
pub struct BrbUnifIncr {
    q: PrioQueues,
}

impl PolicyImpl for BrbUnifIncr {
    type Config = BrbUnifIncrConfig;
    fn new(_cfg: &BrbUnifIncrConfig, servers: usize, _ops: usize) -> Self {
        BrbUnifIncr {
            q: PrioQueues::new(servers, 0, None),
        }
    }
}

impl Scheduler for BrbUnifIncr {
    #[inline]
    fn tag(&mut self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
        let (_, cb) = bottleneck(ctx.costs);
        for (i, t) in tags.iter_mut().enumerate() {
            t.prio = cb - ctx.costs[i];
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
        TagFields::PRIO
    }
}
