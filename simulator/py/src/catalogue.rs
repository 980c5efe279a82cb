//! Binding of the policy and selector catalogues (the core's registries): every policy's and selector's name, event
//! loop and parameters with their defaults, valid ranges and search ranges. `kvsim.policy_specs()` and friends
//! turn these dicts into typed `PolicySpec` / `ParamSpec` objects. And the cluster's defaults (`ClusterConfig`):
//! the one statement of them, which `kvsim.Cluster`, tailtune's deployments and its API read.
use pyo3::prelude::*;
use pyo3::types::PyDict;

use kvsim_core::coordinator::refusal;
use kvsim_core::params::Params;
use kvsim_core::params::{Domain, ParamSpec, Search};
use kvsim_core::policy::Loop;
use kvsim_core::replica::SelectorConfig;
use kvsim_core::{
    ClusterConfig, CoordinatorConfig, PolicyConfig, POLICIES, POLICY_NAMES, REPLICA_NAMES, SELECTORS,
};

use crate::errors::to_py;

fn param_dict<'py>(py: Python<'py>, s: &ParamSpec) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", s.name)?;
    d.set_item(
        "doc",
        s.doc.split_whitespace().collect::<Vec<_>>().join(" "),
    )?;
    d.set_item("default", s.default)?;
    d.set_item("low", s.lo)?;
    d.set_item("high", s.hi)?;
    d.set_item(
        "domain",
        match s.domain {
            Domain::Real => "real",
            Domain::Integer => "integer",
            Domain::Rounded => "rounded",
        },
    )?;
    d.set_item("valid", s.valid)?;
    let search = match s.search {
        Search::Fixed => None,
        Search::Range {
            lo,
            hi,
            step,
            log,
            integer,
        } => {
            let r = PyDict::new(py);
            r.set_item("kind", if integer { "int" } else { "float" })?;
            r.set_item("low", lo)?;
            r.set_item("high", hi)?;
            r.set_item("step", (step > 0.0).then_some(step))?;
            r.set_item("log", log)?;
            r.set_item("choices", None::<Vec<f64>>)?;
            Some(r)
        }
        Search::Choices(c) => {
            let r = PyDict::new(py);
            r.set_item("kind", "cat")?;
            r.set_item("low", None::<f64>)?;
            r.set_item("high", None::<f64>)?;
            r.set_item("step", None::<f64>)?;
            r.set_item("log", false)?;
            r.set_item("choices", c.to_vec())?;
            Some(r)
        }
    };
    d.set_item("search", search)?;
    Ok(d)
}

fn entry_dict<'py>(
    py: Python<'py>,
    name: &str,
    event_loop: Option<Loop>,
    params: &[ParamSpec],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", name)?;
    let (fast, note) = match event_loop {
        Some(Loop::Fast) => (true, ""),
        Some(Loop::Generic(why)) => (false, why),
        None => (false, ""),
    };
    d.set_item("fast_loop", fast)?;
    d.set_item("loop_note", note)?;
    d.set_item(
        "params",
        params
            .iter()
            .map(|s| param_dict(py, s))
            .collect::<PyResult<Vec<_>>>()?,
    )?;
    Ok(d)
}

/// Every Cassandra scheduling policy of the registry, in registry order.
#[pyfunction]
fn policy_specs(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    POLICIES
        .iter()
        .map(|e| entry_dict(py, e.name, Some(e.event_loop), e.params))
        .collect()
}

/// Every replica selector of the registry, in registry order.
#[pyfunction]
fn replica_specs(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    SELECTORS
        .iter()
        .map(|e| entry_dict(py, e.name, Some(e.event_loop), e.params))
        .collect()
}

/// The memcached policies (batching, chisel).
#[pyfunction]
fn memcached_policy_specs(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    kvsim_core::memcached::POLICIES
        .iter()
        .map(|(name, params)| entry_dict(py, name, None, params))
        .collect()
}

/// The coordinator section (the Cassandra-wide parameters every queue policy but `duplicate` and `speculative`
/// accepts besides its own: speculative retry, read timeout, driver, multiget shape) with their defaults (the
/// queue policies'), valid ranges and search ranges.
#[pyfunction]
fn coordinator_spec(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    entry_dict(py, "coordinator", None, CoordinatorConfig::SPECS)
}

/// Policy names the core knows.
#[pyfunction]
fn policy_names() -> Vec<&'static str> {
    POLICY_NAMES.to_vec()
}

/// Default parameters of a policy.
#[pyfunction]
fn policy_defaults(name: &str) -> PyResult<Vec<(&'static str, f64)>> {
    Ok(PolicyConfig::from_name(name).map_err(to_py)?.params())
}

/// The coordinator section a replay of policy `name` starts from (its parameters with their defaults: off for
/// the queue policies, Cassandra's for `stock`); empty for a policy that takes none (`duplicate`, `speculative`).
#[pyfunction]
fn coordinator_defaults(name: &str) -> PyResult<Vec<(&'static str, f64)>> {
    let policy = PolicyConfig::from_name(name).map_err(to_py)?;
    if refusal(&policy).is_some() {
        return Ok(Vec::new());
    }
    Ok(CoordinatorConfig::for_policy(&policy).params())
}

/// Replica-selection names.
#[pyfunction]
fn replica_names() -> Vec<&'static str> {
    REPLICA_NAMES.to_vec()
}

/// Default parameters of a replica selector.
#[pyfunction]
fn replica_defaults(name: &str) -> PyResult<Vec<(&'static str, f64)>> {
    Ok(SelectorConfig::from_name(name).map_err(to_py)?.params())
}

/// The simulated cluster's defaults: the core's `ClusterConfig::default()` (Rein's cluster).
#[pyclass(module = "kvsim._kvsim", name = "ClusterConfig", frozen, get_all)]
pub struct PyClusterConfig {
    /// Servers.
    servers: u32,
    /// Parallel service slots per server.
    slots: u32,
    /// Replicas per key (RF).
    replication: u32,
    /// Tokens per server; 0 or 1 = one evenly spaced token per server.
    vnodes: u32,
    /// Mean service rate of one slot, ops/s.
    service_rate: f64,
    /// One-way network latency client ↔ server, ns.
    net_latency_ns: u64,
    /// Clients.
    clients: u32,
}

/// The simulated cluster's defaults (the core's `ClusterConfig::default()`).
#[pyfunction]
fn cluster_defaults() -> PyClusterConfig {
    let d = ClusterConfig::default();
    PyClusterConfig {
        servers: d.servers,
        slots: d.slots,
        replication: d.replication,
        vnodes: d.vnodes,
        service_rate: d.service_rate,
        net_latency_ns: d.net_latency_ns,
        clients: d.clients,
    }
}

/// Registers the catalogue on the extension module.
pub fn register_catalogue(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(policy_specs, m)?)?;
    m.add_function(wrap_pyfunction!(replica_specs, m)?)?;
    m.add_function(wrap_pyfunction!(memcached_policy_specs, m)?)?;
    m.add_function(wrap_pyfunction!(policy_names, m)?)?;
    m.add_function(wrap_pyfunction!(policy_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(coordinator_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(coordinator_spec, m)?)?;
    m.add_function(wrap_pyfunction!(replica_names, m)?)?;
    m.add_function(wrap_pyfunction!(replica_defaults, m)?)?;
    m.add_class::<PyClusterConfig>()?;
    m.add_function(wrap_pyfunction!(cluster_defaults, m)?)?;
    Ok(())
}
