//! `fifo`: the multiget-oblivious baseline — every server serves ops in arrival order.
//!
//! [`Fifo`] is also the queue discipline of `duplicate`, `speculative` and `stock`: what sets them apart from
//! `fifo` is what the engine and the coordinator do around the queues (copies, retries, the coordinator
//! section), not the queues. Each is this scheduler under its own config (`pub type Stock = Fifo<StockConfig>`),
//! so the registry keeps one row, one config and one parameter list per policy over one FIFO implementation.
use std::marker::PhantomData;

use super::queues::FifoQueues;
use super::{PolicyImpl, QItem, Scheduler, Tag, TagCtx, TagFields};
use crate::params::Params;

crate::params! {
    /// `fifo` has no parameters.
    pub struct FifoConfig for "policy 'fifo'" {}
}

/// One FIFO queue per server and no tags, for the policy whose parameters are `C` (`fifo`'s by default).
#[derive(Debug, Clone)]
pub struct Fifo<C = FifoConfig> {
    q: FifoQueues,
    config: PhantomData<fn() -> C>,
}

impl<C: Params> PolicyImpl for Fifo<C> {
    type Config = C;
    fn new(_cfg: &C, servers: usize, _ops: usize) -> Self {
        Fifo {
            q: FifoQueues::new(servers),
            config: PhantomData,
        }
    }
}

impl<C> Scheduler for Fifo<C> {
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

#[cfg(test)]
mod tests {
    use crate::policy::{Policy, PolicyConfig, QItem, Scheduler, Tag, TagFields};

    /// `fifo`, `duplicate`, `speculative` and `stock` run one scheduler: each server serves in arrival order,
    /// the clients tag nothing (so the engine keeps no tags for them).
    #[test]
    fn the_fifo_policies_serve_in_arrival_order_and_keep_no_tags() {
        fn served(p: &mut Policy, server: usize) -> Vec<u32> {
            std::iter::from_fn(|| p.pick(server, 100)).map(|i| i.op).collect()
        }
        for name in ["fifo", "duplicate", "speculative", "stock"] {
            let mut p = PolicyConfig::from_name(name).unwrap().instantiate(2, 4);
            assert_eq!(p.tag_fields(), TagFields::NONE, "{name}");
            for (op, server) in [(0, 1), (1, 0), (2, 1), (3, 1)] {
                p.enqueue(server, QItem::new(op, op, 10 * op as u64, Tag::default(), 5));
            }
            assert_eq!(served(&mut p, 1), [0, 2, 3], "{name}");
            assert_eq!(served(&mut p, 0), [1], "{name}");
            assert_eq!(p.pick(1, 100), None, "{name}");
        }
    }
}
