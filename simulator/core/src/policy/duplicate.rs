//! `duplicate` (Rein §5.1 baseline): every opset is sent to two replicas — the one the replica selector picks
//! and the next replica of its group — and each op's first answer wins. The loser is **not cancelled**: it stays
//! queued and is served, consuming capacity (the baseline Rein measured; "it simply doubles the load").
//! Servers serve FIFO. The copies are made by the engine (`engine.rs`); this file is the policy's
//! configuration and queue discipline.
use super::queues::FifoQueues;
use super::{PolicyImpl, QItem, Scheduler, Tag, TagCtx, TagFields};

crate::params! {
    /// `duplicate` has no parameters.
    pub struct DuplicateConfig for "policy 'duplicate'" {}
}

#[derive(Debug, Clone)]
pub struct Duplicate {
    q: FifoQueues,
}

impl PolicyImpl for Duplicate {
    type Config = DuplicateConfig;
    fn new(_cfg: &DuplicateConfig, servers: usize, _ops: usize) -> Self {
        Duplicate {
            q: FifoQueues::new(servers),
        }
    }
}

impl Scheduler for Duplicate {
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
