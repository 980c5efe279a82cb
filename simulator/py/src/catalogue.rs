//! Binding of the policy and selector catalogues (the core's registries): every policy's and selector's name, event
//! loop and parameters with their defaults, valid ranges and search ranges, as typed records (`ComponentSpec`,
//! `ParamSpec`, `SearchSpec`; `kvsim.policy_specs()` and friends give each component its kind, as `PolicySpec`).
//! And the cluster's defaults (`ClusterConfig`): the one statement of them, which `kvsim.Cluster`, tailtune's
//! deployments and its API read.
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use kvsim_core::coordinator::refusal;
use kvsim_core::params::Params;
use kvsim_core::params::{Domain, ParamSpec, Search};
use kvsim_core::policy::Loop;
use kvsim_core::replica::SelectorConfig;
use kvsim_core::{
    ClusterConfig, CoordinatorConfig, PolicyConfig, POLICIES, POLICY_NAMES, REPLICA_NAMES,
    SELECTORS,
};

use crate::errors::{to_py, ParameterError};

/// The range a tuner searches: an `int` or `float` range (optional grid `step`, optional `log` scale) or
/// categorical `choices` — the shape of the tuner's `Param` (kind, low, high, step, log, choices).
#[pyclass(module = "kvsim._kvsim", name = "SearchSpec", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PySearchSpec {
    /// `int`, `float` or `cat`.
    #[pyo3(get)]
    kind: &'static str,
    /// The range's low end (None for choices).
    #[pyo3(get)]
    low: Option<f64>,
    /// The range's high end (None for choices).
    #[pyo3(get)]
    high: Option<f64>,
    /// The grid step (None: continuous, or choices).
    #[pyo3(get)]
    step: Option<f64>,
    /// Sampled on a log scale.
    #[pyo3(get)]
    log: bool,
    choices: Option<Vec<f64>>,
}

#[pymethods]
impl PySearchSpec {
    #[new]
    fn new(
        kind: &str,
        low: Option<f64>,
        high: Option<f64>,
        step: Option<f64>,
        log: bool,
        choices: Option<Vec<f64>>,
    ) -> PyResult<Self> {
        let kind = ["int", "float", "cat"]
            .into_iter()
            .find(|k| *k == kind)
            .ok_or_else(|| {
                ParameterError::new_err(format!(
                    "parameter 'kind' = {kind} is out of range: valid int, float or cat"
                ))
            })?;
        Ok(PySearchSpec {
            kind,
            low,
            high,
            step,
            log,
            choices,
        })
    }

    /// The values of a categorical search (None for a range).
    #[getter]
    fn choices<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.choices
            .as_ref()
            .map(|c| PyTuple::new(py, c))
            .transpose()
    }

    fn __hash__(slf: &Bound<'_, Self>) -> PyResult<isize> {
        slf.repr()?.hash()
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        record_repr(
            slf.as_any(),
            "SearchSpec",
            &["kind", "low", "high", "step", "log", "choices"],
        )
    }
}

impl PySearchSpec {
    fn of(search: &Search) -> Option<Self> {
        match *search {
            Search::Fixed => None,
            Search::Range {
                lo,
                hi,
                step,
                log,
                integer,
            } => Some(PySearchSpec {
                kind: if integer { "int" } else { "float" },
                low: Some(lo),
                high: Some(hi),
                step: (step > 0.0).then_some(step),
                log,
                choices: None,
            }),
            Search::Choices(c) => Some(PySearchSpec {
                kind: "cat",
                low: None,
                high: None,
                step: None,
                log: false,
                choices: Some(c.to_vec()),
            }),
        }
    }
}

/// One parameter: its meaning, default and valid range (`low`..`high`; `integer`: whole numbers only, `rounded`:
/// rounded to whole numbers), the range as error messages state it (`valid`) and the search range (None = not
/// searched: the tuner keeps the default).
#[pyclass(module = "kvsim._kvsim", name = "ParamSpec", frozen, eq, get_all)]
#[derive(Clone, PartialEq)]
pub struct PyParamSpec {
    /// Its name.
    name: &'static str,
    /// What it means.
    doc: String,
    /// Its default.
    default: f64,
    /// The valid range's low end, inclusive.
    low: f64,
    /// The valid range's high end, inclusive.
    high: f64,
    /// `real`, `integer` or `rounded`.
    domain: &'static str,
    /// The valid range as error messages state it, e.g. `integer in 1..=64`.
    valid: &'static str,
    /// The range a tuner searches (None: not searched).
    search: Option<PySearchSpec>,
}

#[pymethods]
impl PyParamSpec {
    /// `name (valid range)`, as the unknown-parameter errors list it.
    fn describe(&self) -> String {
        format!("{} ({})", self.name, self.valid)
    }

    fn __hash__(slf: &Bound<'_, Self>) -> PyResult<isize> {
        slf.repr()?.hash()
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        record_repr(
            slf.as_any(),
            "ParamSpec",
            &[
                "name", "doc", "default", "low", "high", "domain", "valid", "search",
            ],
        )
    }
}

impl PyParamSpec {
    fn of(s: &ParamSpec) -> Self {
        PyParamSpec {
            name: s.name,
            doc: s.doc.split_whitespace().collect::<Vec<_>>().join(" "),
            default: s.default,
            low: s.lo,
            high: s.hi,
            domain: match s.domain {
                Domain::Real => "real",
                Domain::Integer => "integer",
                Domain::Rounded => "rounded",
            },
            valid: s.valid,
            search: PySearchSpec::of(&s.search),
        }
    }
}

/// A policy, replica selector or the coordinator section of a registry: its name, whether the engine's event loop
/// is monomorphized for it (`fast_loop`; otherwise `loop_note` says why it runs the general loop) and its
/// parameters.
#[pyclass(module = "kvsim._kvsim", name = "ComponentSpec", frozen)]
pub struct PyComponentSpec {
    /// Its name.
    #[pyo3(get)]
    name: &'static str,
    /// The engine's event loop is monomorphized for it.
    #[pyo3(get)]
    fast_loop: bool,
    /// Why it runs the general loop (empty when it does not).
    #[pyo3(get)]
    loop_note: &'static str,
    params: Vec<PyParamSpec>,
}

#[pymethods]
impl PyComponentSpec {
    /// Its parameters, in declaration order.
    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.params.iter().cloned())
    }
}

/// `Name(field=repr, ...)`, the repr of a record.
fn record_repr(obj: &Bound<'_, PyAny>, name: &str, fields: &[&str]) -> PyResult<String> {
    let parts = fields
        .iter()
        .map(|f| Ok(format!("{f}={}", obj.getattr(*f)?.repr()?)))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(format!("{name}({})", parts.join(", ")))
}

fn component(
    name: &'static str,
    event_loop: Option<Loop>,
    params: &[ParamSpec],
) -> PyComponentSpec {
    let (fast_loop, loop_note) = match event_loop {
        Some(Loop::Fast) => (true, ""),
        Some(Loop::Generic(why)) => (false, why),
        None => (false, ""),
    };
    PyComponentSpec {
        name,
        fast_loop,
        loop_note,
        params: params.iter().map(PyParamSpec::of).collect(),
    }
}

/// Every Cassandra scheduling policy of the registry, in registry order.
#[pyfunction]
fn policy_specs() -> Vec<PyComponentSpec> {
    POLICIES
        .iter()
        .map(|e| component(e.name, Some(e.event_loop), e.params))
        .collect()
}

/// Every replica selector of the registry, in registry order.
#[pyfunction]
fn replica_specs() -> Vec<PyComponentSpec> {
    SELECTORS
        .iter()
        .map(|e| component(e.name, Some(e.event_loop), e.params))
        .collect()
}

/// The memcached policies (batching, chisel).
#[pyfunction]
fn memcached_policy_specs() -> Vec<PyComponentSpec> {
    kvsim_core::memcached::POLICIES
        .iter()
        .map(|&(name, params)| component(name, None, params))
        .collect()
}

/// The coordinator section (the Cassandra-wide parameters every queue policy but `duplicate` and `speculative`
/// accepts besides its own: speculative retry, read timeout, driver, multiget shape) with their defaults (the
/// queue policies'), valid ranges and search ranges.
#[pyfunction]
fn coordinator_spec() -> PyComponentSpec {
    component("coordinator", None, CoordinatorConfig::SPECS)
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
    m.add_class::<PySearchSpec>()?;
    m.add_class::<PyParamSpec>()?;
    m.add_class::<PyComponentSpec>()?;
    m.add_class::<PyClusterConfig>()?;
    m.add_function(wrap_pyfunction!(cluster_defaults, m)?)?;
    Ok(())
}
