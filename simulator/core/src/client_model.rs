//! Closed-loop clients: N client threads, each issuing its next request when its previous one completed
//! (the last response reached the client) plus a think time — the YCSB clients of the papers' testbeds.
//!
//! Requests keep the workload's order; request r goes to the thread that becomes free first (ties: the thread that
//! became free earlier in event order). All threads issue their first request at time 0. The workload's own arrival
//! times are ignored; a request's arrival (and its latency's start) is the moment its thread issues it. The
//! request's client (coordinator: selector state, speculative estimates) stays the workload's client.
//! Think times are materialized per request before the replay (stream 6 of the seed): the think time after request
//! r completes is `think[r]`, so two policies replayed on one workload see the same think times.
use crate::error::{check_range, SimError};
use crate::rng::Rng;

const STREAM_THINK: u64 = 6;

/// Distribution of the think time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum ThinkDist {
    /// Exponential with the given mean (the default: a Poisson-like issue process per thread).
    #[default]
    Exponential,
    /// Exactly the given time.
    Fixed,
}

/// Names accepted by [`ThinkDist::from_name`].
pub const THINK_DISTS: [&str; 2] = ["exponential", "fixed"];

impl ThinkDist {
    pub fn from_name(name: &str) -> Result<ThinkDist, SimError> {
        match name {
            "exponential" => Ok(ThinkDist::Exponential),
            "fixed" => Ok(ThinkDist::Fixed),
            other => Err(SimError::param(
                "think_dist",
                other,
                &format!("one of {THINK_DISTS:?}"),
            )),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            ThinkDist::Exponential => "exponential",
            ThinkDist::Fixed => "fixed",
        }
    }
}

/// A closed-loop client model.
#[derive(Debug, Clone, PartialEq)]
pub struct ClosedLoop {
    pub threads: u32,
    /// Mean think time, ns.
    pub think_ns: u64,
    pub think: ThinkDist,
}

impl ClosedLoop {
    pub fn validate(&self) -> Result<(), SimError> {
        check_range(
            "threads",
            self.threads as f64,
            1.0,
            10_000_000.0,
            "1..=10000000",
        )?;
        check_range("think_ns", self.think_ns as f64, 0.0, 1e15, "[0, 1e15] ns")?;
        Ok(())
    }

    /// Think time after each request completes, ns.
    pub fn think_times(&self, requests: usize, seed: u64) -> Vec<u64> {
        match self.think {
            ThinkDist::Fixed => vec![self.think_ns; requests],
            ThinkDist::Exponential => {
                let mut rng = Rng::new(seed, STREAM_THINK);
                let mean = self.think_ns as f64;
                (0..requests)
                    .map(|_| rng.exp(mean).round() as u64)
                    .collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_times_are_deterministic_and_keep_the_mean() {
        let c = ClosedLoop {
            threads: 2,
            think_ns: 1_000_000,
            think: ThinkDist::Exponential,
        };
        let a = c.think_times(100_000, 3);
        assert_eq!(a, c.think_times(100_000, 3));
        let m = a.iter().sum::<u64>() as f64 / a.len() as f64;
        assert!((m - 1e6).abs() < 1e4, "mean {m}");
        let f = ClosedLoop {
            think: ThinkDist::Fixed,
            ..c
        };
        assert_eq!(f.think_times(3, 3), vec![1_000_000; 3]);
        let e = ThinkDist::from_name("gamma").unwrap_err();
        assert!(e.to_string().contains("'think_dist'"), "{e}");
        let e = ClosedLoop { threads: 0, ..f }.validate().unwrap_err();
        assert!(e.to_string().contains("'threads'"), "{e}");
    }
}
