//! Scheduling policies. The trait is small: the client tags each opset of a request (priority / queue), the
//! server enqueues the ops and picks the next one for a free slot, and an optional feedback hook sees every
//! completion.
//!
//! **The registry** ([`registry!`] below) is the one list of policies: each row names the policy's file, its
//! name, its config and scheduler types, and the event loop it runs. From it come [`PolicyConfig`] (config by
//! name, parameters, validation), [`Policy`] (enum dispatch), [`POLICY_NAMES`], [`POLICIES`] (the catalogue
//! with every parameter's default, valid range and search range) and [`Policy::visit`], which hands the
//! engine the scheduler as its own type for the policies marked `fast` (the event loop is monomorphized for
//! them) and as the `Policy` enum for those marked `generic` (with the reason). Adding a policy: one file
//! (config with `params!`, scheduler, `PolicyImpl`, `Scheduler`) and one row here; see docs/simulator.md,
//! "Adding a policy". A policy whose servers serve FIFO and whose clients tag nothing needs no scheduler of
//! its own: its row names `Fifo<ItsConfig>` by an alias (`duplicate`, `speculative`, `stock`). Neither does a
//! policy whose servers serve one priority queue: its config implements [`prio::PrioKey`] (the priority its
//! client gives each op, the starvation boost) and its row names `Prio<ItsConfig>` by an alias (`rein-sbf`,
//! `rein-sds`, `brb-equalmax`, `brb-unifincr`, `oracle`).
//!
//! Each policy lives in its own file; the server-side queue structures they share are in `queues.rs`, the
//! priority-queue policies' scheduler in `prio.rs`.
use crate::error::SimError;
use crate::params::{ParamSpec, Params};

pub mod prio;
pub mod queues;
pub mod stock_driver;

/// The event loop a policy runs (a registry column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loop {
    /// Monomorphized for the policy's scheduler type (and for each feedback selector).
    Fast,
    /// The general loop over the `Policy` enum, for the reason given.
    Generic(&'static str),
}

/// One registry row: the policy's name, its event loop and its parameters.
#[derive(Debug, Clone, Copy)]
pub struct PolicyEntry {
    pub name: &'static str,
    pub event_loop: Loop,
    /// Every parameter with its default, valid range and search range.
    pub params: &'static [ParamSpec],
    /// What the parameters belong to in messages (`policy 'rein'`).
    pub owner: &'static str,
}

/// A policy: its configuration type and the scheduler built from it for one replay.
pub trait PolicyImpl: Scheduler + Sized {
    type Config: Params;
    /// A fresh scheduler for `servers` servers and `ops` ops.
    fn new(cfg: &Self::Config, servers: usize, ops: usize) -> Self;
}

/// Receives the scheduler of a replay from [`Policy::visit`].
pub trait PolicyVisitor {
    type Output;
    /// A policy whose row says `fast`, as its own type.
    fn fast<S: Scheduler>(self, sched: S) -> Self::Output;
    /// A policy whose row says `generic`, as the enum.
    fn generic(self, sched: Policy) -> Self::Output;
}

macro_rules! registry {
    ($( $module:ident : $name:literal => $variant:ident ( $config:ident , $sched:ident ) $lp:ident $( ( $why:literal ) )? ; )*) => {
        $( pub mod $module; )*
        $( pub use $module::{$config, $sched}; )*

        /// Configuration of a policy, with its validated parameters.
        #[derive(Debug, Clone, PartialEq)]
        pub enum PolicyConfig {
            $( $variant($config), )*
        }

        /// A policy instance for one replay (holds the per-server queues).
        #[derive(Debug, Clone)]
        pub enum Policy {
            $( $variant($sched), )*
        }

        /// Policy names accepted by [`PolicyConfig::from_name`], in registry order.
        pub const POLICY_NAMES: &[&str] = &[ $( $name, )* ];

        /// The registry: every policy with its event loop and parameters.
        pub const POLICIES: &[PolicyEntry] = &[
            $( PolicyEntry {
                name: $name,
                event_loop: registry!(@loop $lp $($why)?),
                params: <$config as Params>::SPECS,
                owner: <$config as Params>::OWNER,
            }, )*
        ];

        impl PolicyConfig {
            /// The policy's default configuration by name.
            pub fn from_name(name: &str) -> Result<PolicyConfig, SimError> {
                match name {
                    $( $name => Ok(PolicyConfig::$variant(<$config>::default())), )*
                    other => Err(SimError::param("policy", other, &format!("one of {POLICY_NAMES:?}"))),
                }
            }

            pub fn name(&self) -> &'static str {
                match self {
                    $( PolicyConfig::$variant(_) => $name, )*
                }
            }

            pub fn set(&mut self, name: &str, value: f64) -> Result<(), SimError> {
                match self {
                    $( PolicyConfig::$variant(c) => c.set(name, value), )*
                }
            }

            pub fn validate(&self) -> Result<(), SimError> {
                match self {
                    $( PolicyConfig::$variant(c) => c.validate(), )*
                }
            }

            /// Every parameter with the value in use.
            pub fn params(&self) -> Vec<(&'static str, f64)> {
                match self {
                    $( PolicyConfig::$variant(c) => c.params(), )*
                }
            }

            /// The policy's registry row.
            pub fn entry(&self) -> &'static PolicyEntry {
                let name = self.name();
                POLICIES.iter().find(|e| e.name == name).expect("every config has a registry row")
            }

            /// A fresh policy instance for `servers` servers and `ops` ops.
            pub fn instantiate(&self, servers: usize, ops: usize) -> Policy {
                match self {
                    $( PolicyConfig::$variant(c) => Policy::$variant(<$sched as PolicyImpl>::new(c, servers, ops)), )*
                }
            }
        }

        impl Policy {
            /// Hands the scheduler to `v`: as its own type when the registry row says `fast`, as this enum when
            /// it says `generic`.
            #[inline]
            pub fn visit<V: PolicyVisitor>(self, v: V) -> V::Output {
                match self {
                    $( registry!(@pat $lp p $variant) => registry!(@visit $lp v p), )*
                }
            }
        }

        impl Scheduler for Policy {
            #[inline]
            fn tag(&mut self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
                match self { $( Policy::$variant(p) => p.tag(ctx, tags), )* }
            }
            #[inline]
            fn enqueue(&mut self, server: usize, item: QItem) {
                match self { $( Policy::$variant(p) => p.enqueue(server, item), )* }
            }
            #[inline]
            fn pick(&mut self, server: usize, now: u64) -> Option<QItem> {
                match self { $( Policy::$variant(p) => p.pick(server, now), )* }
            }
            #[inline]
            fn on_done(&mut self, server: usize, op: u32, now: u64) {
                match self { $( Policy::$variant(p) => p.on_done(server, op, now), )* }
            }
            #[inline]
            fn release_delay_ns(&self, tag: &Tag) -> u64 {
                match self { $( Policy::$variant(p) => p.release_delay_ns(tag), )* }
            }
            #[inline]
            fn tag_fields(&self) -> TagFields {
                match self { $( Policy::$variant(p) => p.tag_fields(), )* }
            }
        }
    };
    (@loop fast) => { Loop::Fast };
    (@loop generic $why:literal) => { Loop::Generic($why) };
    (@pat fast $p:ident $variant:ident) => { Policy::$variant($p) };
    (@pat generic $p:ident $variant:ident) => { $p @ Policy::$variant(_) };
    (@visit fast $v:ident $p:ident) => { $v.fast($p) };
    (@visit generic $v:ident $p:ident) => { $v.generic($p) };
}

// The registry. Columns: file (module), name, enum variant (config type, scheduler type), event loop.
registry! {
    fifo:         "fifo"         => Fifo        (FifoConfig,        Fifo)        fast;
    rein:         "rein"         => Rein        (ReinConfig,        Rein)        fast;
    rein_sbf:     "rein-sbf"     => ReinSbf     (ReinSbfConfig,     ReinSbf)     fast;
    rein_sds:     "rein-sds"     => ReinSds     (ReinSdsConfig,     ReinSds)     fast;
    brb_equalmax: "brb-equalmax" => BrbEqualMax (BrbEqualMaxConfig, BrbEqualMax) fast;
    brb_unifincr: "brb-unifincr" => BrbUnifIncr (BrbUnifIncrConfig, BrbUnifIncr) fast;
    oracle:       "oracle"       => Oracle      (OracleConfig,      Oracle)      fast;
    tailx:        "tailx"        => Tailx       (TailxConfig,       Tailx)       generic("the client's delay queue");
    duplicate:    "duplicate"    => Duplicate   (DuplicateConfig,   Duplicate)   generic("copies of every opset");
    speculative:  "speculative"  => Speculative (SpeculativeConfig, Speculative) generic("retry timers and copies");
    stock:        "stock"        => Stock       (StockConfig,       Stock)       generic("its coordinator section is on by default (99p)");
}

impl PolicyConfig {
    /// Named policy with parameters applied and validated.
    pub fn build(name: &str, params: &[(String, f64)]) -> Result<PolicyConfig, SimError> {
        let mut cfg = PolicyConfig::from_name(name)?;
        for (k, v) in params {
            cfg.set(k, *v)?;
        }
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Search choices of the starvation boost (ms; 0 = off) of the single-priority-queue variants.
pub const BOOST_CHOICES: &[f64] = &[0.0, 1.0, 2.0, 5.0, 10.0, 20.0];
/// Search choices of a large-value threshold THR_L (bytes) when the data suggests none.
pub const THR_L_CHOICES: &[f64] = &[4096.0, 16384.0, 65536.0];

/// Metadata the client attaches to every op of an opset (Rein: "priority inserted as meta-data").
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Tag {
    /// Lower = served first (priority-queue policies).
    pub prio: f64,
    /// Queue index (multi-level queue policies), 0 = Q1.
    pub queue: u32,
}

/// The fields of [`Tag`] a policy's tagging sets; it leaves the others at their default. The engine keeps per
/// opset only these, and only per request when the policy gives every opset of a request the same tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagFields {
    pub prio: bool,
    pub queue: bool,
    /// The tags of a request's opsets are all the same.
    pub per_request: bool,
}

impl TagFields {
    pub const NONE: TagFields = TagFields {
        prio: false,
        queue: false,
        per_request: false,
    };
    pub const PRIO: TagFields = TagFields {
        prio: true,
        ..TagFields::NONE
    };
    /// One priority for the whole request.
    pub const REQUEST_PRIO: TagFields = TagFields {
        prio: true,
        per_request: true,
        ..TagFields::NONE
    };
    pub const QUEUE: TagFields = TagFields {
        queue: true,
        ..TagFields::NONE
    };
    pub const ALL: TagFields = TagFields {
        prio: true,
        queue: true,
        per_request: false,
    };
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
            dem: if demand_ns < DEM_FAR as u64 {
                demand_ns as u32
            } else {
                DEM_FAR
            },
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
    /// Feedback hook: an op finished at `server` (unused by the current policies).
    fn on_done(&mut self, _server: usize, _op: u32, _now: u64) {}
    /// Coordinator side: how long the client procrastinates an opset with this tag before sending it (TailX's
    /// delay queue); 0 = sent at once (every policy but tailx).
    fn release_delay_ns(&self, _tag: &Tag) -> u64 {
        0
    }
    /// The fields of the tags [`Scheduler::tag`] sets (the others stay at `Tag::default()`).
    fn tag_fields(&self) -> TagFields {
        TagFields::ALL
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

/// boost_after_ms → ns, `None` when disabled.
pub(crate) fn boost_ns(ms: f64) -> Option<u64> {
    (ms > 0.0).then(|| (ms * 1e6).round() as u64)
}
