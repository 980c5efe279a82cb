//! `brb-equalmax`: BRB's EqualMax — every op gets the cost of its task's bottleneck sub-task as priority, served
//! by a per-server priority queue (no starvation boost, as in BRB).
use super::queues::PrioQueues;
use super::{bottleneck, unknown, Params, QItem, Scheduler, Tag, TagCtx};
use crate::error::SimError;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct BrbEqualMaxConfig {}

impl Params for BrbEqualMaxConfig {
    fn set(&mut self, name: &str, _value: f64) -> Result<(), SimError> {
        Err(unknown("brb-equalmax", name, &[]))
    }
    fn params(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

#[derive(Debug, Clone)]
pub struct BrbEqualMax {
    q: PrioQueues,
}

impl BrbEqualMax {
    pub fn new(_cfg: &BrbEqualMaxConfig, servers: usize) -> Self {
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
}
