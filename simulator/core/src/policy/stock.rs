//! `stock`: what stock Cassandra 5.0 does on a CL ONE read — FIFO request stages per replica, the read sent to
//! the selector's first replica, and the coordinator section ([`CoordinatorConfig`](crate::coordinator::CoordinatorConfig):
//! speculative retry, the driver, the multiget shape) starting from Cassandra's and the driver's defaults
//! ([`CoordinatorConfig::cassandra`](crate::coordinator::CoordinatorConfig::cassandra), `99p`). The policy itself has no
//! parameters: the coordinator's are the section's, which every queue policy but `duplicate` and `speculative`
//! accepts (off by default for them).
use super::queues::FifoQueues;
use super::{PolicyImpl, QItem, Scheduler, Tag, TagCtx, TagFields};

crate::params! {
    pub struct StockConfig for "policy 'stock'" {}
}

#[derive(Debug, Clone)]
pub struct Stock {
    q: FifoQueues,
}

impl PolicyImpl for Stock {
    type Config = StockConfig;
    fn new(_cfg: &StockConfig, servers: usize, _ops: usize) -> Self {
        Stock {
            q: FifoQueues::new(servers),
        }
    }
}

impl Scheduler for Stock {
    #[inline]
    fn tag(&mut self, _ctx: &TagCtx<'_>, _tags: &mut [Tag]) {}
    #[inline]
    fn enqueue(&mut self, server: usize, item: QItem) {
        self.q.push(server, item);
    }
    #[inline]
    fn pick(&mut self, server: usize, _now: u64) -> Option<QItem> {
        self.q.pop(server)
    }
    #[inline]
    fn tag_fields(&self) -> TagFields {
        TagFields::NONE
    }
}
