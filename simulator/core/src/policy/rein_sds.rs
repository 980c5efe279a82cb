//! `rein-sds`: Slack-Driven Scheduling on a single priority queue per server (Rein §3.2). An op x of opset O gets
//! priority (cost(x) + slack(x)) / size(O), with cost(x) = cost(O)/size(O) (one op's cost) and
//! slack(x) = cost(B) − cost(O) (B = the bottleneck opset, whose slack is 0). Lower = served first; optional boost.
use super::queues::PrioQueues;
use super::{boost_ns, bottleneck, set_boost, Params, QItem, Scheduler, Tag, TagCtx};
use crate::error::SimError;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReinSdsConfig {
    /// Wait after which an op is served ahead of everything else, ms; 0 = no boost (default).
    pub boost_after_ms: f64,
}

impl Params for ReinSdsConfig {
    fn set(&mut self, name: &str, value: f64) -> Result<(), SimError> {
        set_boost("rein-sds", &mut self.boost_after_ms, name, value)
    }
    fn params(&self) -> Vec<(&'static str, f64)> {
        vec![("boost_after_ms", self.boost_after_ms)]
    }
}

/// SDS priority of the ops of an opset of `size` ops and cost `cost` in a request whose bottleneck costs `cb`.
#[inline]
pub fn sds_priority(size: u32, cost: f64, cb: f64) -> f64 {
    let n = size as f64;
    (cost / n + (cb - cost)) / n
}

#[derive(Debug, Clone)]
pub struct ReinSds {
    q: PrioQueues,
}

impl ReinSds {
    pub fn new(cfg: &ReinSdsConfig, servers: usize, ops: usize) -> Self {
        ReinSds {
            q: PrioQueues::new(servers, ops, boost_ns(cfg.boost_after_ms)),
        }
    }
}

impl Scheduler for ReinSds {
    #[inline]
    fn tag(&mut self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
        let (_, cb) = bottleneck(ctx.costs);
        for (i, t) in tags.iter_mut().enumerate() {
            t.prio = sds_priority(ctx.sizes[i], ctx.costs[i], cb);
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

#[cfg(test)]
mod tests {
    use super::sds_priority;

    #[test]
    fn sds_priorities_hand_worked() {
        // request with opsets of 4 (bottleneck), 2 and 1 ops (count costs).
        assert_eq!(sds_priority(4, 4.0, 4.0), 0.25);
        assert_eq!(sds_priority(2, 2.0, 4.0), 1.5); // (1 + 2) / 2
        assert_eq!(sds_priority(1, 1.0, 4.0), 4.0); // (1 + 3) / 1
    }
}
