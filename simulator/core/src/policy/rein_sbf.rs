//! `rein-sbf`: Shortest Bottleneck First on a single priority queue per server (Rein §3.2). Every op of a
//! request gets the cost of the request's bottleneck opset as priority (lower first); optional starvation boost.
use super::queues::PrioQueues;
use super::{boost_ns, bottleneck, set_boost, Params, QItem, Scheduler, Tag, TagCtx};
use crate::error::SimError;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReinSbfConfig {
    /// Wait after which an op is served ahead of everything else, ms; 0 = no boost (default).
    pub boost_after_ms: f64,
}

impl Params for ReinSbfConfig {
    fn set(&mut self, name: &str, value: f64) -> Result<(), SimError> {
        set_boost("rein-sbf", &mut self.boost_after_ms, name, value)
    }
    fn params(&self) -> Vec<(&'static str, f64)> {
        vec![("boost_after_ms", self.boost_after_ms)]
    }
}

#[derive(Debug, Clone)]
pub struct ReinSbf {
    q: PrioQueues,
}

impl ReinSbf {
    pub fn new(cfg: &ReinSbfConfig, servers: usize, ops: usize) -> Self {
        ReinSbf {
            q: PrioQueues::new(servers, ops, boost_ns(cfg.boost_after_ms)),
        }
    }
}

impl Scheduler for ReinSbf {
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
