//! What a replay takes besides the cluster and the workload: one [`ReplayConfig`].
//!
//! It groups the client side (scheduling policy, replica selector, what the client knows of value sizes, the
//! client model), the server side (speeds and slowdowns), the requests' mix (writes) and what is reported
//! (warm-up cut, per-op records). The default is the core model: `fifo`, round-robin replicas, one value size,
//! uniform servers, reads only, open-loop arrivals.
//!
//! The Cassandra-wide machinery every queue policy runs under (the coordinator's speculative retry, the driver's
//! routing and speculative executions, the multiget shape) is the `coordinator` section next to `selector`
//! ([`CoordinatorConfig`]: off by default, Cassandra's defaults for `stock`); the dynamic-snitch settings are
//! the `dynamic-snitch` selector's. Server stalls are in [`ServerModelConfig`]; a workload's request structure
//! shared across seeds lives in the [`Workload`](crate::Workload), which this config never copies.
use crate::client_model::ClosedLoop;
use crate::coordinator::CoordinatorConfig;
use crate::error::SimError;
use crate::policy::PolicyConfig;
use crate::replica::SelectorConfig;
use crate::server_model::ServerModelConfig;

/// The configuration of one replay (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayConfig {
    /// Scheduling policy (client tagging, server queues) with its parameters.
    pub policy: PolicyConfig,
    /// Replica selection with its parameters.
    pub selector: SelectorConfig,
    /// The coordinator's speculative retry, the driver and the multiget shape (off = the policy's own replay;
    /// [`CoordinatorConfig::for_policy`] gives a policy's default).
    pub coordinator: CoordinatorConfig,
    /// What the client and the servers know about each op's value size (per op, workload order).
    pub sizes: SizeClasses,
    /// Per-server speed factors and time-varying slowdowns (default: every server at speed 1).
    pub servers: ServerModelConfig,
    /// Per op (workload order): the op is a write (served at every replica of its group, answered by the first
    /// replica done: consistency ONE). Empty = reads only.
    pub writes: Vec<bool>,
    /// Who issues the requests: the workload's open-loop arrivals or closed-loop client threads.
    pub client: ClientModel,
    /// Fraction of the first requests (in arrival order) left out of the percentiles, in [0, 0.99].
    pub warmup: f64,
    /// Keep the per-op record (request, opset, server, slot, enqueue, start, end, demand).
    pub record_ops: bool,
    /// Opset cost = Σ mean demand × service_rate (in units of an average op) instead of the op count
    /// (Rein as published). Equal to the count when every op has the default mean demand.
    pub size_aware_cost: bool,
    /// Seed of the replay's own random streams: replica selectors, the slowdown schedule, think times.
    pub seed: u64,
    /// Stop the replay as soon as a quantile of its latencies is certainly above a bound (None: replay to the
    /// end).
    pub stop: Option<StopRule>,
    /// The coordinators' read-latency history (the coordinator section's histogram, `spec_histogram` = 1):
    /// sample counts per bucket of Cassandra's microsecond histogram (`decaying_histogram::BUCKETS` values, the
    /// buckets' upper bounds `decaying_histogram::offsets()`, or one more with the overflow bucket), which every
    /// coordinator's histogram holds at time 0, each recorded with the weight then (`spec_landmark_ms` after the
    /// landmark) — e.g. the difference of a node's raw bucket counts (`values()`) over the minute before the
    /// replayed one. Empty (the default): the histograms start empty, as a table just opened.
    pub latency_history: Vec<u64>,
}

/// Stop a replay early once its `quantile` of the measured latencies (after the warm-up cut; linear
/// interpolation, numpy's default) is certainly above `above_ns`: once so many measured requests have completed
/// above it that the order statistic the quantile starts from is above it whatever the other requests do. Used
/// where only "above or not" matters (the tuner's check of a sample's candidates over a trace's bursts), since a
/// replay that storms costs as much as any to finish.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StopRule {
    /// In (0, 1).
    pub quantile: f64,
    pub above_ns: u64,
}

impl StopRule {
    /// How many of `n_req` requests' measured latencies above `above_ns` settle it: with `m` measured (after
    /// the cut of ⌊warmup · n⌋, at most n − 1) the quantile interpolates from the ⌊q (m − 1)⌋-th smallest up, so
    /// m − ⌊q (m − 1)⌋ latencies above the bound put that one above it.
    pub fn requests_above(&self, n_req: usize, warmup: f64) -> usize {
        let cut = ((warmup * n_req as f64).floor() as usize).min(n_req.saturating_sub(1));
        let m = n_req - cut;
        if m == 0 {
            return usize::MAX;
        }
        m - (self.quantile * (m - 1) as f64).floor() as usize
    }

    pub fn validate(&self) -> Result<(), SimError> {
        if self.quantile > 0.0 && self.quantile < 1.0 {
            Ok(())
        } else {
            Err(SimError::param("stop quantile", self.quantile, "(0, 1)"))
        }
    }
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig::new(PolicyConfig::Fifo(Default::default()))
    }
}

impl ReplayConfig {
    /// `policy` on the core model (round-robin replicas, the policy's default coordinator section, one value
    /// size, uniform servers, reads only, open loop, warm-up 0.1, seed 0).
    pub fn new(policy: PolicyConfig) -> Self {
        ReplayConfig {
            coordinator: CoordinatorConfig::for_policy(&policy),
            policy,
            selector: SelectorConfig::default(),
            sizes: SizeClasses::default(),
            servers: ServerModelConfig::default(),
            writes: Vec::new(),
            client: ClientModel::Open,
            warmup: 0.1,
            record_ops: false,
            size_aware_cost: false,
            seed: 0,
            stop: None,
            latency_history: Vec::new(),
        }
    }

    /// The named policy with `params` (each to the policy when it has it, else to the coordinator section: see
    /// [`crate::coordinator::build_policy`]) on the core model, as [`ReplayConfig::new`].
    pub fn build(name: &str, params: &[(String, f64)]) -> Result<Self, SimError> {
        let (policy, coordinator) = crate::coordinator::build_policy(name, params)?;
        Ok(ReplayConfig {
            coordinator,
            ..ReplayConfig::new(policy)
        })
    }

    /// True when none of the server, write, client-model or coordinator extensions is on.
    pub fn plain_model(&self) -> bool {
        !self.coordinator.active()
            && self.servers.is_uniform()
            && !self.writes.iter().any(|&w| w)
            && self.client == ClientModel::Open
    }

    /// Checks everything that does not depend on the workload and the cluster.
    pub fn validate(&self) -> Result<(), SimError> {
        crate::error::check_range(
            "warmup",
            self.warmup,
            0.0,
            0.99,
            "[0, 0.99] (fraction of requests)",
        )?;
        self.policy.validate()?;
        crate::coordinator::check(&self.policy, &self.coordinator)?;
        self.selector.validate()?;
        if let ClientModel::Closed(c) = &self.client {
            c.validate()?;
        }
        Ok(())
    }
}

/// Per op (workload order): is the value large? Empty vectors = no op is large.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SizeClasses {
    /// The client's estimate (the large-key Bloom filter's answer).
    pub large_est: Vec<bool>,
    /// The truth: the value exceeds THR_L (what a server reports).
    pub large_true: Vec<bool>,
}

/// Who issues the requests.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ClientModel {
    /// The workload's arrival times (open loop).
    #[default]
    Open,
    /// Client threads issuing the workload's requests in order, each after its previous one completed plus a
    /// think time; the workload's arrival times are ignored.
    Closed(ClosedLoop),
}

impl ClientModel {
    pub fn closed(&self) -> Option<&ClosedLoop> {
        match self {
            ClientModel::Open => None,
            ClientModel::Closed(c) => Some(c),
        }
    }
}
