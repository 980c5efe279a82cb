//! The workload, materialized from a seed BEFORE the replay: arrival times, opsets (ops grouped by replica
//! group) and per-op service demand as data. The engine is then a deterministic function of
//! (workload, cluster, policy): two policies replayed on one `Workload` see the same requests and demands.
//!
//! A workload is two parts. The [`WorkloadLayout`] (requests → opsets → ops, the client of each request, each
//! op's mean demand) depends on the trace and the cluster only: it is built once and shared by every seed. The
//! [`Draws`] (arrival times, per-op demands) are what a seed draws. Every array is a [`Column`]: owned, or
//! borrowed from memory someone else keeps alive (a file mapped by several processes), so a layout and a
//! seed's draws can be held once per host and a prefix workload is a view of the whole one.
use std::any::Any;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::cluster::Cluster;
use crate::error::{check_range, SimError};
use crate::rng::Rng;

/// How request arrival times are made.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrivals {
    /// Poisson arrivals at `load` × total service capacity.
    Poisson { load: f64 },
    /// The trace's own timestamps (seconds, one per request, non-decreasing), shifted to start at 0 and, when
    /// `load` is given, scaled so that the mean rate offers that fraction of the service capacity.
    Trace { ts: Vec<f64>, load: Option<f64> },
}

/// Inputs of materialization: requests as CSR offsets over ops, one ring token per op.
#[derive(Debug, Clone)]
pub struct WorkloadSpec {
    /// len = requests + 1, offsets into `tokens`; every request has ≥ 1 op.
    pub req_offsets: Vec<u64>,
    /// Murmur3 token of each op's key.
    pub tokens: Vec<i64>,
    /// Per-op mean service demand, seconds; `None` = 1/service_rate for every op.
    pub mean_demand: Option<Vec<f64>>,
    /// Client of each request; `None` = request index mod clients.
    pub clients: Option<Vec<u32>>,
    pub arrivals: Arrivals,
    pub seed: u64,
}

/// A read-only array: owned, or borrowed from memory an `owner` keeps alive and unchanged (a memory-mapped
/// file, a Python buffer). Cloning shares the memory; [`Column::prefix`] is a view of the first elements.
pub struct Column<T: 'static> {
    ptr: *const T,
    len: usize,
    owner: Arc<dyn Any + Send + Sync>,
}

// SAFETY: a column only reads its elements; the owner keeps them alive and unchanged (see `Column::borrowed`).
unsafe impl<T: Sync> Send for Column<T> {}
unsafe impl<T: Sync> Sync for Column<T> {}

impl<T: Send + Sync + 'static> Column<T> {
    /// A column over `len` elements at `ptr`.
    ///
    /// # Safety
    /// `ptr` must point to `len` initialized, aligned elements that stay valid and unchanged for as long as
    /// `owner` lives (the column holds `owner`).
    pub unsafe fn borrowed(ptr: *const T, len: usize, owner: Arc<dyn Any + Send + Sync>) -> Column<T> {
        Column {
            ptr: if len == 0 { std::ptr::NonNull::dangling().as_ptr() } else { ptr },
            len,
            owner,
        }
    }

    /// The first `n` elements (shares the memory).
    pub fn prefix(&self, n: usize) -> Column<T> {
        assert!(n <= self.len, "prefix of {n} elements of a column of {}", self.len);
        Column {
            ptr: self.ptr,
            len: n,
            owner: Arc::clone(&self.owner),
        }
    }
}

impl<T: Send + Sync + 'static> From<Vec<T>> for Column<T> {
    fn from(v: Vec<T>) -> Column<T> {
        let owner = Arc::new(v);
        let (ptr, len) = (owner.as_ptr(), owner.len());
        Column { ptr, len, owner }
    }
}

impl<T: 'static> Deref for Column<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: see `Column::borrowed`; owned columns point into the `Vec` their owner holds.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: 'static> Clone for Column<T> {
    fn clone(&self) -> Column<T> {
        Column {
            ptr: self.ptr,
            len: self.len,
            owner: Arc::clone(&self.owner),
        }
    }
}

impl<T: Send + Sync + 'static> Default for Column<T> {
    fn default() -> Column<T> {
        Column::from(Vec::new())
    }
}

impl<T: fmt::Debug + 'static> fmt::Debug for Column<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The seed-independent part of a workload on one cluster: requests in input order, each request's ops grouped
/// by replica group into contiguous opsets, the client of each request, each op's mean demand.
#[derive(Debug, Clone, Default)]
pub struct WorkloadLayout {
    pub client: Column<u32>,
    /// len = requests + 1: offsets into the opset arrays.
    pub req_opsets: Column<u32>,
    /// Replica group of each opset.
    pub opset_group: Column<u32>,
    /// Request of each opset.
    pub opset_req: Column<u32>,
    /// len = opsets + 1: offsets into the op arrays.
    pub opset_ops: Column<u32>,
    /// Index of the op in the input (`WorkloadSpec::tokens`), for per-op records.
    pub op_input: Column<u32>,
    /// Mean demand of each op, ns (what a size-aware client may know); empty = 1/service_rate for every op.
    pub mean_demand: Column<f32>,
}

/// What one seed draws over a layout: arrival times (ns, per request) and service demands (ns, per op in
/// layout order).
#[derive(Debug, Clone, Default)]
pub struct Draws {
    pub arrival: Column<u64>,
    pub demand: Column<u64>,
}

/// A materialized workload. Requests are in arrival order; ops of a request are sorted by replica group so that
/// each opset is a contiguous run of ops.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    /// Arrival time at the client, ns (non-decreasing).
    pub arrival: Column<u64>,
    pub client: Column<u32>,
    /// len = requests + 1: offsets into the opset arrays.
    pub req_opsets: Column<u32>,
    /// Replica group of each opset.
    pub opset_group: Column<u32>,
    /// Request of each opset.
    pub opset_req: Column<u32>,
    /// len = opsets + 1: offsets into the op arrays.
    pub opset_ops: Column<u32>,
    /// Service demand of each op, ns.
    pub demand: Column<u64>,
    /// Index of the op in the input (`WorkloadSpec::tokens`), for per-op records.
    pub op_input: Column<u32>,
    /// Mean demand of each op, ns (what a size-aware client may know); empty = 1/service_rate for every op.
    pub mean_demand: Column<f32>,
}

/// A hand-built request: (arrival ns, [(replica group, [op demand ns, ...]), ...]).
pub type RequestParts = (u64, Vec<(u32, Vec<u64>)>);

const STREAM_DEMAND: u64 = 1;
const STREAM_ARRIVAL: u64 = 2;

impl WorkloadLayout {
    pub fn requests(&self) -> usize {
        self.req_opsets.len().saturating_sub(1)
    }
    pub fn opsets(&self) -> usize {
        self.opset_group.len()
    }
    pub fn ops(&self) -> usize {
        self.op_input.len()
    }

    /// Bytes of the arrays as stored.
    pub fn stored_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.client)
            + std::mem::size_of_val(&*self.req_opsets)
            + std::mem::size_of_val(&*self.opset_group)
            + std::mem::size_of_val(&*self.opset_req)
            + std::mem::size_of_val(&*self.opset_ops)
            + std::mem::size_of_val(&*self.op_input)
            + std::mem::size_of_val(&*self.mean_demand)
    }

    /// Groups the requests of `req_offsets` (CSR over `tokens`) into opsets on `cluster`. `mean_demand`
    /// (seconds per op) and `clients` (per request) as in [`WorkloadSpec`].
    pub fn build(
        cluster: &Cluster,
        req_offsets: &[u64],
        tokens: &[i64],
        mean_demand: Option<&[f64]>,
        clients: Option<&[u32]>,
    ) -> Result<WorkloadLayout, SimError> {
        let cfg = &cluster.config;
        let n_req = req_offsets.len().saturating_sub(1);
        if n_req == 0 {
            return Err(SimError::BadInput("the workload has no requests".into()));
        }
        let n_ops = tokens.len();
        if req_offsets[0] != 0 || req_offsets[n_req] as usize != n_ops {
            return Err(SimError::BadInput(format!(
                "request offsets must start at 0 and end at the number of ops ({n_ops})"
            )));
        }
        if n_ops >= u32::MAX as usize {
            return Err(SimError::BadInput("more than 2^32-1 ops".into()));
        }
        for r in 0..n_req {
            if req_offsets[r + 1] <= req_offsets[r] {
                return Err(SimError::BadInput(format!(
                    "request {r} has no ops (offsets must increase)"
                )));
            }
        }
        if let Some(m) = mean_demand {
            if m.len() != n_ops {
                return Err(SimError::BadInput(format!(
                    "mean_demand has {} values for {n_ops} ops",
                    m.len()
                )));
            }
            if let Some(i) = m.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(SimError::BadInput(format!(
                    "mean_demand[{i}] = {} is not a finite value ≥ 0",
                    m[i]
                )));
            }
        }
        if let Some(c) = clients {
            if c.len() != n_req {
                return Err(SimError::BadInput(format!(
                    "clients has {} values for {n_req} requests",
                    c.len()
                )));
            }
        }
        let client: Vec<u32> = (0..n_req)
            .map(|r| clients.map_or((r % cfg.clients as usize) as u32, |c| c[r]))
            .collect();
        let mut req_opsets = Vec::with_capacity(n_req + 1);
        let mut opset_group = Vec::new();
        let mut opset_req = Vec::new();
        let mut opset_ops = Vec::new();
        let mut op_input = Vec::with_capacity(n_ops);
        let mut mean = Vec::new();
        let mut scratch: Vec<(u32, u32)> = Vec::new();
        req_opsets.push(0);
        for r in 0..n_req {
            scratch.clear();
            let (a, b) = (req_offsets[r] as usize, req_offsets[r + 1] as usize);
            for (i, &t) in tokens[a..b].iter().enumerate() {
                scratch.push((cluster.group_of(t), (a + i) as u32));
            }
            scratch.sort_unstable();
            let mut prev = u32::MAX;
            for &(g, i) in &scratch {
                if g != prev {
                    opset_group.push(g);
                    opset_req.push(r as u32);
                    opset_ops.push(op_input.len() as u32);
                    prev = g;
                }
                op_input.push(i);
                if let Some(m) = mean_demand {
                    mean.push((m[i as usize] * 1e9) as f32);
                }
            }
            req_opsets.push(opset_group.len() as u32);
        }
        opset_ops.push(op_input.len() as u32);
        Ok(WorkloadLayout {
            client: client.into(),
            req_opsets: req_opsets.into(),
            opset_group: opset_group.into(),
            opset_req: opset_req.into(),
            opset_ops: opset_ops.into(),
            op_input: op_input.into(),
            mean_demand: mean.into(),
        })
    }

    /// The layout of the first `n` requests (views of this one's arrays).
    pub fn prefix(&self, n: usize) -> Result<WorkloadLayout, SimError> {
        if n == 0 || n > self.requests() {
            return Err(SimError::BadInput(format!(
                "a prefix of {n} requests of a workload of {}",
                self.requests()
            )));
        }
        let opsets = self.req_opsets[n] as usize;
        let ops = self.opset_ops[opsets] as usize;
        Ok(WorkloadLayout {
            client: self.client.prefix(n),
            req_opsets: self.req_opsets.prefix(n + 1),
            opset_group: self.opset_group.prefix(opsets),
            opset_req: self.opset_req.prefix(opsets),
            opset_ops: self.opset_ops.prefix(opsets + 1),
            op_input: self.op_input.prefix(ops),
            mean_demand: if self.mean_demand.is_empty() {
                self.mean_demand.clone()
            } else {
                self.mean_demand.prefix(ops)
            },
        })
    }
}

impl Draws {
    /// Bytes of the arrays as stored.
    pub fn stored_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.arrival) + std::mem::size_of_val(&*self.demand)
    }

    /// Draws `seed`'s demands (from `dist` around each op's mean, `mean_demand` in input order, None =
    /// 1/service_rate) and arrivals for `layout`, from independent random streams of the seed.
    pub fn draw(
        cluster: &Cluster,
        layout: &WorkloadLayout,
        mean_demand: Option<&[f64]>,
        arrivals: &Arrivals,
        seed: u64,
        dist: crate::demand::DemandDist,
    ) -> Result<Draws, SimError> {
        let n_ops = layout.ops();
        check_means(mean_demand, n_ops)?;
        // Demands in input order (so they stay tied to the op whatever the grouping).
        let default_mean = 1.0 / cluster.config.service_rate;
        let mut rng = Rng::new(seed, STREAM_DEMAND);
        let mut demand_in = Vec::with_capacity(n_ops);
        let mut total_mean = 0.0;
        for i in 0..n_ops {
            let mean = mean_demand.map_or(default_mean, |m| m[i]);
            total_mean += mean;
            demand_in.push((dist.sample(&mut rng, mean) * 1e9).round() as u64);
        }
        let arrival = make_arrivals(cluster, arrivals, seed, layout.requests(), total_mean)?;
        let demand: Vec<u64> = layout.op_input.iter().map(|&i| demand_in[i as usize]).collect();
        Ok(Draws {
            arrival: arrival.into(),
            demand: demand.into(),
        })
    }

    /// The draws of the first requests of `layout` (a prefix of the layout these draws were made for): the
    /// demands are a view of these; the arrivals are made again, since the rate that offers the load depends on
    /// the mean demand of the requests replayed.
    pub fn prefix(
        &self,
        cluster: &Cluster,
        layout: &WorkloadLayout,
        mean_demand: Option<&[f64]>,
        arrivals: &Arrivals,
        seed: u64,
    ) -> Result<Draws, SimError> {
        let n_ops = layout.ops();
        if n_ops > self.demand.len() {
            return Err(SimError::BadInput(format!(
                "a prefix of {n_ops} ops of draws over {}",
                self.demand.len()
            )));
        }
        check_means(mean_demand, n_ops)?;
        let default_mean = 1.0 / cluster.config.service_rate;
        let mut total_mean = 0.0;
        for i in 0..n_ops {
            total_mean += mean_demand.map_or(default_mean, |m| m[i]);
        }
        let arrival = make_arrivals(cluster, arrivals, seed, layout.requests(), total_mean)?;
        Ok(Draws {
            arrival: arrival.into(),
            demand: self.demand.prefix(n_ops),
        })
    }
}

/// `mean_demand` (input order) covers at least the first `n_ops` ops.
fn check_means(mean_demand: Option<&[f64]>, n_ops: usize) -> Result<(), SimError> {
    match mean_demand {
        Some(m) if m.len() < n_ops => Err(SimError::BadInput(format!(
            "mean_demand has {} values for {n_ops} ops",
            m.len()
        ))),
        _ => Ok(()),
    }
}

impl Workload {
    pub fn requests(&self) -> usize {
        self.arrival.len()
    }
    pub fn opsets(&self) -> usize {
        self.opset_group.len()
    }
    pub fn ops(&self) -> usize {
        self.demand.len()
    }

    /// The replay's working set in the simulator's canonical column widths (u64 times, u32 indices, f32 mean
    /// demands), whether the columns are owned or shared: the figure `bytes_per_op` reports.
    pub fn bytes(&self) -> usize {
        self.arrival.len() * 8
            + self.client.len() * 4
            + self.req_opsets.len() * 4
            + self.opset_group.len() * 4
            + self.opset_req.len() * 4
            + self.opset_ops.len() * 4
            + self.demand.len() * 8
            + self.op_input.len() * 4
            + self.mean_demand.len() * 4
    }

    /// The workload of `layout` and one seed's `draws` (shares their arrays).
    pub fn assemble(layout: &WorkloadLayout, draws: &Draws) -> Workload {
        Workload {
            arrival: draws.arrival.clone(),
            client: layout.client.clone(),
            req_opsets: layout.req_opsets.clone(),
            opset_group: layout.opset_group.clone(),
            opset_req: layout.opset_req.clone(),
            opset_ops: layout.opset_ops.clone(),
            demand: draws.demand.clone(),
            op_input: layout.op_input.clone(),
            mean_demand: layout.mean_demand.clone(),
        }
    }

    /// Materializes `spec` for `cluster`: demands (exponential around each op's mean) and arrivals from
    /// independent random streams of `spec.seed`.
    pub fn materialize(cluster: &Cluster, spec: &WorkloadSpec) -> Result<Workload, SimError> {
        Workload::materialize_with(cluster, spec, crate::demand::DemandDist::Exponential)
    }

    /// As [`Workload::materialize`], drawing each op's demand from `dist` around its mean
    /// (exponential gives exactly `materialize`): the layout, then the seed's draws.
    pub fn materialize_with(
        cluster: &Cluster,
        spec: &WorkloadSpec,
        dist: crate::demand::DemandDist,
    ) -> Result<Workload, SimError> {
        let means = spec.mean_demand.as_deref();
        let layout = WorkloadLayout::build(
            cluster,
            &spec.req_offsets,
            &spec.tokens,
            means,
            spec.clients.as_deref(),
        )?;
        let draws = Draws::draw(cluster, &layout, means, &spec.arrivals, spec.seed, dist)?;
        Ok(Workload::assemble(&layout, &draws))
    }

    /// Builds a workload directly from already materialized parts (hand-worked cases, the Python reference).
    /// `requests[r] = (arrival_ns, [(group, [demand_ns, ...]), ...])`, opsets in the given order. Each op's mean
    /// demand is set to its demand (a clairvoyant size-aware client).
    pub fn from_parts(requests: &[RequestParts], clients: u32) -> Workload {
        let (mut arrival, mut client, mut req_opsets) = (Vec::new(), Vec::new(), vec![0]);
        let (mut opset_group, mut opset_req, mut opset_ops) = (Vec::new(), Vec::new(), Vec::new());
        let (mut demand, mut op_input, mut mean_demand) = (Vec::new(), Vec::new(), Vec::new());
        for (r, (t, opsets)) in requests.iter().enumerate() {
            arrival.push(*t);
            client.push((r % clients.max(1) as usize) as u32);
            for (g, ds) in opsets {
                opset_group.push(*g);
                opset_req.push(r as u32);
                opset_ops.push(demand.len() as u32);
                for d in ds {
                    op_input.push(demand.len() as u32);
                    demand.push(*d);
                    mean_demand.push(*d as f32);
                }
            }
            req_opsets.push(opset_group.len() as u32);
        }
        opset_ops.push(demand.len() as u32);
        Workload {
            arrival: arrival.into(),
            client: client.into(),
            req_opsets: req_opsets.into(),
            opset_group: opset_group.into(),
            opset_req: opset_req.into(),
            opset_ops: opset_ops.into(),
            demand: demand.into(),
            op_input: op_input.into(),
            mean_demand: mean_demand.into(),
        }
    }

    /// Checks internal consistency against a cluster (used for workloads built from parts).
    pub fn validate(&self, cluster: &Cluster) -> Result<(), SimError> {
        let n = self.arrival.len();
        if n == 0 {
            return Err(SimError::BadInput("the workload has no requests".into()));
        }
        if self.client.len() != n || self.req_opsets.len() != n + 1 {
            return Err(SimError::BadInput(
                "request arrays have inconsistent lengths".into(),
            ));
        }
        if self.arrival.windows(2).any(|w| w[1] < w[0]) {
            return Err(SimError::BadInput(
                "arrival times must be non-decreasing".into(),
            ));
        }
        let o = self.opset_group.len();
        if self.opset_req.len() != o
            || self.opset_ops.len() != o + 1
            || self.req_opsets[n] as usize != o
        {
            return Err(SimError::BadInput(
                "opset arrays have inconsistent lengths".into(),
            ));
        }
        if self.opset_ops[o] as usize != self.demand.len()
            || self.op_input.len() != self.demand.len()
            || !(self.mean_demand.is_empty() || self.mean_demand.len() == self.demand.len())
        {
            return Err(SimError::BadInput(
                "op arrays have inconsistent lengths".into(),
            ));
        }
        if self.req_opsets.windows(2).any(|w| w[1] <= w[0])
            || self.opset_ops.windows(2).any(|w| w[1] <= w[0])
        {
            return Err(SimError::BadInput(
                "every request needs ≥ 1 opset and every opset ≥ 1 op".into(),
            ));
        }
        if self
            .opset_group
            .iter()
            .any(|&g| g as usize >= cluster.groups())
        {
            return Err(SimError::BadInput(format!(
                "replica group out of range (cluster has {})",
                cluster.groups()
            )));
        }
        if self.client.iter().any(|&c| c >= cluster.config.clients) {
            return Err(SimError::BadInput("client id ≥ clients".into()));
        }
        Ok(())
    }
}

fn make_arrivals(
    cluster: &Cluster,
    arrivals: &Arrivals,
    seed: u64,
    n_req: usize,
    total_mean: f64,
) -> Result<Vec<u64>, SimError> {
    let slots_total = cluster.config.servers as f64 * cluster.config.slots as f64;
    // Request rate that offers `load` × capacity: λ · E[work per request] = load · (servers × slots).
    let rate_for = |load: f64| load * slots_total / (total_mean / n_req as f64);
    match arrivals {
        Arrivals::Poisson { load } => {
            check_range(
                "load",
                *load,
                1e-6,
                100.0,
                "(0, 100] (fraction of total service capacity)",
            )?;
            if total_mean <= 0.0 {
                return Err(SimError::BadInput(
                    "total mean demand is 0: load cannot be defined".into(),
                ));
            }
            let lambda = rate_for(*load);
            let mut rng = Rng::new(seed, STREAM_ARRIVAL);
            let mut t = 0.0f64;
            let mut out = Vec::with_capacity(n_req);
            for _ in 0..n_req {
                t += rng.exp(1.0 / lambda);
                out.push((t * 1e9).round() as u64);
            }
            Ok(out)
        }
        Arrivals::Trace { ts, load } => {
            if ts.len() != n_req {
                return Err(SimError::BadInput(format!(
                    "{} timestamps for {n_req} requests",
                    ts.len()
                )));
            }
            if let Some(i) = ts.iter().position(|v| !v.is_finite()) {
                return Err(SimError::BadInput(format!(
                    "timestamp of request {i} is not finite"
                )));
            }
            if let Some(i) = ts.windows(2).position(|w| w[1] < w[0]) {
                return Err(SimError::BadInput(format!(
                    "timestamps must be non-decreasing (request {})",
                    i + 1
                )));
            }
            let t0 = ts[0];
            let span = ts[n_req - 1] - t0;
            let scale = match load {
                None => 1.0,
                Some(l) => {
                    check_range(
                        "load",
                        *l,
                        1e-6,
                        100.0,
                        "(0, 100] (fraction of total service capacity)",
                    )?;
                    if span <= 0.0 || n_req < 2 {
                        return Err(SimError::BadInput(
                            "trace timestamps span no time: cannot scale to a load".into(),
                        ));
                    }
                    // natural rate (n-1)/span → target rate: multiply times by natural/target.
                    ((n_req - 1) as f64 / span) / rate_for(*l)
                }
            };
            Ok(ts
                .iter()
                .map(|&t| ((t - t0) * scale * 1e9).round() as u64)
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterConfig;

    fn cluster() -> Cluster {
        Cluster::new(ClusterConfig {
            servers: 8,
            slots: 2,
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn opsets_group_ops_by_replica_group_and_keep_demand_with_its_op() {
        let c = cluster();
        let tokens: Vec<i64> = (0..40u64).map(crate::hash::token_of_u64).collect();
        let spec = WorkloadSpec {
            req_offsets: vec![0, 10, 11, 40],
            tokens: tokens.clone(),
            mean_demand: None,
            clients: None,
            arrivals: Arrivals::Poisson { load: 0.5 },
            seed: 3,
        };
        let wl = Workload::materialize(&c, &spec).unwrap();
        wl.validate(&c).unwrap();
        assert_eq!(wl.requests(), 3);
        assert_eq!(wl.ops(), 40);
        for o in 0..wl.opsets() {
            for i in wl.opset_ops[o]..wl.opset_ops[o + 1] {
                assert_eq!(
                    c.group_of(tokens[wl.op_input[i as usize] as usize]),
                    wl.opset_group[o]
                );
            }
        }
        // Same seed, different load: identical demands per input op (common random numbers).
        let wl2 = Workload::materialize(
            &c,
            &WorkloadSpec {
                arrivals: Arrivals::Poisson { load: 0.9 },
                ..spec
            },
        )
        .unwrap();
        assert_eq!(*wl.demand, *wl2.demand);
        assert!(wl2.arrival[2] < wl.arrival[2]);
    }

    #[test]
    fn a_prefix_of_the_layout_and_draws_is_the_materialized_prefix() {
        let c = cluster();
        let n_ops = 60u64;
        let tokens: Vec<i64> = (0..n_ops).map(crate::hash::token_of_u64).collect();
        let means: Vec<f64> = (0..n_ops).map(|i| 1e-4 * (1 + i % 7) as f64).collect();
        let offsets = vec![0, 3, 10, 11, 25, 40, 41, 60];
        let full = WorkloadSpec {
            req_offsets: offsets.clone(),
            tokens: tokens.clone(),
            mean_demand: Some(means.clone()),
            clients: None,
            arrivals: Arrivals::Poisson { load: 0.6 },
            seed: 9,
        };
        let layout =
            WorkloadLayout::build(&c, &offsets, &tokens, Some(&means), None).unwrap();
        let dist = crate::demand::DemandDist::Exponential;
        let draws = Draws::draw(&c, &layout, Some(&means), &full.arrivals, 9, dist).unwrap();
        for n in [1usize, 4, 7] {
            let k = offsets[n] as usize;
            let want = Workload::materialize(
                &c,
                &WorkloadSpec {
                    req_offsets: offsets[..=n].to_vec(),
                    tokens: tokens[..k].to_vec(),
                    mean_demand: Some(means[..k].to_vec()),
                    ..full.clone()
                },
            )
            .unwrap();
            let lp = layout.prefix(n).unwrap();
            let got = Workload::assemble(
                &lp,
                &draws.prefix(&c, &lp, Some(&means), &full.arrivals, 9).unwrap(),
            );
            got.validate(&c).unwrap();
            assert_eq!(*got.arrival, *want.arrival);
            assert_eq!(*got.demand, *want.demand);
            assert_eq!(*got.opset_ops, *want.opset_ops);
            assert_eq!(*got.opset_group, *want.opset_group);
            assert_eq!(*got.op_input, *want.op_input);
            assert_eq!(*got.mean_demand, *want.mean_demand);
            assert_eq!(got.bytes(), want.bytes());
        }
        assert!(layout.prefix(0).is_err() && layout.prefix(8).is_err());
    }

    #[test]
    fn trace_scaling_hits_the_target_rate() {
        let c = cluster();
        let n = 101;
        let spec = WorkloadSpec {
            req_offsets: (0..=n as u64).collect(),
            tokens: (0..n as u64).map(crate::hash::token_of_u64).collect(),
            mean_demand: Some(vec![0.001; n]),
            clients: None,
            arrivals: Arrivals::Trace {
                ts: (0..n).map(|i| 100.0 + i as f64).collect(),
                load: Some(0.5),
            },
            seed: 1,
        };
        let wl = Workload::materialize(&c, &spec).unwrap();
        // capacity 16 slots / 1 ms = 16000 ops/s; 50% = 8000 req/s → 100 gaps span 12.5 ms.
        assert_eq!(wl.arrival[0], 0);
        assert_eq!(wl.arrival[n - 1], 12_500_000);
    }

    #[test]
    fn bad_load_is_named() {
        let c = cluster();
        let spec = WorkloadSpec {
            req_offsets: vec![0, 1],
            tokens: vec![1],
            mean_demand: None,
            clients: None,
            arrivals: Arrivals::Poisson { load: -1.0 },
            seed: 1,
        };
        let e = Workload::materialize(&c, &spec).unwrap_err();
        assert!(e.to_string().contains("'load'"), "{e}");
    }
}
