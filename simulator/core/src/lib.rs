//! kvsim-core: a deterministic discrete-event replay of a key-value cluster serving multigets.
//!
//! This crate has no Python dependency; `simulator/py` wraps it with PyO3. Model choices: docs/simulator.md.
//!
//! - [`cluster`]: servers × slots, Murmur3 token ring with RF consecutive replicas, network latency, clients
//!   (with [`client_rtt`]: the client ↔ coordinator round trip as a measured distribution);
//!   [`ring`]: an explicit Cassandra ring (nodes' tokens, datacenters, racks) placed as Cassandra places replicas.
//! - [`workload`]: arrivals, opsets and per-op demands materialized from a seed before the replay.
//! - [`replay`] (one entry point) with a [`ReplayConfig`], returning a [`RunResult`]; [`coordinator`]: its
//!   Cassandra-wide section (speculative retry, driver, multiget shape) every queue policy runs under.
//! - [`engine`]: the event core; [`policy`]: scheduling policies (one file each, one registry row each);
//!   [`replica`]: replica selection (likewise); [`params`]: their declared parameters.
//! - [`memcached`]: the memcached deployment kind (Chisel), a separate engine.

/// Version of the simulator model (bumped when results for the same inputs change).
pub const MODEL_VERSION: u32 = 2;

pub mod bloom;
pub mod client_model;
pub mod client_rtt;
pub mod cluster;
pub mod config;
pub mod coordinator;
pub mod decaying_histogram;
pub mod demand;
pub mod engine;
pub mod error;
pub mod hash;
pub mod held;
pub mod params;
pub mod policy;
pub mod prefetch;
pub mod replica;
pub mod result;
pub mod ring;
pub mod rng;
pub mod runs;
pub mod server_model;
pub mod stall_schedule;
pub mod stats;
pub mod timers;
pub mod workload;

pub mod memcached;

pub use cluster::{Cluster, ClusterConfig};
pub use config::{ClientModel, ReplayConfig, SizeClasses, StopRule};
pub use coordinator::CoordinatorConfig;
pub use engine::replay;
pub use error::SimError;
pub use params::{ParamSpec, Params, Search};
pub use policy::{PolicyConfig, POLICIES, POLICY_NAMES};
pub use replica::{SelectorConfig, REPLICA_NAMES, SELECTORS};
pub use result::{CopyStats, HeldStats, OpRecords, RunResult, WriteStats};
pub use ring::{Placement, Ring, RingNode, Strategy};
pub use workload::{Arrivals, Column, Draws, Workload, WorkloadLayout, WorkloadSpec};
