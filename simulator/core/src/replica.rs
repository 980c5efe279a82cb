//! Replica selection — a seam separate from the server queue discipline: round-robin (Rein §5.3), random,
//! least-outstanding, dynamic snitching (`ds`, and Cassandra's `DynamicEndpointSnitch` as it is), C3 and Héron,
//! the last five fed by per-op response feedback.
//!
//! One selector per file. **The registry** ([`selectors!`] below) is the one list of selectors: each row names
//! the selector's file, its name, its config and selector types, and the event loop it runs. From it come
//! [`SelectorConfig`] (config by name, parameters), [`Selector`] (enum dispatch), [`REPLICA_NAMES`],
//! [`SELECTORS`] (the catalogue with every parameter's default, valid range and search range) and
//! [`Selector::visit`]: `fast` selectors get an event loop monomorphized for their type (their feedback calls
//! inline into it); `generic` ones run over the `Selector` enum, for the reason given.
pub mod feedback;

pub use feedback::{Feedback, SelectCtx};

use crate::error::SimError;
use crate::params::{ParamSpec, Params};
use crate::policy::Loop;

/// Chooses one replica of a replica group for an opset.
pub trait ReplicaSelector {
    /// `replicas` are the group's RF servers (primary first); `outstanding[s]` = ops in flight/queued/in service.
    /// Selectors that need more context implement `choose` instead.
    fn select(&mut self, client: u32, group: u32, replicas: &[u32], outstanding: &[u32]) -> u32 {
        let ctx = SelectCtx {
            now: 0,
            client,
            group,
            replicas,
            outstanding,
            size: 1,
            large_ops: 0,
        };
        self.choose(&ctx).unwrap_or(replicas[0])
    }
    /// The replica for an opset, or `None` to hold it at the client (C3's backlog, Héron's blocked large
    /// requests); the engine retries at `wakeup` and whenever feedback reaches a client.
    fn choose(&mut self, ctx: &SelectCtx<'_>) -> Option<u32> {
        Some(self.select(ctx.client, ctx.group, ctx.replicas, ctx.outstanding))
    }
    /// Feedback hook: an op of `client` served by `server` finished at `now` (unused by round-robin).
    fn on_response(&mut self, _client: u32, _server: u32, _now: u64) {}
    /// The selector wants `on_op_response` for every op (the engine then tracks server queues).
    fn wants_feedback(&self) -> bool {
        false
    }
    /// Per-op feedback, called when the op ends; `fb.at` is when it reaches the client.
    fn on_op_response(&mut self, _fb: &Feedback) {}
    /// When held opsets should be retried next (besides feedback arrivals), if the selector knows.
    fn wakeup(&self, _now: u64) -> Option<u64> {
        None
    }
    /// A request's opsets are about to be placed at `now`: `client` will choose among `replicas` (group
    /// `group`). Selectors whose choice reads per-(client, server) state prefetch it here, so the request's cache
    /// misses overlap instead of coming one per choice. A hint only: no state may change. Default: nothing.
    #[inline]
    fn prefetch_choice(&self, _now: u64, _client: u32, _group: u32, _replicas: &[u32]) {}
    /// Called before the held opsets are retried at `now`: which of them `choose` may place now. `Skip`
    /// promises that `choose` would refuse every one without changing any state; `Freed` that it would refuse,
    /// without changing any state, every one whose replicas are all outside the servers it pushed onto `freed`
    /// (and that placing one never lets another, refused before, through). Default: `All`.
    fn held_retry(&mut self, _now: u64, _freed: &mut Vec<u32>) -> HeldRetry {
        HeldRetry::All
    }
    /// In a `Freed` retry, before each held opset of the group with `replicas`: `false` promises that `choose`
    /// would refuse, without changing any state, every held opset of that group for the rest of this retry.
    fn may_place_in(&self, _replicas: &[u32]) -> bool {
        true
    }
}

/// Which held opsets a retry visits (see [`ReplicaSelector::held_retry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldRetry {
    All,
    Skip,
    /// Only those with a replica among the servers the selector listed.
    Freed,
}

/// What the selectors need to know about the run.
#[derive(Debug, Clone, Copy)]
pub struct SelectorEnv {
    pub clients: usize,
    pub groups: usize,
    pub rf: usize,
    pub servers: usize,
    pub slots: u32,
    /// Mean op demand of the workload, ns (C3's time constants are multiples of it).
    pub mean_service_ns: f64,
    pub net_latency_ns: u64,
    pub seed: u64,
}

/// A replica selector: its configuration type and how it is built for one replay.
pub trait SelectorImpl: ReplicaSelector + Sized {
    type Config: Params;
    fn build(cfg: &Self::Config, env: &SelectorEnv) -> Self;
}

/// Receives the selector of a replay from [`Selector::visit`].
pub trait SelectorVisitor {
    type Output;
    /// A selector whose row says `fast`, as its own type.
    fn fast<R: ReplicaSelector>(self, sel: R) -> Self::Output;
    /// A selector whose row says `generic`, as the enum.
    fn generic(self, sel: Selector) -> Self::Output;
}

/// One registry row: the selector's name, its event loop and its parameters.
#[derive(Debug, Clone, Copy)]
pub struct SelectorEntry {
    pub name: &'static str,
    pub event_loop: Loop,
    pub params: &'static [ParamSpec],
    /// What the parameters belong to in messages (`replica selector 'ds'`).
    pub owner: &'static str,
}

macro_rules! selectors {
    ($( $module:ident : $name:literal => $variant:ident ( $config:ident , $sel:ident ) $lp:ident $( ( $why:literal ) )? ; )*) => {
        $( pub mod $module; )*
        $( pub use $module::{$config, $sel}; )*

        /// Configuration of a replica selector, with its validated parameters.
        #[derive(Debug, Clone, PartialEq)]
        pub enum SelectorConfig {
            $( $variant($config), )*
        }

        /// Replica selection strategies (enum dispatch).
        #[derive(Debug, Clone)]
        pub enum Selector {
            $( $variant($sel), )*
        }

        /// Selector names accepted by [`SelectorConfig::from_name`], in registry order.
        pub const REPLICA_NAMES: &[&str] = &[ $( $name, )* ];

        /// The registry: every selector with its event loop and parameters.
        pub const SELECTORS: &[SelectorEntry] = &[
            $( SelectorEntry {
                name: $name,
                event_loop: selectors!(@loop $lp $($why)?),
                params: <$config as Params>::SPECS,
                owner: <$config as Params>::OWNER,
            }, )*
        ];

        impl SelectorConfig {
            pub fn from_name(name: &str) -> Result<SelectorConfig, SimError> {
                match name {
                    $( $name => Ok(SelectorConfig::$variant(<$config>::default())), )*
                    other => Err(SimError::param("replica", other, &format!("one of {REPLICA_NAMES:?}"))),
                }
            }

            pub fn name(&self) -> &'static str {
                match self {
                    $( SelectorConfig::$variant(_) => $name, )*
                }
            }

            pub fn set(&mut self, name: &str, v: f64) -> Result<(), SimError> {
                match self {
                    $( SelectorConfig::$variant(c) => c.set(name, v), )*
                }
            }

            pub fn validate(&self) -> Result<(), SimError> {
                match self {
                    $( SelectorConfig::$variant(c) => c.validate(), )*
                }
            }

            /// Every parameter with the value in use.
            pub fn params(&self) -> Vec<(&'static str, f64)> {
                match self {
                    $( SelectorConfig::$variant(c) => c.params(), )*
                }
            }

            /// The selector's registry row.
            pub fn entry(&self) -> &'static SelectorEntry {
                let name = self.name();
                SELECTORS.iter().find(|e| e.name == name).expect("every config has a registry row")
            }

            pub fn instantiate(&self, env: &SelectorEnv) -> Selector {
                match self {
                    $( SelectorConfig::$variant(c) => Selector::$variant(<$sel as SelectorImpl>::build(c, env)), )*
                }
            }
        }

        impl Selector {
            /// Hands the selector to `v`: as its own type when the registry row says `fast`, as this enum when it
            /// says `generic`.
            #[inline]
            pub fn visit<V: SelectorVisitor>(self, v: V) -> V::Output {
                match self {
                    $( selectors!(@pat $lp s $variant) => selectors!(@visit $lp v s), )*
                }
            }
        }

        impl ReplicaSelector for Selector {
            #[inline]
            fn select(&mut self, client: u32, group: u32, replicas: &[u32], outstanding: &[u32]) -> u32 {
                match self { $( Selector::$variant(s) => s.select(client, group, replicas, outstanding), )* }
            }
            #[inline]
            fn choose(&mut self, ctx: &SelectCtx<'_>) -> Option<u32> {
                match self { $( Selector::$variant(s) => s.choose(ctx), )* }
            }
            #[inline]
            fn on_response(&mut self, client: u32, server: u32, now: u64) {
                match self { $( Selector::$variant(s) => s.on_response(client, server, now), )* }
            }
            #[inline]
            fn wants_feedback(&self) -> bool {
                match self { $( Selector::$variant(s) => s.wants_feedback(), )* }
            }
            #[inline]
            fn on_op_response(&mut self, fb: &Feedback) {
                match self { $( Selector::$variant(s) => s.on_op_response(fb), )* }
            }
            #[inline]
            fn wakeup(&self, now: u64) -> Option<u64> {
                match self { $( Selector::$variant(s) => s.wakeup(now), )* }
            }
            #[inline]
            fn held_retry(&mut self, now: u64, freed: &mut Vec<u32>) -> HeldRetry {
                match self { $( Selector::$variant(s) => s.held_retry(now, freed), )* }
            }
            #[inline]
            fn may_place_in(&self, replicas: &[u32]) -> bool {
                match self { $( Selector::$variant(s) => s.may_place_in(replicas), )* }
            }
            #[inline]
            fn prefetch_choice(&self, now: u64, client: u32, group: u32, replicas: &[u32]) {
                match self { $( Selector::$variant(s) => s.prefetch_choice(now, client, group, replicas), )* }
            }
        }
    };
    (@loop fast) => { Loop::Fast };
    (@loop generic $why:literal) => { Loop::Generic($why) };
    (@pat fast $s:ident $variant:ident) => { Selector::$variant($s) };
    (@pat generic $s:ident $variant:ident) => { $s @ Selector::$variant(_) };
    (@visit fast $v:ident $s:ident) => { $v.fast($s) };
    (@visit generic $v:ident $s:ident) => { $v.generic($s) };
}

// The registry. Columns: file (module), name, enum variant (config type, selector type), event loop.
selectors! {
    round_robin:       "round-robin"       => RoundRobin       (RoundRobinConfig,       RoundRobin)       generic("no feedback to inline");
    random:            "random"            => Random           (RandomConfig,           RandomSel)        generic("no feedback to inline");
    least_outstanding: "least-outstanding" => LeastOutstanding (LeastOutstandingConfig, LeastOutstanding) fast;
    dynamic_snitch:    "ds"                => Ds               (DsConfig,               DynamicSnitch)    fast;
    endpoint_snitch:   "dynamic-snitch"    => Des              (DesConfig,              EndpointSnitch)   generic("stock's selector; stock runs the general loop");
    c3:                "c3"                => C3               (C3Config,               C3)               fast;
    heron:             "heron"             => Heron            (HeronConfig,            Heron)            fast;
}

impl Default for SelectorConfig {
    /// Round-robin, the core model's selector.
    fn default() -> Self {
        SelectorConfig::RoundRobin(RoundRobinConfig::default())
    }
}

impl SelectorConfig {
    /// Named selector with parameters applied.
    pub fn build(name: &str, params: &[(String, f64)]) -> Result<SelectorConfig, SimError> {
        let mut c = SelectorConfig::from_name(name)?;
        for (k, v) in params {
            c.set(k, *v)?;
        }
        Ok(c)
    }

    /// Needs the per-op large flags (Bloom filter answers and true sizes).
    pub fn size_aware(&self) -> bool {
        matches!(self, SelectorConfig::Heron(_))
    }

    /// Round-robin: the selector of the engine's plain loop.
    pub fn is_round_robin(&self) -> bool {
        matches!(self, SelectorConfig::RoundRobin(_))
    }

    /// `dynamic-snitch` with `local` = 1: coordinator (client) c is the node of server c mod servers, whose
    /// reads of itself the engine runs inline (no message, so no feedback).
    pub fn local_coordinators(&self) -> bool {
        matches!(self, SelectorConfig::Des(c) if c.local >= 0.5)
    }
}

impl SelectorImpl for RoundRobin {
    type Config = RoundRobinConfig;
    fn build(_cfg: &RoundRobinConfig, env: &SelectorEnv) -> Self {
        RoundRobin::new(env.clients, env.groups, env.rf)
    }
}

impl SelectorImpl for RandomSel {
    type Config = RandomConfig;
    fn build(_cfg: &RandomConfig, env: &SelectorEnv) -> Self {
        RandomSel::new(env.seed)
    }
}

impl SelectorImpl for LeastOutstanding {
    type Config = LeastOutstandingConfig;
    fn build(cfg: &LeastOutstandingConfig, env: &SelectorEnv) -> Self {
        LeastOutstanding::new(cfg.global > 0.0, env.clients, env.servers, env.seed)
    }
}

impl SelectorImpl for DynamicSnitch {
    type Config = DsConfig;
    fn build(cfg: &DsConfig, env: &SelectorEnv) -> Self {
        DynamicSnitch::new(cfg, env.clients, env.groups, env.servers)
    }
}

impl SelectorImpl for EndpointSnitch {
    type Config = DesConfig;
    fn build(cfg: &DesConfig, env: &SelectorEnv) -> Self {
        EndpointSnitch::new(cfg, env.clients, env.servers, env.seed)
    }
}

impl SelectorImpl for C3 {
    type Config = C3Config;
    fn build(cfg: &C3Config, env: &SelectorEnv) -> Self {
        C3::new(
            cfg,
            env.clients,
            env.servers,
            env.slots,
            env.mean_service_ns,
        )
    }
}

impl SelectorImpl for Heron {
    type Config = HeronConfig;
    fn build(cfg: &HeronConfig, env: &SelectorEnv) -> Self {
        Heron::new(
            cfg,
            env.clients,
            env.servers,
            env.slots,
            env.mean_service_ns,
            env.net_latency_ns,
        )
    }
}
