//! Binding of the core replay: `Cluster`, `Workload` (materialized once, replayed under many policies) and
//! helpers to hash keys onto the ring. Arrays cross the boundary through the buffer protocol (numpy arrays in,
//! bytes out, wrapped by numpy on the Python side), so no per-element Python objects are made.
use pyo3::buffer::{Element, PyBuffer};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use kvsim_core::hash::{token_of_bytes, token_of_u64};
use kvsim_core::policy::POLICY_NAMES;
use kvsim_core::{replay, Arrivals, Cluster, ClusterConfig, PolicyConfig, ReplayConfig, SimError, Workload, WorkloadSpec};

create_exception!(
    _kvsim,
    KvsimError,
    PyValueError,
    "Base of kvsim's errors (a ValueError)."
);
create_exception!(
    _kvsim,
    ParameterError,
    KvsimError,
    "A parameter is out of range; the message names it."
);
create_exception!(
    _kvsim,
    WorkloadError,
    KvsimError,
    "The workload arrays are inconsistent."
);

pub(crate) fn to_py(e: SimError) -> PyErr {
    match e {
        SimError::BadParam { .. } | SimError::UnknownParam { .. } => ParameterError::new_err(e.to_string()),
        SimError::BadInput(_) => WorkloadError::new_err(e.to_string()),
    }
}

pub(crate) fn vec_of<T: Element + Copy>(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<T>> {
    let buf: PyBuffer<T> = PyBuffer::get(obj)
        .map_err(|e| WorkloadError::new_err(format!("{what}: expected a contiguous array of the right dtype ({e})")))?;
    buf.to_vec(py)
}

pub(crate) fn bytes_of<'py, T: Copy>(py: Python<'py>, v: &[T]) -> Bound<'py, PyBytes> {
    // SAFETY: plain-old-data numeric slices reinterpreted as bytes (native endianness, read by numpy).
    let b = unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) };
    PyBytes::new(py, b)
}

/// Ring tokens (int64) of integer key ids: Murmur3 of their 8 little-endian bytes.
#[pyfunction]
fn tokens_from_ids<'py>(py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let ids: Vec<u64> = vec_of(py, ids, "ids")?;
    let t: Vec<i64> = ids.iter().map(|&k| token_of_u64(k)).collect();
    Ok(bytes_of(py, &t))
}

/// Ring tokens (int64) of string keys: Murmur3 of their UTF-8 bytes (Cassandra's Murmur3Partitioner).
#[pyfunction]
fn tokens_from_strings<'py>(py: Python<'py>, keys: Vec<String>) -> PyResult<Bound<'py, PyBytes>> {
    let t: Vec<i64> = keys.iter().map(|k| token_of_bytes(k.as_bytes())).collect();
    Ok(bytes_of(py, &t))
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

#[pyclass(module = "kvsim._kvsim", name = "Cluster", frozen)]
pub struct PyCluster {
    inner: Cluster,
}

#[pymethods]
impl PyCluster {
    #[new]
    #[pyo3(signature = (servers, slots, replication, vnodes, service_rate, net_latency_ns, clients))]
    fn new(
        servers: u32,
        slots: u32,
        replication: u32,
        vnodes: u32,
        service_rate: f64,
        net_latency_ns: u64,
        clients: u32,
    ) -> PyResult<Self> {
        let cfg = ClusterConfig {
            servers,
            slots,
            replication,
            vnodes,
            service_rate,
            net_latency_ns,
            clients,
        };
        Ok(PyCluster {
            inner: Cluster::new(cfg).map_err(to_py)?,
        })
    }

    #[getter]
    fn groups(&self) -> usize {
        self.inner.groups()
    }

    /// Replica table (groups × RF, uint32) as bytes.
    fn replica_table<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes_of(py, self.inner.replica_table())
    }

    /// Replica group (uint32) of each token (int64 array).
    fn groups_of<'py>(&self, py: Python<'py>, tokens: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let t: Vec<i64> = vec_of(py, tokens, "tokens")?;
        let g: Vec<u32> = t.iter().map(|&x| self.inner.group_of(x)).collect();
        Ok(bytes_of(py, &g))
    }
}

#[pyclass(module = "kvsim._kvsim", name = "Workload", frozen)]
pub struct PyWorkload {
    pub(crate) cluster: Cluster,
    pub(crate) inner: Workload,
}

#[pymethods]
impl PyWorkload {
    /// Materializes a workload: `offsets` (int64, requests+1), `tokens` (int64 per op), optional per-op mean demand
    /// (float64 s), per-request clients (uint32) and timestamps (float64 s). Without timestamps arrivals are
    /// Poisson at `load`; with them the trace's times are used, scaled to `load` when it is given.
    #[new]
    #[pyo3(signature = (cluster, offsets, tokens, *, mean_demand=None, clients=None, timestamps=None, load=None, seed=0, demand_dist="exponential", demand_sigma=1.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        cluster: &PyCluster,
        offsets: &Bound<'_, PyAny>,
        tokens: &Bound<'_, PyAny>,
        mean_demand: Option<&Bound<'_, PyAny>>,
        clients: Option<&Bound<'_, PyAny>>,
        timestamps: Option<&Bound<'_, PyAny>>,
        load: Option<f64>,
        seed: u64,
        demand_dist: &str,
        demand_sigma: f64,
    ) -> PyResult<Self> {
        let dist = kvsim_core::demand::DemandDist::from_name(demand_dist, demand_sigma).map_err(to_py)?;
        let offs: Vec<i64> = vec_of(py, offsets, "offsets")?;
        if offs.iter().any(|&o| o < 0) {
            return Err(WorkloadError::new_err("offsets must be ≥ 0"));
        }
        let arrivals = match timestamps {
            Some(ts) => Arrivals::Trace {
                ts: vec_of(py, ts, "timestamps")?,
                load,
            },
            None => Arrivals::Poisson {
                load: load.unwrap_or(0.75),
            },
        };
        let spec = WorkloadSpec {
            req_offsets: offs.iter().map(|&o| o as u64).collect(),
            tokens: vec_of(py, tokens, "tokens")?,
            mean_demand: mean_demand.map(|m| vec_of(py, m, "mean_demand")).transpose()?,
            clients: clients.map(|c| vec_of(py, c, "clients")).transpose()?,
            arrivals,
            seed,
        };
        let c = cluster.inner.clone();
        let wl = py.detach(|| Workload::materialize_with(&c, &spec, dist)).map_err(to_py)?;
        Ok(PyWorkload { cluster: c, inner: wl })
    }

    #[getter]
    fn requests(&self) -> usize {
        self.inner.requests()
    }
    #[getter]
    fn opsets(&self) -> usize {
        self.inner.opsets()
    }
    #[getter]
    fn ops(&self) -> usize {
        self.inner.ops()
    }

    /// The materialized arrays as bytes (dtype in the key's comment of the .pyi).
    fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let w = &self.inner;
        d.set_item("arrival_ns", bytes_of(py, &w.arrival))?;
        d.set_item("client", bytes_of(py, &w.client))?;
        d.set_item("req_opsets", bytes_of(py, &w.req_opsets))?;
        d.set_item("opset_group", bytes_of(py, &w.opset_group))?;
        d.set_item("opset_req", bytes_of(py, &w.opset_req))?;
        d.set_item("opset_ops", bytes_of(py, &w.opset_ops))?;
        d.set_item("demand_ns", bytes_of(py, &w.demand))?;
        d.set_item("op_input", bytes_of(py, &w.op_input))?;
        d.set_item("replicas", bytes_of(py, self.cluster.replica_table()))?;
        Ok(d)
    }

    /// Replays the workload under `policy` (GIL released); returns a dict of results (see kvsim.Result).
    #[pyo3(signature = (policy, params, *, warmup=0.1, record_ops=false, size_aware_cost=false))]
    fn replay<'py>(
        &self,
        py: Python<'py>,
        policy: &str,
        params: Vec<(String, f64)>,
        warmup: f64,
        record_ops: bool,
        size_aware_cost: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let cfg = PolicyConfig::build(policy, &params).map_err(to_py)?;
        let cfg = ReplayConfig {
            warmup,
            record_ops,
            size_aware_cost,
            ..ReplayConfig::new(cfg)
        };
        let res = py.detach(|| replay(&self.cluster, &self.inner, &cfg)).map_err(to_py)?;
        result_dict(py, &res)
    }
}

/// The replay result as the dict `kvsim.Result` is made from.
pub(crate) fn result_dict<'py>(py: Python<'py>, res: &kvsim_core::RunResult) -> PyResult<Bound<'py, PyDict>> {
    {
        let d = PyDict::new(py);
        let s = &res.summary;
        d.set_item("policy", res.policy)?;
        d.set_item("params", res.params.clone())?;
        d.set_item("p50_ms", s.p50_ms)?;
        d.set_item("p95_ms", s.p95_ms)?;
        d.set_item("p99_ms", s.p99_ms)?;
        d.set_item("p999_ms", s.p999_ms)?;
        d.set_item("mean_ms", s.mean_ms)?;
        d.set_item("measured", s.measured)?;
        d.set_item("requests", res.requests)?;
        d.set_item("ops", res.ops)?;
        d.set_item("events", res.events)?;
        d.set_item("utilization", s.utilization)?;
        d.set_item("server_load", bytes_of(py, &s.server_load))?;
        d.set_item("server_load_max", s.server_load_max)?;
        d.set_item("half_ratio", s.half_ratio)?;
        d.set_item("steady_state", s.steady_state)?;
        d.set_item("sim_wall_s", res.sim_wall_s)?;
        d.set_item("bytes_per_op", res.bytes_per_op)?;
        d.set_item("latency_ns", bytes_of(py, &res.latency_ns))?;
        if let Some(r) = &res.records {
            let rd = PyDict::new(py);
            rd.set_item("request", bytes_of(py, &r.request))?;
            rd.set_item("opset", bytes_of(py, &r.opset))?;
            rd.set_item("server", bytes_of(py, &r.server))?;
            rd.set_item("slot", bytes_of(py, &r.slot))?;
            rd.set_item("enqueue_ns", bytes_of(py, &r.enqueue))?;
            rd.set_item("start_ns", bytes_of(py, &r.start))?;
            rd.set_item("end_ns", bytes_of(py, &r.end))?;
            rd.set_item("demand_ns", bytes_of(py, &r.demand))?;
            d.set_item("records", rd)?;
        }
        Ok(d)
    }
}

/// Registers the replay API on the extension module.
pub fn register_replay(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyCluster>()?;
    m.add_class::<PyWorkload>()?;
    m.add_function(wrap_pyfunction!(tokens_from_ids, m)?)?;
    m.add_function(wrap_pyfunction!(tokens_from_strings, m)?)?;
    m.add_function(wrap_pyfunction!(policy_names, m)?)?;
    m.add_function(wrap_pyfunction!(policy_defaults, m)?)?;
    m.add("KvsimError", py.get_type::<KvsimError>())?;
    m.add("ParameterError", py.get_type::<ParameterError>())?;
    m.add("WorkloadError", py.get_type::<WorkloadError>())?;
    Ok(())
}
