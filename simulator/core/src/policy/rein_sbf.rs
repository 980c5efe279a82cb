//! `rein-sbf`: Shortest Bottleneck First on a single priority queue per server (Rein §3.2). Every op of a
//! request gets the cost of the request's bottleneck opset as priority (lower first: BRB's EqualMax key); optional
//! starvation boost.
use super::brb_equalmax::equal_max;
use super::prio::{Prio, PrioKey};
use super::{boost_ns, Tag, TagCtx, TagFields, BOOST_CHOICES};
use crate::params::Search;

crate::params! {
    pub struct ReinSbfConfig for "policy 'rein-sbf'" {
        /// Wait after which an op is served ahead of everything else, ms; 0 = no boost (default).
        boost_after_ms: f64 = 0.0, Real(0.0, 1e9, "[0, 1e9] ms (0 = no boost)"), Search::Choices(BOOST_CHOICES);
    }
}

impl PrioKey for ReinSbfConfig {
    const FIELDS: TagFields = TagFields::REQUEST_PRIO;
    #[inline]
    fn key(&self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
        equal_max(ctx, tags);
    }
    fn boost_ns(&self) -> Option<u64> {
        boost_ns(self.boost_after_ms)
    }
}

/// The priority-queue scheduler under SBF's key.
pub type ReinSbf = Prio<ReinSbfConfig>;
