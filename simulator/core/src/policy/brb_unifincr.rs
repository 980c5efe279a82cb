//! `brb-unifincr`: BRB's UnifIncr — ops are ranked by how long they may slack behind the bottleneck:
//! priority = cost(bottleneck sub-task) − cost(own sub-task) (0 for the bottleneck), per-server priority queue.
use super::queues::PrioQueues;
use super::{bottleneck, unknown, Params, QItem, Scheduler, Tag, TagCtx};
use crate::error::SimError;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct BrbUnifIncrConfig {}

impl Params for BrbUnifIncrConfig {
    fn set(&mut self, name: &str, _value: f64) -> Result<(), SimError> {
        Err(unknown("brb-unifincr", name, &[]))
    }
    fn params(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

#[derive(Debug, Clone)]
pub struct BrbUnifIncr {
    q: PrioQueues,
}

impl BrbUnifIncr {
    pub fn new(_cfg: &BrbUnifIncrConfig, servers: usize) -> Self {
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
}
