//! Scheduling policies. The trait is small: the client tags each opset of a request (priority / queue), the
//! server enqueues the ops and picks the next one for a free slot, and an optional feedback hook sees every
//! completion. Dispatch is by enum (`Policy`), with one config struct per policy (`PolicyConfig`).
//!
//! Each policy lives in its own file; the server-side queue structures they share are in `queues.rs`.
use crate::error::SimError;

pub mod brb_equalmax;
pub mod brb_unifincr;
pub mod duplicate;
pub mod fifo;
pub mod oracle;
pub mod queues;
pub mod rein;
pub mod rein_sbf;
pub mod rein_sds;
pub mod speculative;
pub mod tailx;

pub use brb_equalmax::{BrbEqualMax, BrbEqualMaxConfig};
pub use brb_unifincr::{BrbUnifIncr, BrbUnifIncrConfig};
pub use duplicate::{Duplicate, DuplicateConfig};
pub use fifo::{Fifo, FifoConfig};
pub use oracle::{Oracle, OracleConfig};
pub use rein::{Rein, ReinConfig};
pub use rein_sbf::{ReinSbf, ReinSbfConfig};
pub use rein_sds::{ReinSds, ReinSdsConfig};
pub use speculative::{Speculative, SpeculativeConfig};
pub use tailx::{Tailx, TailxConfig};

/// Metadata the client attaches to every op of an opset (Rein: "priority inserted as meta-data").
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Tag {
    /// Lower = served first (priority-queue policies).
    pub prio: f64,
    /// Queue index (multi-level queue policies), 0 = Q1.
    pub queue: u32,
}

/// An op waiting at a server. The tag's fields are stored flat, so the op's service demand fits in what would
/// otherwise be padding: 32 bytes per queued op either way. Carrying the demand saves the engine a random read
/// of the workload's demand array when the op starts (with long queues that read misses every cache level).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QItem {
    pub op: u32,
    pub opset: u32,
    /// Time the op reached the server, ns.
    pub enq: u64,
    /// The opset's tag (`Tag::prio`, `Tag::queue`).
    pub prio: f64,
    pub queue: u32,
    /// The op's service demand in ns, or `DEM_FAR` when it does not fit in 32 bits (then it is read from the
    /// workload).
    pub dem: u32,
}

/// `QItem::dem` of a demand of 2³² − 1 ns (≈ 4.3 s) or more.
pub const DEM_FAR: u32 = u32::MAX;

impl QItem {
    #[inline(always)]
    pub fn new(op: u32, opset: u32, enq: u64, tag: Tag, demand_ns: u64) -> Self {
        QItem {
            op,
            opset,
            enq,
            prio: tag.prio,
            queue: tag.queue,
            dem: if demand_ns < DEM_FAR as u64 { demand_ns as u32 } else { DEM_FAR },
        }
    }
    /// The op's demand; `demand` is the workload's per-op demand array, read only for `DEM_FAR`.
    #[inline(always)]
    pub fn demand(&self, real_op: usize, demand: &[u64]) -> u64 {
        if self.dem != DEM_FAR {
            self.dem as u64
        } else {
            demand[real_op]
        }
    }
}

/// What a client knows when it tags a request. `sizes[i]` / `costs[i]` describe opset i of the request, already
/// routed to `servers[i]`; `outstanding[s]` counts ops in flight to, queued at or in service at server s
/// (only the oracle may look at it).
pub struct TagCtx<'a> {
    pub now: u64,
    pub sizes: &'a [u32],
    pub costs: &'a [f64],
    pub servers: &'a [u32],
    pub outstanding: &'a [u32],
    pub slots: u32,
    pub service_rate: f64,
}

/// The policy interface the engine drives.
pub trait Scheduler {
    /// Client side: fill `tags[i]` for every opset of one request.
    fn tag(&mut self, ctx: &TagCtx<'_>, tags: &mut [Tag]);
    /// Server side: an op arrived at `server`.
    fn enqueue(&mut self, server: usize, item: QItem);
    /// Server side: the next op for a free slot of `server`, if any is waiting.
    fn pick(&mut self, server: usize, now: u64) -> Option<QItem>;
    /// Feedback hook: an op finished at `server` (no policy of the core issue needs it).
    fn on_done(&mut self, _server: usize, _op: u32, _now: u64) {}
    /// Coordinator side: how long the client procrastinates an opset with this tag before sending it (TailX's
    /// delay queue); 0 = sent at once (every policy but tailx).
    fn release_delay_ns(&self, _tag: &Tag) -> u64 {
        0
    }
}

/// Configuration of a policy, with its validated parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyConfig {
    Fifo(FifoConfig),
    ReinSbf(ReinSbfConfig),
    ReinSds(ReinSdsConfig),
    Rein(ReinConfig),
    BrbEqualMax(BrbEqualMaxConfig),
    BrbUnifIncr(BrbUnifIncrConfig),
    Oracle(OracleConfig),
    Tailx(TailxConfig),
    Duplicate(DuplicateConfig),
    Speculative(SpeculativeConfig),
}

/// A policy instance for one replay (holds the per-server queues).
#[derive(Debug, Clone)]
pub enum Policy {
    Fifo(Fifo),
    ReinSbf(ReinSbf),
    ReinSds(ReinSds),
    Rein(Rein),
    BrbEqualMax(BrbEqualMax),
    BrbUnifIncr(BrbUnifIncr),
    Oracle(Oracle),
    Tailx(Tailx),
    Duplicate(Duplicate),
    Speculative(Speculative),
}

/// Per-policy parameter handling: defaults, named setters with range checks, and the values actually used.
pub trait Params: Sized {
    /// Sets one parameter; unknown names and out-of-range values are errors naming the parameter.
    fn set(&mut self, name: &str, value: f64) -> Result<(), SimError>;
    /// Checks cross-parameter constraints.
    fn validate(&self) -> Result<(), SimError> {
        Ok(())
    }
    /// Every parameter with the value in use.
    fn params(&self) -> Vec<(&'static str, f64)>;
}

pub(crate) fn unknown(policy: &str, name: &str, known: &[&str]) -> SimError {
    SimError::param(
        name,
        "(unknown)",
        &format!("one of [{}] for policy '{policy}'", known.join(", ")),
    )
}

/// Policy names accepted by `PolicyConfig::from_name`.
pub const POLICY_NAMES: [&str; 10] = [
    "fifo",
    "rein-sbf",
    "rein-sds",
    "rein",
    "brb-equalmax",
    "brb-unifincr",
    "oracle",
    "tailx",
    "duplicate",
    "speculative",
];

impl PolicyConfig {
    /// The policy's default configuration by name.
    pub fn from_name(name: &str) -> Result<PolicyConfig, SimError> {
        Ok(match name {
            "fifo" => PolicyConfig::Fifo(FifoConfig::default()),
            "rein-sbf" => PolicyConfig::ReinSbf(ReinSbfConfig::default()),
            "rein-sds" => PolicyConfig::ReinSds(ReinSdsConfig::default()),
            "rein" => PolicyConfig::Rein(ReinConfig::default()),
            "brb-equalmax" => PolicyConfig::BrbEqualMax(BrbEqualMaxConfig::default()),
            "brb-unifincr" => PolicyConfig::BrbUnifIncr(BrbUnifIncrConfig::default()),
            "oracle" => PolicyConfig::Oracle(OracleConfig::default()),
            "tailx" => PolicyConfig::Tailx(TailxConfig::default()),
            "duplicate" => PolicyConfig::Duplicate(DuplicateConfig::default()),
            "speculative" => PolicyConfig::Speculative(SpeculativeConfig::default()),
            other => return Err(SimError::param("policy", other, &format!("one of {POLICY_NAMES:?}"))),
        })
    }

    /// Named policy with parameters applied and validated.
    pub fn build(name: &str, params: &[(String, f64)]) -> Result<PolicyConfig, SimError> {
        let mut cfg = PolicyConfig::from_name(name)?;
        for (k, v) in params {
            cfg.set(k, *v)?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn name(&self) -> &'static str {
        match self {
            PolicyConfig::Fifo(_) => "fifo",
            PolicyConfig::ReinSbf(_) => "rein-sbf",
            PolicyConfig::ReinSds(_) => "rein-sds",
            PolicyConfig::Rein(_) => "rein",
            PolicyConfig::BrbEqualMax(_) => "brb-equalmax",
            PolicyConfig::BrbUnifIncr(_) => "brb-unifincr",
            PolicyConfig::Oracle(_) => "oracle",
            PolicyConfig::Tailx(_) => "tailx",
            PolicyConfig::Duplicate(_) => "duplicate",
            PolicyConfig::Speculative(_) => "speculative",
        }
    }

    pub fn set(&mut self, name: &str, value: f64) -> Result<(), SimError> {
        match self {
            PolicyConfig::Fifo(c) => c.set(name, value),
            PolicyConfig::ReinSbf(c) => c.set(name, value),
            PolicyConfig::ReinSds(c) => c.set(name, value),
            PolicyConfig::Rein(c) => c.set(name, value),
            PolicyConfig::BrbEqualMax(c) => c.set(name, value),
            PolicyConfig::BrbUnifIncr(c) => c.set(name, value),
            PolicyConfig::Oracle(c) => c.set(name, value),
            PolicyConfig::Tailx(c) => c.set(name, value),
            PolicyConfig::Duplicate(c) => c.set(name, value),
            PolicyConfig::Speculative(c) => c.set(name, value),
        }
    }

    pub fn validate(&self) -> Result<(), SimError> {
        match self {
            PolicyConfig::Fifo(c) => c.validate(),
            PolicyConfig::ReinSbf(c) => c.validate(),
            PolicyConfig::ReinSds(c) => c.validate(),
            PolicyConfig::Rein(c) => c.validate(),
            PolicyConfig::BrbEqualMax(c) => c.validate(),
            PolicyConfig::BrbUnifIncr(c) => c.validate(),
            PolicyConfig::Oracle(c) => c.validate(),
            PolicyConfig::Tailx(c) => c.validate(),
            PolicyConfig::Duplicate(c) => c.validate(),
            PolicyConfig::Speculative(c) => c.validate(),
        }
    }

    pub fn params(&self) -> Vec<(&'static str, f64)> {
        match self {
            PolicyConfig::Fifo(c) => c.params(),
            PolicyConfig::ReinSbf(c) => c.params(),
            PolicyConfig::ReinSds(c) => c.params(),
            PolicyConfig::Rein(c) => c.params(),
            PolicyConfig::BrbEqualMax(c) => c.params(),
            PolicyConfig::BrbUnifIncr(c) => c.params(),
            PolicyConfig::Oracle(c) => c.params(),
            PolicyConfig::Tailx(c) => c.params(),
            PolicyConfig::Duplicate(c) => c.params(),
            PolicyConfig::Speculative(c) => c.params(),
        }
    }

    /// A fresh policy instance for `servers` servers and `ops` ops.
    pub fn instantiate(&self, servers: usize, ops: usize) -> Policy {
        match self {
            PolicyConfig::Fifo(c) => Policy::Fifo(Fifo::new(c, servers)),
            PolicyConfig::ReinSbf(c) => Policy::ReinSbf(ReinSbf::new(c, servers, ops)),
            PolicyConfig::ReinSds(c) => Policy::ReinSds(ReinSds::new(c, servers, ops)),
            PolicyConfig::Rein(c) => Policy::Rein(Rein::new(c, servers)),
            PolicyConfig::BrbEqualMax(c) => Policy::BrbEqualMax(BrbEqualMax::new(c, servers)),
            PolicyConfig::BrbUnifIncr(c) => Policy::BrbUnifIncr(BrbUnifIncr::new(c, servers)),
            PolicyConfig::Oracle(c) => Policy::Oracle(Oracle::new(c, servers)),
            PolicyConfig::Tailx(c) => Policy::Tailx(Tailx::new(c, servers)),
            PolicyConfig::Duplicate(c) => Policy::Duplicate(Duplicate::new(c, servers)),
            PolicyConfig::Speculative(c) => Policy::Speculative(Speculative::new(c, servers)),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $p:ident => $e:expr) => {
        match $self {
            Policy::Fifo($p) => $e,
            Policy::ReinSbf($p) => $e,
            Policy::ReinSds($p) => $e,
            Policy::Rein($p) => $e,
            Policy::BrbEqualMax($p) => $e,
            Policy::BrbUnifIncr($p) => $e,
            Policy::Oracle($p) => $e,
            Policy::Tailx($p) => $e,
            Policy::Duplicate($p) => $e,
            Policy::Speculative($p) => $e,
        }
    };
}

impl Scheduler for Policy {
    #[inline]
    fn tag(&mut self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
        dispatch!(self, p => p.tag(ctx, tags))
    }
    #[inline]
    fn enqueue(&mut self, server: usize, item: QItem) {
        dispatch!(self, p => p.enqueue(server, item))
    }
    #[inline]
    fn pick(&mut self, server: usize, now: u64) -> Option<QItem> {
        dispatch!(self, p => p.pick(server, now))
    }
    #[inline]
    fn on_done(&mut self, server: usize, op: u32, now: u64) {
        dispatch!(self, p => p.on_done(server, op, now))
    }
    #[inline]
    fn release_delay_ns(&self, tag: &Tag) -> u64 {
        dispatch!(self, p => p.release_delay_ns(tag))
    }
}

/// Index and cost of the bottleneck opset (the costliest; the first one on ties).
#[inline]
pub fn bottleneck(costs: &[f64]) -> (usize, f64) {
    let mut best = (0, f64::NEG_INFINITY);
    for (i, &c) in costs.iter().enumerate() {
        if c > best.1 {
            best = (i, c);
        }
    }
    best
}

/// Shared parameter of the single-priority-queue variants: the starvation boost.
pub(crate) fn set_boost(policy: &str, field: &mut f64, name: &str, value: f64) -> Result<(), SimError> {
    match name {
        "boost_after_ms" => {
            crate::error::check_range("boost_after_ms", value, 0.0, 1e9, "[0, 1e9] ms (0 = no boost)")?;
            *field = value;
            Ok(())
        }
        other => Err(unknown(policy, other, &["boost_after_ms"])),
    }
}

/// boost_after_ms → ns, `None` when disabled.
pub(crate) fn boost_ns(ms: f64) -> Option<u64> {
    (ms > 0.0).then(|| (ms * 1e6).round() as u64)
}
