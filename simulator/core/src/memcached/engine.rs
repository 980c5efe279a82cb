//! The deterministic event core of the memcached deployment kind.
//!
//! Events are ordered by (time, sequence number); an arrival at the same instant as another event is handled
//! first. Times are microseconds.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use super::client_host::{ClientHost, Work};
use super::{Deployment, DispatchState, Policy, Subrequest, Workload};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A query thread finished its client phase: collect piggybacked mice, send the query.
    SetupDone { thread: usize },
    /// The query reached its server.
    AtServer { query: usize },
    /// A server worker finished processing the query.
    ServerDone { query: usize },
    /// The response is back at the query thread.
    Returned { query: usize },
    /// A piece of client work of a process's query thread is done (its CPU, if bounded, is free again).
    ClientWorkDone { process: usize, work: Work },
}

#[derive(Debug, Clone, Copy)]
struct Event {
    time: f64,
    seq: u64,
    kind: Kind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Reversed so that `BinaryHeap` pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .total_cmp(&self.time)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

#[derive(Debug, Clone)]
struct Query {
    thread: usize,
    /// The client process whose thread runs the query.
    process: usize,
    server: u32,
    group: Option<u64>,
    members: Vec<usize>,
    keys: u32,
    started: f64,
    /// When the query reached its server (for the server wait).
    at_server: f64,
}

#[derive(Debug, Default)]
struct QueryThread {
    queue: VecDeque<(Subrequest, f64)>,
    busy: bool,
    /// The query this thread works on while busy.
    current: usize,
    busy_us: f64,
}

#[derive(Debug, Default)]
struct Server {
    free: u32,
    queue: VecDeque<usize>,
    busy_us: f64,
}

/// splitmix64: a tiny seeded generator for the optional service jitter.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.uniform(), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// Multiplicative lognormal jitter of mean 1 and coefficient of variation `cv` (1 when `cv` is 0).
#[derive(Debug, Clone)]
struct Jitter {
    rng: Rng,
    sigma: f64,
}

impl Jitter {
    fn new(cv: f64, seed: u64) -> Self {
        Self {
            rng: Rng(seed),
            sigma: (1.0 + cv * cv).ln().sqrt(),
        }
    }
    fn factor(&mut self) -> f64 {
        if self.sigma == 0.0 {
            1.0
        } else {
            (self.sigma * self.rng.normal() - self.sigma * self.sigma / 2.0).exp()
        }
    }
}

/// Everything measured in one replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Latency of each request in arrival order (µs).
    pub latencies_us: Vec<f64>,
    /// Queries sent to the servers.
    pub queries: u64,
    /// Keys summed over all queries.
    pub query_keys: u64,
    /// Queries that carried more than one request.
    pub merged_queries: u64,
    /// Requests that were split into more than one chunk, and their chunks.
    pub split_requests: u64,
    pub chunks: u64,
    /// Events handled (arrivals included).
    pub events: u64,
    /// Time waited in query-thread queues, summed over subrequests (µs).
    pub client_wait_us: f64,
    /// Time waited for a server worker, summed over queries (µs).
    pub server_wait_us: f64,
    /// Time client work waited for a CPU of its process, summed (µs; 0 with unbounded client CPUs).
    pub client_cpu_wait_us: f64,
    /// Busy fraction of the client processes' CPUs (0 with unbounded client CPUs).
    pub client_cpu_load: f64,
    /// Busy time of all query threads, and the busiest server's busy time over its workers (µs).
    pub thread_busy_us: f64,
    pub server_busy_max_us: f64,
    /// First arrival to last completion (µs).
    pub span_us: f64,
    pub query_threads: u32,
    pub worker_threads: u32,
}

/// Latency percentiles and load figures of a [`Report`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub requests: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// Mean busy fraction of the query threads.
    pub utilization: f64,
    /// Busy fraction of the busiest server's workers.
    pub server_load_max: f64,
    /// Mean latency of the last third of requests is at most 1.5× that of the middle third.
    pub steady_state: bool,
}

/// Nearest-rank percentile of sorted values: the value at index `ceil(q·n) − 1`.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

impl Report {
    pub fn summary(&self) -> Summary {
        let mut sorted = self.latencies_us.clone();
        sorted.sort_by(f64::total_cmp);
        let n = self.latencies_us.len();
        let third = n / 3;
        let steady = if third == 0 {
            true
        } else {
            let middle = mean(&self.latencies_us[third..2 * third]);
            let last = mean(&self.latencies_us[2 * third..]);
            last <= 1.5 * middle
        };
        let span = self.span_us.max(f64::MIN_POSITIVE);
        Summary {
            requests: n as u64,
            mean_us: mean(&sorted),
            p50_us: percentile(&sorted, 0.50),
            p95_us: percentile(&sorted, 0.95),
            p99_us: percentile(&sorted, 0.99),
            p999_us: percentile(&sorted, 0.999),
            utilization: if n == 0 {
                0.0
            } else {
                self.thread_busy_us / (span * f64::from(self.query_threads))
            },
            server_load_max: if n == 0 {
                0.0
            } else {
                self.server_busy_max_us / (span * f64::from(self.worker_threads))
            },
            steady_state: steady,
        }
    }
}

struct Sim<'a> {
    dep: &'a Deployment,
    policy: &'a Policy,
    heap: BinaryHeap<Event>,
    seq: u64,
    threads: Vec<QueryThread>,
    servers: Vec<Server>,
    host: ClientHost,
    /// Query threads of each client process (process `p` has threads `p·per_process ..`).
    per_process: usize,
    queries: Vec<Query>,
    remaining: Vec<u32>,
    arrivals: &'a [f64],
    latencies: Vec<f64>,
    jitter: Jitter,
    report: Report,
}

impl<'a> Sim<'a> {
    fn push(&mut self, time: f64, kind: Kind) {
        self.seq += 1;
        self.heap.push(Event {
            time,
            seq: self.seq,
            kind,
        });
    }

    /// Start the next query on an idle thread with a non-empty queue.
    fn try_start(&mut self, thread: usize, now: f64) {
        let th = &mut self.threads[thread];
        if th.busy {
            return;
        }
        let Some((sub, enq)) = th.queue.pop_front() else {
            return;
        };
        th.busy = true;
        self.report.client_wait_us += now - enq;
        let process = thread / self.per_process;
        self.queries.push(Query {
            thread,
            process,
            server: sub.server,
            group: sub.group,
            members: vec![sub.request],
            keys: sub.keys,
            started: now,
            at_server: now,
        });
        let q = self.queries.len() - 1;
        self.threads[thread].current = q;
        // Work of no time needs no CPU: without an overhead the query goes on as with unbounded CPUs.
        if self.host.bounded() && self.dep.client_overhead_us > 0.0 {
            let work = Work::Overhead(q);
            if let Some(end) = self
                .host
                .request(process, work, self.dep.client_overhead_us, now)
            {
                self.push(end, Kind::ClientWorkDone { process, work });
            }
        } else {
            self.host.busy_us += self.dep.client_overhead_us;
            self.push(now + self.dep.client_phase_us(), Kind::SetupDone { thread });
        }
    }

    /// Client work finished on a CPU of `process`: hand the CPU to the next queued work, then go on with this.
    fn client_work_done(&mut self, process: usize, work: Work, now: f64) {
        if let Some((next, end)) = self.host.release(process, now) {
            self.push(
                end,
                Kind::ClientWorkDone {
                    process,
                    work: next,
                },
            );
        }
        match work {
            Work::Overhead(q) => {
                let thread = self.queries[q].thread;
                self.push(now + self.dep.setup_us, Kind::SetupDone { thread });
            }
            Work::Parse(q) => self.complete(q, now),
        }
    }

    fn setup_done(&mut self, thread: usize, now: f64) {
        let q = self.threads[thread].current;
        let limit = self.policy.merge_limit() as usize;
        if let (Some(g), true) = (self.queries[q].group, limit > 1) {
            let th = &mut self.threads[thread];
            let mut kept = VecDeque::with_capacity(th.queue.len());
            while let Some((sub, enq)) = th.queue.pop_front() {
                if sub.group == Some(g) && self.queries[q].members.len() < limit {
                    self.queries[q].members.push(sub.request);
                    self.queries[q].keys += sub.keys;
                    self.report.client_wait_us += now - enq;
                } else {
                    kept.push_back((sub, enq));
                }
            }
            th.queue = kept;
        }
        let query = &self.queries[q];
        if query.members.len() > 1 {
            self.report.merged_queries += 1;
        }
        self.report.queries += 1;
        self.report.query_keys += u64::from(query.keys);
        let t = now + self.dep.profile.net_out_us() * self.jitter.factor();
        self.push(t, Kind::AtServer { query: q });
    }

    fn at_server(&mut self, q: usize, now: f64) {
        let s = self.queries[q].server as usize;
        self.queries[q].at_server = now;
        if self.servers[s].free > 0 {
            self.servers[s].free -= 1;
            self.start_processing(q, now, now);
        } else {
            self.servers[s].queue.push_back(q);
        }
    }

    fn start_processing(&mut self, q: usize, now: f64, arrived: f64) {
        self.report.server_wait_us += now - arrived;
        let d = self.dep.profile.processing_us(self.queries[q].keys) * self.jitter.factor();
        let s = self.queries[q].server as usize;
        self.servers[s].busy_us += d;
        self.push(now + d, Kind::ServerDone { query: q });
    }

    fn server_done(&mut self, q: usize, now: f64) {
        let back = self.dep.profile.net_back_us(self.queries[q].keys) * self.jitter.factor();
        self.push(now + back, Kind::Returned { query: q });
        let s = self.queries[q].server as usize;
        match self.servers[s].queue.pop_front() {
            Some(next) => {
                let arrived = self.queries[next].at_server;
                self.start_processing(next, now, arrived);
            }
            None => self.servers[s].free += 1,
        }
    }

    fn returned(&mut self, q: usize, now: f64) {
        let parse = self.dep.client_key_us * f64::from(self.queries[q].keys);
        if parse > 0.0 {
            let process = self.queries[q].process;
            let work = Work::Parse(q);
            if let Some(end) = self.host.request(process, work, parse, now) {
                self.push(end, Kind::ClientWorkDone { process, work });
            }
        } else {
            self.complete(q, now);
        }
    }

    /// The query's work is over: its thread is free and its requests have their answer from this server.
    fn complete(&mut self, q: usize, now: f64) {
        let thread = self.queries[q].thread;
        self.threads[thread].busy_us += now - self.queries[q].started;
        self.threads[thread].busy = false;
        for i in 0..self.queries[q].members.len() {
            let r = self.queries[q].members[i];
            self.remaining[r] -= 1;
            if self.remaining[r] == 0 {
                self.latencies[r] = now - self.arrivals[r];
            }
        }
        self.report.span_us = self.report.span_us.max(now);
        self.try_start(thread, now);
    }
}

/// Query threads of each client process: the deployment's `query_threads` shared out evenly over its
/// `client_processes` (rounded up).
pub fn process_threads(deployment: &Deployment) -> u32 {
    deployment
        .query_threads
        .div_ceil(deployment.client_processes.max(1))
        .max(1)
}

/// Query threads per server lane of one client process of a sharded pool: the process's query threads shared
/// out evenly over the servers (rounded up), as the client's `connections_per_server`.
pub fn lane_threads(deployment: &Deployment) -> u32 {
    process_threads(deployment)
        .div_ceil(deployment.servers.max(1))
        .max(1)
}

/// Replay `workload` through `deployment` under `policy`. `seed` drives only the optional service jitter.
///
/// Request `i` is issued by client process `i mod client_processes`; each process has its own query threads,
/// dispatcher (or, sharded, its own lane per server) and CPUs ([`ClientHost`]).
pub fn replay(
    deployment: &Deployment,
    policy: &Policy,
    workload: &Workload,
    seed: u64,
) -> Result<Report, String> {
    deployment.validate()?;
    policy.validate()?;
    workload.validate(deployment.servers)?;
    let n = workload.arrivals_us.len();
    let processes = deployment.client_processes;
    // Per process: a sharded pool has one lane of `per_lane` query threads per server (threads
    // `p·per_process + s·per_lane ..`); a replica pool one dispatcher over `per_process` threads.
    let per_lane = lane_threads(deployment);
    let per_process = if workload.shards.is_some() {
        per_lane * deployment.servers
    } else {
        process_threads(deployment)
    };
    let query_threads = per_process * processes;
    let t = query_threads as usize;
    let mut sim = Sim {
        dep: deployment,
        policy,
        heap: BinaryHeap::new(),
        seq: 0,
        threads: (0..t).map(|_| QueryThread::default()).collect(),
        servers: (0..deployment.servers)
            .map(|_| Server {
                free: deployment.worker_threads,
                ..Server::default()
            })
            .collect(),
        host: ClientHost::new(processes, deployment.client_cpus),
        per_process: per_process as usize,
        queries: Vec::with_capacity(n),
        remaining: vec![0; n],
        arrivals: &workload.arrivals_us,
        latencies: vec![0.0; n],
        jitter: Jitter::new(deployment.service_cv, seed),
        report: Report {
            latencies_us: Vec::new(),
            queries: 0,
            query_keys: 0,
            merged_queries: 0,
            split_requests: 0,
            chunks: 0,
            events: 0,
            client_wait_us: 0.0,
            server_wait_us: 0.0,
            client_cpu_wait_us: 0.0,
            client_cpu_load: 0.0,
            thread_busy_us: 0.0,
            server_busy_max_us: 0.0,
            span_us: 0.0,
            query_threads,
            worker_threads: deployment.worker_threads,
        },
    };
    let mut dispatch: Vec<DispatchState> = (0..processes)
        .map(|_| DispatchState::new(per_process, deployment.servers))
        .collect();
    let mut lanes: Vec<Vec<DispatchState>> = (0..processes)
        .map(|_| {
            (0..deployment.servers)
                .map(|_| DispatchState::new(per_lane, 1))
                .collect()
        })
        .collect();
    let mut subs: Vec<Subrequest> = Vec::new();
    let mut next = 0usize;
    loop {
        let arrival_due = next < n
            && sim
                .heap
                .peek()
                .is_none_or(|e| workload.arrivals_us[next] <= e.time);
        if arrival_due {
            let now = workload.arrivals_us[next];
            let p = next % processes as usize;
            let base = p * per_process as usize;
            subs.clear();
            match &workload.shards {
                None => policy.dispatch(
                    &mut dispatch[p],
                    next,
                    workload.keys[next],
                    workload.server_of[next],
                    &mut subs,
                ),
                Some(sh) => {
                    let servers = u64::from(deployment.servers);
                    for (server, keys) in sh.batches(next) {
                        let from = subs.len();
                        policy.dispatch_batch(
                            &mut lanes[p][server as usize],
                            next,
                            workload.keys[next],
                            keys,
                            &mut subs,
                        );
                        for sub in &mut subs[from..] {
                            sub.thread += (server * per_lane) as usize;
                            sub.server = server;
                            sub.group = sub.group.map(|g| g * servers + u64::from(server));
                        }
                    }
                }
            }
            let procs = u64::from(processes);
            for sub in &mut subs {
                sub.thread += base;
                sub.group = sub.group.map(|g| g * procs + p as u64);
            }
            sim.remaining[next] = subs.len() as u32;
            if subs.len() > 1 {
                sim.report.split_requests += 1;
                sim.report.chunks += subs.len() as u64;
            }
            for &s in &subs {
                sim.threads[s.thread].queue.push_back((s, now));
                sim.try_start(s.thread, now);
            }
            sim.report.events += 1;
            next += 1;
            continue;
        }
        let Some(ev) = sim.heap.pop() else { break };
        sim.report.events += 1;
        match ev.kind {
            Kind::SetupDone { thread } => sim.setup_done(thread, ev.time),
            Kind::AtServer { query } => sim.at_server(query, ev.time),
            Kind::ServerDone { query } => sim.server_done(query, ev.time),
            Kind::Returned { query } => sim.returned(query, ev.time),
            Kind::ClientWorkDone { process, work } => {
                sim.client_work_done(process, work, ev.time)
            }
        }
    }
    let first = workload.arrivals_us.first().copied().unwrap_or(0.0);
    let mut report = sim.report;
    report.span_us = (report.span_us - first).max(0.0);
    report.client_cpu_wait_us = sim.host.wait_us;
    report.client_cpu_load = sim.host.load(report.span_us);
    report.thread_busy_us = sim.threads.iter().map(|t| t.busy_us).sum();
    report.server_busy_max_us = sim.servers.iter().map(|s| s.busy_us).fold(0.0, f64::max);
    report.latencies_us = sim.latencies;
    Ok(report)
}
