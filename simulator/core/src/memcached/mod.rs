//! The `memcached` deployment kind: a Chisel-style client (one dispatcher, a pool of query threads with FCFS
//! queues) in front of a replica pool of memcached servers with a fixed number of worker threads each.
//!
//! Request latency = wait in the query thread's queue + client phase (overhead — on a CPU of the client process
//! when those are bounded, see `client_host` — + connection setup, during which later mice of the same merge
//! group are piggybacked) + network out + wait for a server worker + processing `P_S` + network back + the
//! client's per-key parse of the response (on that CPU too). The query thread stays busy for the whole round
//! trip (layered model). A request completes when its last chunk returns.
//!
//! Policies (enum dispatch, one config struct each): [`BatchingConfig`] (one query per request) and
//! [`ChiselConfig`] (split elephants into chunks, merge `B` consecutive mice into one query).
//! The replay is fully deterministic: the workload arrays are materialized before replay, and the optional
//! service-time jitter uses a seeded generator.

mod batching;
mod chisel;
mod client_host;
mod engine;
mod profile;

pub use batching::BatchingConfig;
pub use chisel::{ChiselConfig, SplitRule, CHISEL_PARAMS};
pub use engine::{lane_threads, process_threads, replay, Report, Summary};
pub use profile::ServiceProfile;

/// The memcached policies by name, with their parameters.
pub const POLICIES: &[(&str, &[crate::params::ParamSpec])] = &[
    (BatchingConfig::NAME, &[]),
    (ChiselConfig::NAME, CHISEL_PARAMS),
];

/// The client and server side of one memcached deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    /// Number of memcached servers in the replica pool (every server holds every key).
    pub servers: u32,
    /// Worker threads per memcached server (FCFS across a server's workers).
    pub worker_threads: u32,
    /// Query threads in the client pool (see [`query_threads_rule`]).
    pub query_threads: u32,
    /// Client overhead paid once per query by the query thread (µs).
    pub client_overhead_us: f64,
    /// Connection setup time paid once per query (µs); mice of the head's merge group that reach the thread
    /// before the end of overhead + setup are piggybacked.
    pub setup_us: f64,
    pub profile: ServiceProfile,
    /// Coefficient of variation of a multiplicative lognormal jitter on `P_S` and `N_S` (0 = fixed times).
    pub service_cv: f64,
    /// CPUs of each client process on which its query threads' client work (the overhead, the per-key parse)
    /// is served first come, first served; 0 = unbounded (every query thread works in parallel, the paper's
    /// client). 1 is a CPython process (one interpreter lock).
    pub client_cpus: u32,
    /// Client processes: request `i` is issued by process `i mod client_processes`, each with its own
    /// `query_threads / client_processes` query threads (rounded up) and `client_cpus` CPUs.
    pub client_processes: u32,
    /// Client CPU work per key of a response (parsing the values), µs, paid by the query thread once the
    /// response is back (0 = none).
    pub client_key_us: f64,
}

impl Default for Deployment {
    fn default() -> Self {
        Self {
            servers: 2,
            worker_threads: 4,
            query_threads: query_threads_rule(2, 4, 0.0, ServiceProfile::PAPER.processing_us(1)),
            client_overhead_us: 0.0,
            setup_us: 0.0,
            profile: ServiceProfile::PAPER,
            service_cv: 0.0,
            client_cpus: 0,
            client_processes: 1,
            client_key_us: 0.0,
        }
    }
}

impl Deployment {
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.servers == 0
            || self.worker_threads == 0
            || self.query_threads == 0
            || self.client_processes == 0
        {
            return Err(
                "servers, worker_threads, query_threads and client_processes must all be >= 1".into(),
            );
        }
        for (name, v) in [
            ("client_overhead_us", self.client_overhead_us),
            ("setup_us", self.setup_us),
            ("service_cv", self.service_cv),
            ("client_key_us", self.client_key_us),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("{name} must be finite and >= 0, got {v}"));
            }
        }
        self.profile.validate()
    }

    /// Client phase of one query: overhead + connection setup (µs).
    pub fn client_phase_us(&self) -> f64 {
        self.client_overhead_us + self.setup_us
    }
}

/// The paper's query-thread count rule (§III-A): at least as many query threads as memcached worker threads
/// in the pool; more when a query spends longer in its client phase than at the server (`client_us` >
/// `server_us`), in proportion, so that the servers' parallelism is not starved by busy query threads.
pub fn query_threads_rule(
    servers: u32,
    worker_threads: u32,
    client_us: f64,
    server_us: f64,
) -> u32 {
    let base = servers.max(1) * worker_threads.max(1);
    if server_us > 0.0 && client_us > server_us {
        let scaled = (f64::from(base) * client_us / server_us).ceil();
        scaled.min(f64::from(u32::MAX)) as u32
    } else {
        base
    }
}

/// The open-loop workload: arrival time (µs, non-decreasing), keys per request and the pool server the
/// request's first query goes to (chunk `j` goes to `(server + j) mod servers`).
///
/// With `shards` the pool is **sharded** instead of a replica pool: each key lives on one server (the client
/// hashes it), `server_of` is ignored, and each request is its per-server batches.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub arrivals_us: Vec<f64>,
    pub keys: Vec<u32>,
    pub server_of: Vec<u32>,
    pub shards: Option<Shards>,
}

/// The per-server batches of every request of a sharded pool, flattened: request `i`'s batches are
/// `server[offsets[i]..offsets[i + 1]]` (distinct servers) with `keys[..]` keys each; they sum to the request's
/// keys. The order of a request's batches is the order the client submits them in (first key's server first).
#[derive(Debug, Clone, PartialEq)]
pub struct Shards {
    pub offsets: Vec<u32>,
    pub server: Vec<u32>,
    pub keys: Vec<u32>,
}

impl Shards {
    /// The (server, keys) batches of request `i`.
    pub fn batches(&self, i: usize) -> impl Iterator<Item = (u32, u32)> + '_ {
        let (lo, hi) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        self.server[lo..hi]
            .iter()
            .copied()
            .zip(self.keys[lo..hi].iter().copied())
    }

    fn validate(&self, keys: &[u32], servers: u32) -> Result<(), String> {
        let n = keys.len();
        if self.offsets.len() != n + 1 || self.offsets.first() != Some(&0) {
            return Err(format!(
                "shards: offsets must have {} entries starting at 0",
                n + 1
            ));
        }
        if self.server.len() != self.keys.len()
            || *self.offsets.last().unwrap_or(&0) as usize != self.keys.len()
        {
            return Err("shards: offsets, server and keys do not match in length".into());
        }
        for (i, &want) in keys.iter().enumerate() {
            if self.offsets[i] > self.offsets[i + 1] {
                return Err(format!(
                    "shards: request {i}: offsets must be non-decreasing"
                ));
            }
            let mut total = 0u64;
            let mut seen: Vec<u32> = Vec::new();
            for (s, k) in self.batches(i) {
                if s >= servers {
                    return Err(format!(
                        "shards: request {i}: server {s} is not in 0..{servers}"
                    ));
                }
                if k == 0 || seen.contains(&s) {
                    return Err(format!(
                        "shards: request {i}: empty or repeated batch for server {s}"
                    ));
                }
                seen.push(s);
                total += u64::from(k);
            }
            if total != u64::from(want) {
                return Err(format!(
                    "shards: request {i}: batches hold {total} keys, the request has {want}"
                ));
            }
        }
        Ok(())
    }
}

impl Workload {
    pub(crate) fn validate(&self, servers: u32) -> Result<(), String> {
        let n = self.arrivals_us.len();
        if self.keys.len() != n || self.server_of.len() != n {
            return Err(format!(
                "arrivals ({n}), keys ({}) and server_of ({}) must have the same length",
                self.keys.len(),
                self.server_of.len()
            ));
        }
        let mut prev = f64::NEG_INFINITY;
        for (i, &t) in self.arrivals_us.iter().enumerate() {
            if !t.is_finite() {
                return Err(format!("request {i}: arrival time is not finite"));
            }
            if t < prev {
                return Err(format!("request {i}: arrival times must be non-decreasing"));
            }
            prev = t;
        }
        if let Some(i) = self.keys.iter().position(|&k| k == 0) {
            return Err(format!("request {i}: a request needs at least one key"));
        }
        if let Some(sh) = &self.shards {
            return sh.validate(&self.keys, servers);
        }
        if let Some(i) = self.server_of.iter().position(|&s| s >= servers) {
            return Err(format!(
                "request {i}: server {} is not in 0..{servers}",
                self.server_of[i]
            ));
        }
        Ok(())
    }
}

/// One piece of a request placed on a query thread's queue by the dispatcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subrequest {
    pub request: usize,
    pub keys: u32,
    pub thread: usize,
    pub server: u32,
    /// Merge group of a mouse (mice of one group go to one thread and may share one query).
    pub group: Option<u64>,
}

/// Round-robin state of the single dispatcher thread.
#[derive(Debug, Clone, Default)]
pub struct DispatchState {
    threads: usize,
    servers: u32,
    next_thread: usize,
    next_group: u64,
    /// Open merge group: (id, thread, members so far).
    open_group: Option<(u64, usize, u32)>,
}

impl DispatchState {
    pub fn new(threads: u32, servers: u32) -> Self {
        Self {
            threads: threads.max(1) as usize,
            servers: servers.max(1),
            ..Self::default()
        }
    }

    /// Next query thread in round-robin order.
    fn take_thread(&mut self) -> usize {
        let t = self.next_thread;
        self.next_thread = (self.next_thread + 1) % self.threads;
        t
    }

    fn server(&self, first: u32, j: u32) -> u32 {
        ((u64::from(first) + u64::from(j)) % u64::from(self.servers)) as u32
    }

    /// Place a request of `keys` keys as one query on the next thread.
    fn whole(&mut self, request: usize, keys: u32, server: u32, out: &mut Vec<Subrequest>) {
        let thread = self.take_thread();
        out.push(Subrequest {
            request,
            keys,
            thread,
            server,
            group: None,
        });
    }

    /// Split into `chunks` balanced chunks (sizes differ by at most one key) on consecutive threads.
    fn split(
        &mut self,
        request: usize,
        keys: u32,
        chunks: u32,
        server: u32,
        out: &mut Vec<Subrequest>,
    ) {
        let n = chunks.clamp(1, keys);
        let (base, rem) = (keys / n, keys % n);
        for j in 0..n {
            let thread = self.take_thread();
            let size = base + u32::from(j < rem);
            out.push(Subrequest {
                request,
                keys: size,
                thread,
                server: self.server(server, j),
                group: None,
            });
        }
    }

    /// Add a mouse to the open merge group (of at most `merge` members) or open a new one.
    fn merge(
        &mut self,
        request: usize,
        keys: u32,
        merge: u32,
        server: u32,
        out: &mut Vec<Subrequest>,
    ) {
        let (id, thread, count) = match self.open_group {
            Some(g) => g,
            None => {
                let id = self.next_group;
                self.next_group += 1;
                (id, self.take_thread(), 0)
            }
        };
        let count = count + 1;
        self.open_group = if count >= merge {
            None
        } else {
            Some((id, thread, count))
        };
        out.push(Subrequest {
            request,
            keys,
            thread,
            server,
            group: Some(id),
        });
    }
}

/// The client-side query shaping policy (enum dispatch, one config struct per policy).
#[derive(Debug, Clone, PartialEq)]
pub enum Policy {
    Batching(BatchingConfig),
    Chisel(ChiselConfig),
}

impl Policy {
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Batching(_) => BatchingConfig::NAME,
            Policy::Chisel(_) => ChiselConfig::NAME,
        }
    }

    /// Turn one request into subrequests on query-thread queues.
    pub fn dispatch(
        &self,
        st: &mut DispatchState,
        request: usize,
        keys: u32,
        server: u32,
        out: &mut Vec<Subrequest>,
    ) {
        match self {
            Policy::Batching(c) => c.dispatch(st, request, keys, server, out),
            Policy::Chisel(c) => c.dispatch(st, request, keys, server, out),
        }
    }

    /// Sharded pool: place one per-server batch of `keys` keys of a request of `total` keys on its server's
    /// lane (`st` is that lane's dispatcher, of one server). As the shipped client does: batching sends the
    /// batch whole; chisel decides elephant vs mouse on the request's `total` keys, splits an elephant's batch
    /// into balanced chunks on consecutive threads of the lane, and merges a mouse's batch into the lane's
    /// open merge group.
    pub fn dispatch_batch(
        &self,
        st: &mut DispatchState,
        request: usize,
        total: u32,
        keys: u32,
        out: &mut Vec<Subrequest>,
    ) {
        match self {
            Policy::Batching(_) => st.whole(request, keys, 0, out),
            Policy::Chisel(c) if c.is_elephant(total) => {
                st.split(request, keys, c.split.chunks(keys), 0, out)
            }
            Policy::Chisel(c) if c.merge > 1 => st.merge(request, keys, c.merge, 0, out),
            Policy::Chisel(_) => st.whole(request, keys, 0, out),
        }
    }

    /// Most requests one query may carry.
    pub fn merge_limit(&self) -> u32 {
        match self {
            Policy::Batching(_) => 1,
            Policy::Chisel(c) => c.merge,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        match self {
            Policy::Batching(_) => Ok(()),
            Policy::Chisel(c) => c.validate(),
        }
    }
}

#[cfg(test)]
mod tests;
