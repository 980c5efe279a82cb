//! Binding of the core replay: `Cluster`, `WorkloadLayout` (the seed-independent part, built once), `Workload`
//! (a layout and one seed's draws, replayed under many configs), the one `replay(workload, config)` and helpers
//! to hash keys onto the ring. Arrays cross the boundary through the buffer protocol (numpy arrays in, bytes out,
//! wrapped by numpy on the Python side), so no per-element Python objects are made; read-only arrays (memory-
//! mapped files) can be borrowed as they are (`from_arrays`), so processes that map one file share its pages.
//! The typed API is the Python package's (`kvsim.replay`, `kvsim.ReplayConfig`).
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use kvsim_core::client_model::{ClosedLoop, ThinkDist};
use kvsim_core::coordinator::build_policy;
use kvsim_core::hash::{token_of_bytes, token_of_u64};
use kvsim_core::replica::SelectorConfig;
use kvsim_core::server_model::{ServerModelConfig, Slowdown, Stalls};
use kvsim_core::stall_schedule::{StallInterval, StallSchedule};
use kvsim_core::{
    replay, Arrivals, ClientModel, Cluster, ClusterConfig, Column, Draws, ReplayConfig,
    SizeClasses, StopRule, Workload, WorkloadLayout, WorkloadSpec,
};

use crate::buffers::{bytes_of, column_of, vec_of};
use crate::errors::{to_py, WorkloadError};
use crate::ring::PyRing;

/// A read-only array borrowed as it is, any other one copied.
fn column_or_copy(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Column<f64>> {
    match column_of::<f64>(obj, what) {
        Ok(c) => Ok(c),
        Err(_) => Ok(vec_of::<f64>(py, obj, what)?.into()),
    }
}

/// Request offsets (int64, requests + 1), none negative.
fn offsets_of(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let offs: Vec<i64> = vec_of(py, obj, "offsets")?;
    if offs.iter().any(|&o| o < 0) {
        return Err(WorkloadError::new_err("offsets must be ≥ 0"));
    }
    Ok(offs.iter().map(|&o| o as u64).collect())
}

/// Optional per-op f64 means and timestamps → the core's arrival rule.
fn arrivals_of(
    py: Python<'_>,
    timestamps: Option<&Bound<'_, PyAny>>,
    n_req: usize,
    load: Option<f64>,
) -> PyResult<Arrivals> {
    Ok(match timestamps {
        Some(ts) => {
            let mut v: Vec<f64> = vec_of(py, ts, "timestamps")?;
            if v.len() > n_req {
                v.truncate(n_req);
            }
            Arrivals::Trace { ts: v, load }
        }
        None => Arrivals::Poisson {
            load: load.unwrap_or(0.75),
        },
    })
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

/// Ring tokens (int64) of string keys held as UTF-8 bytes `data` with int64 `offsets` (len = keys + 1; key i is
/// `data[offsets[i]..offsets[i + 1]]`: an Arrow large_string column's buffers): the same tokens as
/// `tokens_from_strings`, without a Python string per key.
#[pyfunction]
fn tokens_from_utf8<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let offsets: Vec<i64> = vec_of(py, offsets, "offsets")?;
    let data: Vec<u8> = vec_of(py, data, "data")?;
    let mut t = Vec::with_capacity(offsets.len().saturating_sub(1));
    for w in offsets.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a < 0 || b < a || b as usize > data.len() {
            return Err(WorkloadError::new_err(format!(
                "offsets: [{a}, {b}) is not a range of the {} data bytes",
                data.len()
            )));
        }
        t.push(token_of_bytes(&data[a as usize..b as usize]));
    }
    Ok(bytes_of(py, &t))
}

/// N servers × slots, RF replicas on a token ring (evenly spaced, `vnodes` per server, or `ring`), one-way network
/// latency, M clients. `client_rtt_ns`: the client ↔ coordinator round trip's quantiles, ns, at the equally spaced
/// probabilities 0, 1/(n−1), …, 1 (n ≥ 2, non-decreasing): each request's reported latency is the engine's less
/// 2 · `net_latency_ns`, plus one draw of it. ParameterError naming `client_rtt_ns` when invalid. `client_key_ns`:
/// the per-partition client/coordinator cost, ns: each request's reported latency grows by (keys − 1) × it (0:
/// none; at most 1e12, ParameterError naming `client_key_ns` otherwise).
#[pyclass(module = "kvsim._kvsim", name = "Cluster", frozen)]
pub struct PyCluster {
    inner: Cluster,
}

#[pymethods]
impl PyCluster {
    #[new]
    #[pyo3(signature = (servers, slots, replication, vnodes, service_rate, net_latency_ns, clients, *, ring=None, client_rtt_ns=None, client_key_ns=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        servers: u32,
        slots: u32,
        replication: u32,
        vnodes: u32,
        service_rate: f64,
        net_latency_ns: u64,
        clients: u32,
        ring: Option<PyRef<'_, PyRing>>,
        client_rtt_ns: Option<Vec<u64>>,
        client_key_ns: u64,
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
        let inner = match ring {
            None => Cluster::new(cfg),
            Some(r) => Cluster::with_placement(cfg, r.placement.clone()),
        }
        .and_then(|c| c.with_client_rtt(client_rtt_ns.map(Into::into)))
        .and_then(|c| c.with_client_key(client_key_ns));
        Ok(PyCluster {
            inner: inner.map_err(to_py)?,
        })
    }

    /// Replica groups: the ring's token ranges.
    #[getter]
    fn groups(&self) -> usize {
        self.inner.groups()
    }

    /// Replica table (groups × RF, uint32, primary first) as bytes.
    fn replica_table<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes_of(py, self.inner.replica_table())
    }

    /// Replica group (uint32) of each token (int64 array).
    fn groups_of<'py>(
        &self,
        py: Python<'py>,
        tokens: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let t: Vec<i64> = vec_of(py, tokens, "tokens")?;
        let g: Vec<u32> = t.iter().map(|&x| self.inner.group_of(x)).collect();
        Ok(bytes_of(py, &g))
    }
}

/// The `#[pymethods]` block of a class holding a workload's shape: the methods given, plus the `requests`,
/// `opsets` and `ops` getters, read from `self.<field>` (the core's `WorkloadLayout` and `Workload` count them
/// alike). PyO3 takes one `#[pymethods]` block per class, so the getters come into it rather than in a block of
/// their own; `WorkloadLayout` and `Workload` declare them here only.
macro_rules! pymethods_with_counts {
    (counts of $field:ident; impl $class:ident { $($methods:tt)* }) => {
        #[pymethods]
        impl $class {
            $($methods)*

            /// Requests (multigets).
            #[getter]
            fn requests(&self) -> usize {
                self.$field.requests()
            }

            /// Opsets: a request's ops grouped by replica group.
            #[getter]
            fn opsets(&self) -> usize {
                self.$field.opsets()
            }

            /// Ops: one per key of a request (the tokens given).
            #[getter]
            fn ops(&self) -> usize {
                self.$field.ops()
            }
        }
    };
}

/// The seed-independent part of a workload on a cluster (requests grouped into opsets by replica group), built
/// once and shared by every seed's draws.
#[pyclass(module = "kvsim._kvsim", name = "WorkloadLayout", frozen)]
pub struct PyWorkloadLayout {
    cluster: Cluster,
    inner: WorkloadLayout,
}

const LAYOUT_COLUMNS: [&str; 7] = [
    "client",
    "req_opsets",
    "opset_group",
    "opset_req",
    "opset_ops",
    "op_input",
    "mean_demand",
];

pymethods_with_counts! {
    counts of inner;
    impl PyWorkloadLayout {
        /// Groups `offsets` (int64, requests+1) over `tokens` (int64 per op) into opsets on `cluster`; optional
        /// per-op mean demand (float64 s) and per-request clients (uint32).
        #[new]
        #[pyo3(signature = (cluster, offsets, tokens, *, mean_demand=None, clients=None))]
        fn new(
            py: Python<'_>,
            cluster: &PyCluster,
            offsets: &Bound<'_, PyAny>,
            tokens: &Bound<'_, PyAny>,
            mean_demand: Option<&Bound<'_, PyAny>>,
            clients: Option<&Bound<'_, PyAny>>,
        ) -> PyResult<Self> {
            let offs = offsets_of(py, offsets)?;
            let tokens: Vec<i64> = vec_of(py, tokens, "tokens")?;
            let means: Option<Vec<f64>> = mean_demand
                .map(|m| vec_of(py, m, "mean_demand"))
                .transpose()?;
            let clients: Option<Vec<u32>> = clients.map(|c| vec_of(py, c, "clients")).transpose()?;
            let c = cluster.inner.clone();
            let inner = py
                .detach(|| {
                    WorkloadLayout::build(&c, &offs, &tokens, means.as_deref(), clients.as_deref())
                })
                .map_err(to_py)?;
            Ok(PyWorkloadLayout { cluster: c, inner })
        }

        /// A layout over read-only, C-contiguous arrays (borrowed, not copied), named as `arrays()` names them.
        #[staticmethod]
        fn from_arrays(cluster: &PyCluster, arrays: &Bound<'_, PyDict>) -> PyResult<Self> {
            let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
                arrays
                    .get_item(k)?
                    .ok_or_else(|| WorkloadError::new_err(format!("layout array {k:?} is missing")))
            };
            let inner = WorkloadLayout {
                client: column_of(&get("client")?, "client")?,
                req_opsets: column_of(&get("req_opsets")?, "req_opsets")?,
                opset_group: column_of(&get("opset_group")?, "opset_group")?,
                opset_req: column_of(&get("opset_req")?, "opset_req")?,
                opset_ops: column_of(&get("opset_ops")?, "opset_ops")?,
                op_input: column_of(&get("op_input")?, "op_input")?,
                mean_demand: column_of(&get("mean_demand")?, "mean_demand")?,
            };
            if inner.req_opsets.is_empty() || inner.opset_ops.is_empty() {
                return Err(WorkloadError::new_err("layout arrays are empty"));
            }
            let probe = Workload::assemble(
                &inner,
                &Draws {
                    arrival: vec![0; inner.requests()].into(),
                    demand: vec![0; inner.ops()].into(),
                },
            );
            probe.validate(&cluster.inner).map_err(to_py)?;
            Ok(PyWorkloadLayout {
                cluster: cluster.inner.clone(),
                inner,
            })
        }

        /// Bytes of the arrays as stored.
        #[getter]
        fn nbytes(&self) -> usize {
            self.inner.stored_bytes()
        }

        /// The layout's arrays as bytes (client, req_opsets, opset_group, opset_req, opset_ops, op_input u32;
        /// mean_demand f32, empty without per-op means).
        fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
            let d = PyDict::new(py);
            let l = &self.inner;
            let cols: [&[u32]; 6] = [
                &l.client,
                &l.req_opsets,
                &l.opset_group,
                &l.opset_req,
                &l.opset_ops,
                &l.op_input,
            ];
            for (k, v) in LAYOUT_COLUMNS.iter().zip(cols) {
                d.set_item(k, bytes_of(py, v))?;
            }
            d.set_item("mean_demand", bytes_of(py, &l.mean_demand))?;
            Ok(d)
        }
    }
}

/// A layout and one seed's draws (arrivals, demands): what a replay reads, replayed under many configs.
#[pyclass(module = "kvsim._kvsim", name = "Workload", frozen)]
pub struct PyWorkload {
    pub(crate) cluster: Cluster,
    /// The views of `layout` and `draws` a replay reads ([`PyWorkload::of`]).
    pub(crate) inner: Workload,
    layout: WorkloadLayout,
    draws: Draws,
}

impl PyWorkload {
    /// The workload of `layout` and `draws` on `cluster`.
    fn of(cluster: Cluster, layout: WorkloadLayout, draws: Draws) -> Self {
        PyWorkload {
            cluster,
            inner: Workload::assemble(&layout, &draws),
            layout,
            draws,
        }
    }
}

pymethods_with_counts! {
    counts of inner;
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
            let dist =
                kvsim_core::demand::DemandDist::from_name(demand_dist, demand_sigma).map_err(to_py)?;
            let offs = offsets_of(py, offsets)?;
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
                req_offsets: offs,
                tokens: vec_of(py, tokens, "tokens")?,
                mean_demand: mean_demand
                    .map(|m| vec_of(py, m, "mean_demand"))
                    .transpose()?,
                clients: clients.map(|c| vec_of(py, c, "clients")).transpose()?,
                arrivals,
                seed,
            };
            let c = cluster.inner.clone();
            let (layout, draws) = py
                .detach(|| {
                    let means = spec.mean_demand.as_deref();
                    let layout = WorkloadLayout::build(
                        &c,
                        &spec.req_offsets,
                        &spec.tokens,
                        means,
                        spec.clients.as_deref(),
                    )?;
                    let draws = Draws::draw(&c, &layout, means, &spec.arrivals, spec.seed, dist)?;
                    Ok((layout, draws))
                })
                .map_err(to_py)?;
            Ok(PyWorkload::of(c, layout, draws))
        }

        /// `seed`'s draws over `layout` (exactly what the constructor materializes from the same inputs); the
        /// layout's arrays are shared, not copied. `mean_demand` (float64 s per op) and `timestamps` as given to
        /// the layout and the constructor.
        #[staticmethod]
        #[pyo3(signature = (layout, *, mean_demand=None, timestamps=None, load=None, seed=0, demand_dist="exponential", demand_sigma=1.0))]
        #[allow(clippy::too_many_arguments)]
        fn draw(
            py: Python<'_>,
            layout: &PyWorkloadLayout,
            mean_demand: Option<&Bound<'_, PyAny>>,
            timestamps: Option<&Bound<'_, PyAny>>,
            load: Option<f64>,
            seed: u64,
            demand_dist: &str,
            demand_sigma: f64,
        ) -> PyResult<Self> {
            let dist =
                kvsim_core::demand::DemandDist::from_name(demand_dist, demand_sigma).map_err(to_py)?;
            let means: Option<Column<f64>> = mean_demand
                .map(|m| column_or_copy(py, m, "mean_demand"))
                .transpose()?;
            let arrivals = arrivals_of(py, timestamps, layout.inner.requests(), load)?;
            let (c, l) = (&layout.cluster, &layout.inner);
            let draws = py
                .detach(|| Draws::draw(c, l, means.as_deref(), &arrivals, seed, dist))
                .map_err(to_py)?;
            Ok(PyWorkload::of(c.clone(), l.clone(), draws))
        }

        /// A workload over `layout` and given draws (read-only uint64 arrays, borrowed, not copied).
        #[staticmethod]
        fn from_arrays(
            layout: &PyWorkloadLayout,
            arrival: &Bound<'_, PyAny>,
            demand: &Bound<'_, PyAny>,
        ) -> PyResult<Self> {
            let draws = Draws {
                arrival: column_of(arrival, "arrival")?,
                demand: column_of(demand, "demand")?,
            };
            let wl = PyWorkload::of(layout.cluster.clone(), layout.inner.clone(), draws);
            wl.inner.validate(&wl.cluster).map_err(to_py)?;
            let (w, l) = (&wl.inner, &wl.layout);
            if w.arrival.len() != l.requests() || w.demand.len() != l.ops() {
                return Err(WorkloadError::new_err(
                    "draws do not match the layout (requests, ops)",
                ));
            }
            Ok(wl)
        }

        /// The workload of the first `n` requests: views of this one's layout and demands, arrivals made again
        /// (the rate that offers `load` depends on the mean demand of the requests replayed). Inputs as `draw`'s.
        #[pyo3(signature = (n, *, mean_demand=None, timestamps=None, load=None, seed=0))]
        fn prefix(
            &self,
            py: Python<'_>,
            n: usize,
            mean_demand: Option<&Bound<'_, PyAny>>,
            timestamps: Option<&Bound<'_, PyAny>>,
            load: Option<f64>,
            seed: u64,
        ) -> PyResult<Self> {
            let layout = self.layout.prefix(n).map_err(to_py)?;
            let means: Option<Column<f64>> = mean_demand
                .map(|m| column_or_copy(py, m, "mean_demand"))
                .transpose()?;
            let arrivals = arrivals_of(py, timestamps, n, load)?;
            let c = &self.cluster;
            let draws = self
                .draws
                .prefix(c, &layout, means.as_deref(), &arrivals, seed)
                .map_err(to_py)?;
            Ok(PyWorkload::of(c.clone(), layout, draws))
        }

        /// Bytes of the arrays as stored (layout + draws; shared arrays counted once per workload).
        #[getter]
        fn nbytes(&self) -> usize {
            self.layout.stored_bytes() + self.draws.stored_bytes()
        }

        /// The materialized arrays as bytes (their dtypes: `WorkloadArrays`).
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
    }
}

/// The native side of `kvsim.ReplayConfig`: read by attribute from the Python package's `_NativeConfig`. Flags
/// are uint8 per input op (the order of the workload's `tokens`).
#[derive(FromPyObject)]
pub(crate) struct NativeConfig<'py> {
    policy: String,
    params: Vec<(String, f64)>,
    replica: String,
    replica_params: Vec<(String, f64)>,
    large_est: Option<Bound<'py, PyAny>>,
    large_true: Option<Bound<'py, PyAny>>,
    server_speeds: Option<Bound<'py, PyAny>>,
    /// (interval ns, fraction, factor, duration ns)
    slowdown: Option<(u64, f64, f64, u64)>,
    /// (stalls per s per server, stall duration ns)
    stalls: Option<(f64, u64)>,
    /// [(server, start ns, end ns)]: stalls on an explicit schedule (not with `stalls`)
    stall_schedule: Option<Vec<(usize, u64, u64)>>,
    writes: Option<Bound<'py, PyAny>>,
    /// (threads, mean think time ns, think-time distribution)
    closed: Option<(u32, u64, String)>,
    warmup: f64,
    record_ops: bool,
    size_aware_cost: bool,
    seed: u64,
    /// (quantile, bound ns): stop once that quantile is certainly above the bound
    stop: Option<(f64, u64)>,
    /// sample counts per bucket of Cassandra's microsecond histogram every coordinator's histogram holds at time 0
    latency_history: Option<Vec<u64>>,
}

/// Per-op flags in workload order from uint8 flags in input order.
fn per_workload_op(
    py: Python<'_>,
    wl: &Workload,
    flags: Option<&Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<Vec<bool>> {
    let Some(f) = flags else {
        return Ok(Vec::new());
    };
    let f: Vec<u8> = vec_of(py, f, what)?;
    if f.len() != wl.ops() {
        return Err(WorkloadError::new_err(format!(
            "{what} has {} flags for {} ops",
            f.len(),
            wl.ops()
        )));
    }
    Ok(wl.op_input.iter().map(|&i| f[i as usize] != 0).collect())
}

/// The server model of per-server speeds, an optional slowdown (interval ns, fraction, factor, duration ns),
/// random stalls (per s per server, duration ns) or a stall schedule ([(server, start ns, end ns)]).
pub(crate) fn server_model(
    py: Python<'_>,
    speeds: Option<&Bound<'_, PyAny>>,
    slowdown: Option<(u64, f64, f64, u64)>,
    stalls: Option<(f64, u64)>,
    stall_schedule: Option<&[(usize, u64, u64)]>,
) -> PyResult<ServerModelConfig> {
    Ok(ServerModelConfig {
        speeds: speeds
            .map(|a| vec_of::<f64>(py, a, "server_speeds"))
            .transpose()?
            .unwrap_or_default(),
        slowdown: slowdown.map(|(interval_ns, fraction, factor, duration_ns)| Slowdown {
            interval_ns,
            fraction,
            factor,
            duration_ns,
        }),
        stalls: stalls.map(|(rate_per_s, duration_ns)| Stalls {
            rate_per_s,
            duration_ns,
        }),
        stall_schedule: stall_schedule.map(|v| {
            StallSchedule::new(
                v.iter()
                    .map(|&(server, start_ns, end_ns)| StallInterval {
                        server,
                        start_ns,
                        end_ns,
                    })
                    .collect(),
            )
        }),
    })
}

impl NativeConfig<'_> {
    fn to_core(&self, py: Python<'_>, wl: &Workload) -> PyResult<ReplayConfig> {
        let client = match &self.closed {
            None => ClientModel::Open,
            Some((threads, think_ns, dist)) => ClientModel::Closed(ClosedLoop {
                threads: *threads,
                think_ns: *think_ns,
                think: ThinkDist::from_name(dist).map_err(to_py)?,
            }),
        };
        // Each parameter goes to the policy when it has it, else to the coordinator section.
        let (policy, coordinator) = build_policy(&self.policy, &self.params).map_err(to_py)?;
        Ok(ReplayConfig {
            policy,
            coordinator,
            selector: SelectorConfig::build(&self.replica, &self.replica_params).map_err(to_py)?,
            sizes: SizeClasses {
                large_est: per_workload_op(py, wl, self.large_est.as_ref(), "large_est")?,
                large_true: per_workload_op(py, wl, self.large_true.as_ref(), "large_true")?,
            },
            servers: server_model(
                py,
                self.server_speeds.as_ref(),
                self.slowdown,
                self.stalls,
                self.stall_schedule.as_deref(),
            )?,
            writes: per_workload_op(py, wl, self.writes.as_ref(), "writes")?,
            client,
            warmup: self.warmup,
            record_ops: self.record_ops,
            size_aware_cost: self.size_aware_cost,
            seed: self.seed,
            stop: self
                .stop
                .map(|(quantile, above_ns)| StopRule { quantile, above_ns }),
            latency_history: self.latency_history.clone().unwrap_or_default(),
        })
    }
}

/// Replays `workload` as `config` says (GIL released); returns the result as a dict (`RawResult`).
#[pyfunction(name = "replay")]
fn replay_native<'py>(
    py: Python<'py>,
    workload: &PyWorkload,
    config: NativeConfig<'py>,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg = config.to_core(py, &workload.inner)?;
    let (cluster, wl) = (&workload.cluster, &workload.inner);
    let res = py.detach(|| replay(cluster, wl, &cfg)).map_err(to_py)?;
    result_dict(py, &res)
}

/// The replay result as the dict `kvsim.Result` is made from.
fn result_dict<'py>(py: Python<'py>, res: &kvsim_core::RunResult) -> PyResult<Bound<'py, PyDict>> {
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
        d.set_item("replica", res.selector)?;
        d.set_item("replica_params", res.selector_params.clone())?;
        let h = PyDict::new(py);
        h.set_item("opsets", res.held.opsets)?;
        h.set_item("max", res.held.max)?;
        h.set_item("mean_ms", res.held.mean_ms)?;
        h.set_item("at_half", res.held.at_half)?;
        h.set_item("at_end", res.held.at_end)?;
        h.set_item("unstable", res.held.unstable)?;
        d.set_item("held", h)?;
        let c = PyDict::new(py);
        c.set_item("ops", res.copies.ops)?;
        c.set_item("wins", res.copies.wins)?;
        d.set_item("copies", c)?;
        let w = PyDict::new(py);
        w.set_item("ops", res.writes.ops)?;
        w.set_item("copies", res.writes.copies)?;
        d.set_item("writes", w)?;
        let t = PyDict::new(py);
        t.set_item("on", res.timeouts.on)?;
        t.set_item("requests", res.timeouts.requests)?;
        t.set_item("dropped_reads", res.timeouts.dropped_reads)?;
        d.set_item("timeouts", t)?;
        d.set_item("served_ops", res.served_ops)?;
        d.set_item("makespan_ns", res.makespan_ns)?;
        d.set_item("capacity_factor", res.capacity_factor)?;
        d.set_item("stopped", res.stopped)?;
        d.set_item("arrival_ns", bytes_of(py, &res.arrival_ns))?;
        Ok(d)
    }
}

/// Registers the replay API on the extension module.
pub fn register_replay(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCluster>()?;
    m.add_class::<PyWorkload>()?;
    m.add_class::<PyWorkloadLayout>()?;
    m.add_function(wrap_pyfunction!(tokens_from_ids, m)?)?;
    m.add_function(wrap_pyfunction!(tokens_from_strings, m)?)?;
    m.add_function(wrap_pyfunction!(tokens_from_utf8, m)?)?;
    m.add_function(wrap_pyfunction!(replay_native, m)?)?;
    m.add_class::<PyRing>()?;
    Ok(())
}
