//! Replica-selection configuration: one config per selector, enum dispatch, named parameters with ranges.
use super::c3::{C3Config, C3};
use super::dynamic_snitch::{DsConfig, DynamicSnitch};
use super::heron::{Heron, HeronConfig};
use super::least_outstanding::LeastOutstanding;
use super::random::RandomSel;
use super::{RoundRobin, Selector};
use crate::error::{check_range, SimError};
use crate::policy::{unknown, Params};

/// Selector names accepted by [`SelectorConfig::from_name`].
pub const REPLICA_NAMES: [&str; 6] = ["round-robin", "random", "least-outstanding", "ds", "c3", "heron"];

/// `least-outstanding` parameters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LeastOutstandingConfig {
    /// 1 = every client's outstanding ops (idealized), 0 = the client's own (default).
    pub global: f64,
}

impl Params for LeastOutstandingConfig {
    fn set(&mut self, name: &str, v: f64) -> Result<(), SimError> {
        match name {
            "global" => {
                check_range(name, v, 0.0, 1.0, "0 or 1")?;
                self.global = v.round();
                Ok(())
            }
            other => Err(unknown("least-outstanding", other, &["global"])),
        }
    }
    fn params(&self) -> Vec<(&'static str, f64)> {
        vec![("global", self.global)]
    }
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

#[derive(Debug, Clone, PartialEq, Default)]
pub enum SelectorConfig {
    #[default]
    RoundRobin,
    Random,
    LeastOutstanding(LeastOutstandingConfig),
    Ds(DsConfig),
    C3(C3Config),
    Heron(HeronConfig),
}

impl SelectorConfig {
    pub fn from_name(name: &str) -> Result<SelectorConfig, SimError> {
        Ok(match name {
            "round-robin" => SelectorConfig::RoundRobin,
            "random" => SelectorConfig::Random,
            "least-outstanding" => SelectorConfig::LeastOutstanding(LeastOutstandingConfig::default()),
            "ds" => SelectorConfig::Ds(DsConfig::default()),
            "c3" => SelectorConfig::C3(C3Config::default()),
            "heron" => SelectorConfig::Heron(HeronConfig::default()),
            other => return Err(SimError::param("replica", other, &format!("one of {REPLICA_NAMES:?}"))),
        })
    }

    pub fn build(name: &str, params: &[(String, f64)]) -> Result<SelectorConfig, SimError> {
        let mut c = SelectorConfig::from_name(name)?;
        for (k, v) in params {
            c.set(k, *v)?;
        }
        Ok(c)
    }

    pub fn name(&self) -> &'static str {
        match self {
            SelectorConfig::RoundRobin => "round-robin",
            SelectorConfig::Random => "random",
            SelectorConfig::LeastOutstanding(_) => "least-outstanding",
            SelectorConfig::Ds(_) => "ds",
            SelectorConfig::C3(_) => "c3",
            SelectorConfig::Heron(_) => "heron",
        }
    }

    pub fn set(&mut self, name: &str, v: f64) -> Result<(), SimError> {
        match self {
            SelectorConfig::RoundRobin => Err(unknown("round-robin", name, &[])),
            SelectorConfig::Random => Err(unknown("random", name, &[])),
            SelectorConfig::LeastOutstanding(c) => c.set(name, v),
            SelectorConfig::Ds(c) => c.set(name, v),
            SelectorConfig::C3(c) => c.set(name, v),
            SelectorConfig::Heron(c) => c.set(name, v),
        }
    }

    pub fn params(&self) -> Vec<(&'static str, f64)> {
        match self {
            SelectorConfig::RoundRobin | SelectorConfig::Random => Vec::new(),
            SelectorConfig::LeastOutstanding(c) => c.params(),
            SelectorConfig::Ds(c) => c.params(),
            SelectorConfig::C3(c) => c.params(),
            SelectorConfig::Heron(c) => c.params(),
        }
    }

    /// Needs the per-op large flags (Bloom filter answers and true sizes).
    pub fn size_aware(&self) -> bool {
        matches!(self, SelectorConfig::Heron(_))
    }

    pub fn instantiate(&self, env: &SelectorEnv) -> Selector {
        match self {
            SelectorConfig::RoundRobin => Selector::RoundRobin(RoundRobin::new(env.clients, env.groups, env.rf)),
            SelectorConfig::Random => Selector::Random(RandomSel::new(env.seed)),
            SelectorConfig::LeastOutstanding(c) => Selector::LeastOutstanding(LeastOutstanding::new(
                c.global > 0.0,
                env.clients,
                env.servers,
                env.seed,
            )),
            SelectorConfig::Ds(c) => Selector::Ds(DynamicSnitch::new(c, env.clients, env.groups, env.servers)),
            SelectorConfig::C3(c) => Selector::C3(C3::new(c, env.clients, env.servers, env.slots, env.mean_service_ns)),
            SelectorConfig::Heron(c) => Selector::Heron(Heron::new(
                c,
                env.clients,
                env.servers,
                env.slots,
                env.mean_service_ns,
                env.net_latency_ns,
            )),
        }
    }
}
