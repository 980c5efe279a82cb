//! The client host: the CPUs of each client process, on which the client's own work runs.
//!
//! A query thread does two pieces of CPU work per query: the per-query client overhead before the query is sent
//! and, when the deployment has a per-key client cost, the parsing of the response (`keys × client_key_us`) once
//! it is back. With `client_cpus` = 0 every query thread does its work on its own (unbounded CPUs, the threads
//! run in parallel). With `client_cpus` = C ≥ 1 each client process has C CPUs: the work of all its query
//! threads is served first come, first served, by the first free CPU (C = 1 is a CPython process, whose
//! threads hold one interpreter lock). The thread waits, busy, until its work is done.

use std::collections::VecDeque;

/// What a piece of client work is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Work {
    /// The per-query overhead of query `q` (before it is sent).
    Overhead(usize),
    /// Parsing the response of query `q` (after it is back).
    Parse(usize),
}

#[derive(Debug, Default)]
struct Process {
    free: u32,
    /// Work waiting for a CPU: (work, duration µs, when it asked).
    queue: VecDeque<(Work, f64, f64)>,
}

/// The CPUs of every client process (`cpus` each; 0 = unbounded).
#[derive(Debug)]
pub(crate) struct ClientHost {
    cpus: u32,
    processes: Vec<Process>,
    /// CPU time spent on client work, and time work waited for a CPU (µs, summed).
    pub busy_us: f64,
    pub wait_us: f64,
}

impl ClientHost {
    pub(crate) fn new(processes: u32, cpus: u32) -> Self {
        Self {
            cpus,
            processes: (0..processes.max(1))
                .map(|_| Process {
                    free: cpus,
                    queue: VecDeque::new(),
                })
                .collect(),
            busy_us: 0.0,
            wait_us: 0.0,
        }
    }

    /// False when every thread runs its work on its own (no CPU to wait for).
    pub(crate) fn bounded(&self) -> bool {
        self.cpus > 0
    }

    /// Ask process `p` for a CPU for `work` of `dur` µs at `now`. Returns the work's finish time when a CPU was
    /// free (the caller schedules it); None when it queues (it starts when [`ClientHost::release`] hands it a
    /// CPU). Unbounded: always runs at once.
    pub(crate) fn request(&mut self, p: usize, work: Work, dur: f64, now: f64) -> Option<f64> {
        self.busy_us += dur;
        if !self.bounded() {
            return Some(now + dur);
        }
        let proc_ = &mut self.processes[p];
        if proc_.free > 0 {
            proc_.free -= 1;
            Some(now + dur)
        } else {
            proc_.queue.push_back((work, dur, now));
            None
        }
    }

    /// A CPU of process `p` finished its work at `now`: the next queued work (and its finish time) takes it, or
    /// the CPU becomes free.
    pub(crate) fn release(&mut self, p: usize, now: f64) -> Option<(Work, f64)> {
        if !self.bounded() {
            return None;
        }
        let proc_ = &mut self.processes[p];
        match proc_.queue.pop_front() {
            Some((work, dur, asked)) => {
                self.wait_us += now - asked;
                Some((work, now + dur))
            }
            None => {
                proc_.free += 1;
                None
            }
        }
    }

    /// Busy fraction of the client CPUs over `span` µs (0 when unbounded).
    pub(crate) fn load(&self, span: f64) -> f64 {
        if !self.bounded() || span <= 0.0 {
            return 0.0;
        }
        self.busy_us / (span * f64::from(self.cpus) * self.processes.len() as f64)
    }
}
