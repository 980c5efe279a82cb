//! `rein-sbf`: Shortest Bottleneck First on a single priority queue per server (Rein §3.2). Every op of a
//! request gets the cost of the request's bottleneck opset as priority (lower first); optional starvation boost.
use super::queues::PrioQueues;
use super::{
    boost_ns, bottleneck, PolicyImpl, QItem, Scheduler, Tag, TagCtx, TagFields, BOOST_CHOICES,
};
use crate::params::Search;

crate::params! {
    pub struct ReinSbfConfig for "policy 'rein-sbf'" {
        /// Wait after which an op is served ahead of everything else, ms; 0 = no boost (default).
        boost_after_ms: f64 = 0.0, Real(0.0, 1e9, "[0, 1e9] ms (0 = no boost)"), Search::Choices(BOOST_CHOICES);
    }
}

#[derive(Debug, Clone)]
pub struct ReinSbf {
    q: PrioQueues,
}

impl PolicyImpl for ReinSbf {
    type Config = ReinSbfConfig;
    fn new(cfg: &ReinSbfConfig, servers: usize, ops: usize) -> Self {
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
    #[inline]
    fn tag_fields(&self) -> TagFields {
        TagFields::REQUEST_PRIO
    }
}
