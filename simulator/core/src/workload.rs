//! The workload, materialized from a seed BEFORE the replay: arrival times, opsets (ops grouped by replica
//! group) and per-op service demand as data. The engine is then a deterministic function of
//! (workload, cluster, policy): two policies replayed on one `Workload` see the same requests and demands.
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

/// A materialized workload. Requests are in arrival order; ops of a request are sorted by replica group so that
/// each opset is a contiguous run of ops.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    /// Arrival time at the client, ns (non-decreasing).
    pub arrival: Vec<u64>,
    pub client: Vec<u32>,
    /// len = requests + 1: offsets into the opset arrays.
    pub req_opsets: Vec<u32>,
    /// Replica group of each opset.
    pub opset_group: Vec<u32>,
    /// Request of each opset.
    pub opset_req: Vec<u32>,
    /// len = opsets + 1: offsets into the op arrays.
    pub opset_ops: Vec<u32>,
    /// Service demand of each op, ns.
    pub demand: Vec<u64>,
    /// Index of the op in the input (`WorkloadSpec::tokens`), for per-op records.
    pub op_input: Vec<u32>,
    /// Mean demand of each op, ns (what a size-aware client may know); empty = 1/service_rate for every op.
    pub mean_demand: Vec<f32>,
}

/// A hand-built request: (arrival ns, [(replica group, [op demand ns, ...]), ...]).
pub type RequestParts = (u64, Vec<(u32, Vec<u64>)>);

const STREAM_DEMAND: u64 = 1;
const STREAM_ARRIVAL: u64 = 2;

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

    /// Heap bytes held per op (a measure for the "memory linear in trace size" goal).
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

    /// Materializes `spec` for `cluster`: demands (exponential around each op's mean) and arrivals from
    /// independent random streams of `spec.seed`.
    pub fn materialize(cluster: &Cluster, spec: &WorkloadSpec) -> Result<Workload, SimError> {
        Workload::materialize_with(cluster, spec, crate::demand::DemandDist::Exponential)
    }

    /// As [`Workload::materialize`], drawing each op's demand from `dist` around its mean
    /// (exponential gives exactly `materialize`).
    pub fn materialize_with(
        cluster: &Cluster,
        spec: &WorkloadSpec,
        dist: crate::demand::DemandDist,
    ) -> Result<Workload, SimError> {
        let cfg = &cluster.config;
        let n_req = spec.req_offsets.len().saturating_sub(1);
        if n_req == 0 {
            return Err(SimError::BadInput("the workload has no requests".into()));
        }
        let n_ops = spec.tokens.len();
        if spec.req_offsets[0] != 0 || spec.req_offsets[n_req] as usize != n_ops {
            return Err(SimError::BadInput(format!(
                "request offsets must start at 0 and end at the number of ops ({n_ops})"
            )));
        }
        if n_ops >= u32::MAX as usize {
            return Err(SimError::BadInput("more than 2^32-1 ops".into()));
        }
        for r in 0..n_req {
            if spec.req_offsets[r + 1] <= spec.req_offsets[r] {
                return Err(SimError::BadInput(format!(
                    "request {r} has no ops (offsets must increase)"
                )));
            }
        }
        let default_mean = 1.0 / cfg.service_rate;
        if let Some(m) = &spec.mean_demand {
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
        if let Some(c) = &spec.clients {
            if c.len() != n_req {
                return Err(SimError::BadInput(format!(
                    "clients has {} values for {n_req} requests",
                    c.len()
                )));
            }
        }
        // Demands in input order (so they stay tied to the op whatever the grouping).
        let mut rng = Rng::new(spec.seed, STREAM_DEMAND);
        let mut demand_in = Vec::with_capacity(n_ops);
        let mut total_mean = 0.0;
        for i in 0..n_ops {
            let mean = spec.mean_demand.as_ref().map_or(default_mean, |m| m[i]);
            total_mean += mean;
            demand_in.push((dist.sample(&mut rng, mean) * 1e9).round() as u64);
        }
        let arrival = make_arrivals(cluster, spec, n_req, total_mean)?;

        let mut wl = Workload {
            arrival,
            client: (0..n_req)
                .map(|r| {
                    spec.clients
                        .as_ref()
                        .map_or((r % cfg.clients as usize) as u32, |c| c[r])
                })
                .collect(),
            req_opsets: Vec::with_capacity(n_req + 1),
            opset_group: Vec::new(),
            opset_req: Vec::new(),
            opset_ops: Vec::new(),
            demand: Vec::with_capacity(n_ops),
            op_input: Vec::with_capacity(n_ops),
            mean_demand: Vec::new(),
        };
        let mut scratch: Vec<(u32, u32)> = Vec::new();
        wl.req_opsets.push(0);
        for r in 0..n_req {
            scratch.clear();
            for i in spec.req_offsets[r] as usize..spec.req_offsets[r + 1] as usize {
                scratch.push((cluster.group_of(spec.tokens[i]), i as u32));
            }
            scratch.sort_unstable();
            let mut prev = u32::MAX;
            for &(g, i) in &scratch {
                if g != prev {
                    wl.opset_group.push(g);
                    wl.opset_req.push(r as u32);
                    wl.opset_ops.push(wl.demand.len() as u32);
                    prev = g;
                }
                wl.demand.push(demand_in[i as usize]);
                wl.op_input.push(i);
                if let Some(m) = &spec.mean_demand {
                    wl.mean_demand.push((m[i as usize] * 1e9) as f32);
                }
            }
            wl.req_opsets.push(wl.opset_group.len() as u32);
        }
        wl.opset_ops.push(wl.demand.len() as u32);
        Ok(wl)
    }

    /// Builds a workload directly from already materialized parts (hand-worked cases, the Python reference).
    /// `requests[r] = (arrival_ns, [(group, [demand_ns, ...]), ...])`, opsets in the given order. Each op's mean
    /// demand is set to its demand (a clairvoyant size-aware client).
    pub fn from_parts(requests: &[RequestParts], clients: u32) -> Workload {
        let mut wl = Workload {
            req_opsets: vec![0],
            ..Default::default()
        };
        for (r, (t, opsets)) in requests.iter().enumerate() {
            wl.arrival.push(*t);
            wl.client.push((r % clients.max(1) as usize) as u32);
            for (g, ds) in opsets {
                wl.opset_group.push(*g);
                wl.opset_req.push(r as u32);
                wl.opset_ops.push(wl.demand.len() as u32);
                for d in ds {
                    wl.op_input.push(wl.demand.len() as u32);
                    wl.demand.push(*d);
                    wl.mean_demand.push(*d as f32);
                }
            }
            wl.req_opsets.push(wl.opset_group.len() as u32);
        }
        wl.opset_ops.push(wl.demand.len() as u32);
        wl
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
    spec: &WorkloadSpec,
    n_req: usize,
    total_mean: f64,
) -> Result<Vec<u64>, SimError> {
    let slots_total = cluster.config.servers as f64 * cluster.config.slots as f64;
    // Request rate that offers `load` × capacity: λ · E[work per request] = load · (servers × slots).
    let rate_for = |load: f64| load * slots_total / (total_mean / n_req as f64);
    match &spec.arrivals {
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
            let mut rng = Rng::new(spec.seed, STREAM_ARRIVAL);
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
        assert_eq!(wl.demand, wl2.demand);
        assert!(wl2.arrival[2] < wl.arrival[2]);
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
