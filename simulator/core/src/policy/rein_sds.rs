//! `rein-sds`: Slack-Driven Scheduling on a single priority queue per server (Rein §3.2). An op x of opset O gets
//! priority (cost(x) + slack(x)) / size(O), with cost(x) = cost(O)/size(O) (one op's cost) and
//! slack(x) = cost(B) − cost(O) (B = the bottleneck opset, whose slack is 0). Lower = served first; optional boost.
use super::prio::{Prio, PrioKey};
use super::{boost_ns, bottleneck, Tag, TagCtx, TagFields, BOOST_CHOICES};
use crate::params::Search;

crate::params! {
    pub struct ReinSdsConfig for "policy 'rein-sds'" {
        /// Wait after which an op is served ahead of everything else, ms; 0 = no boost (default).
        boost_after_ms: f64 = 0.0, Real(0.0, 1e9, "[0, 1e9] ms (0 = no boost)"), Search::Choices(BOOST_CHOICES);
    }
}

/// SDS priority of the ops of an opset of `size` ops and cost `cost` in a request whose bottleneck costs `cb`.
#[inline]
pub fn sds_priority(size: u32, cost: f64, cb: f64) -> f64 {
    let n = size as f64;
    (cost / n + (cb - cost)) / n
}

impl PrioKey for ReinSdsConfig {
    const FIELDS: TagFields = TagFields::PRIO;
    #[inline]
    fn key(&self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
        let (_, cb) = bottleneck(ctx.costs);
        for (i, t) in tags.iter_mut().enumerate() {
            t.prio = sds_priority(ctx.sizes[i], ctx.costs[i], cb);
        }
    }
    fn boost_ns(&self) -> Option<u64> {
        boost_ns(self.boost_after_ms)
    }
}

/// The priority-queue scheduler under SDS's key.
pub type ReinSds = Prio<ReinSdsConfig>;

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
