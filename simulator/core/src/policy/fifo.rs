//! `fifo`: the multiget-oblivious baseline — every server serves ops in arrival order.
use super::queues::FifoQueues;
use super::{PolicyImpl, QItem, Scheduler, Tag, TagCtx, TagFields};

crate::params! {
    /// `fifo` has no parameters.
    pub struct FifoConfig for "policy 'fifo'" {}
}

#[derive(Debug, Clone)]
pub struct Fifo {
    q: FifoQueues,
}

impl PolicyImpl for Fifo {
    type Config = FifoConfig;
    fn new(_cfg: &FifoConfig, servers: usize, _ops: usize) -> Self {
        Fifo {
            q: FifoQueues::new(servers),
        }
    }
}

impl Scheduler for Fifo {
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
