//! `oracle`: Rein §5.3's clairvoyant client. It knows every server's outstanding ops (queued, in service and in
//! flight from all clients) and the service rate, so it estimates each opset's completion as
//! e(O) = (outstanding(server) + size(O)) / (slots × service_rate) from now. The bottleneck B has the latest
//! estimate. Rein's combined scheme with these estimates instead of opset sizes: an op of opset O gets priority
//! now + e(B) + (e(B) − e(O)) — the request's estimated completion (SBF part) plus the opset's slack (SDS part),
//! as an absolute time so that requests issued at different times compare. Lowest first at every server.
use super::prio::{Prio, PrioKey};
use super::{Tag, TagCtx, TagFields};

crate::params! {
    /// `oracle` has no parameters.
    pub struct OracleConfig for "policy 'oracle'" {}
}

/// Estimated completion (ns from now) of an opset of `size` ops at a server with `outstanding` ops.
#[inline]
pub fn oracle_estimate_ns(outstanding: u32, size: u32, slots: u32, service_rate: f64) -> f64 {
    (outstanding as f64 + size as f64) / (slots as f64 * service_rate) * 1e9
}

impl PrioKey for OracleConfig {
    const FIELDS: TagFields = TagFields::PRIO;
    #[inline]
    fn key(&self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
        let mut worst = 0.0f64;
        for (i, &s) in ctx.servers.iter().enumerate() {
            // `outstanding` already includes this request's ops: remove them from the backlog.
            let backlog = ctx.outstanding[s as usize].saturating_sub(ctx.sizes[i]);
            let e = oracle_estimate_ns(backlog, ctx.sizes[i], ctx.slots, ctx.service_rate);
            tags[i].prio = e;
            worst = worst.max(e);
        }
        let base = ctx.now as f64 + 2.0 * worst;
        for t in tags.iter_mut() {
            t.prio = base - t.prio;
        }
    }
}

/// The priority-queue scheduler under the oracle's key.
pub type Oracle = Prio<OracleConfig>;
