//! `fifo`: the multiget-oblivious baseline — every server serves ops in arrival order.
use super::queues::FifoQueues;
use super::{unknown, Params, QItem, Scheduler, Tag, TagCtx};
use crate::error::SimError;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FifoConfig {}

impl Params for FifoConfig {
    fn set(&mut self, name: &str, _value: f64) -> Result<(), SimError> {
        Err(unknown("fifo", name, &[]))
    }
    fn params(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

#[derive(Debug, Clone)]
pub struct Fifo {
    q: FifoQueues,
}

impl Fifo {
    pub fn new(_cfg: &FifoConfig, servers: usize) -> Self {
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
}
