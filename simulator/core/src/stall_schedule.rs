//! An explicit stall schedule: stop-the-world stalls of given servers over given intervals (a recorded run's,
//! replayed), used instead of the random stalls of [`crate::server_model::Stalls`].
//!
//! Time is the replay's simulated clock in ns, the clock requests arrive on: its origin 0 is the workload's time
//! origin. With the trace's own timestamps that is the first request's arrival (the timestamps are shifted to
//! start at 0; when a load scales them, the schedule is not scaled); with Poisson arrivals it is the replay's
//! start (the first arrival is one gap after it). Entry `[start, end)` of server `s`: `s` makes no progress from
//! `start` (inclusive) to `end` (exclusive) — ops in service are paused, queued ops wait, exactly as a random
//! stall.
//!
//! Entries may be given in any order (they are sorted per server); on one server they must not overlap (touching,
//! `end == next start`, is allowed). Errors name the entry by its index in the given order
//! (`stall_schedule[i]`).
use crate::error::SimError;

/// One stall: server `server` stopped over `[start_ns, end_ns)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallInterval {
    pub server: usize,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// The stalls as given (any order; see the module documentation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StallSchedule {
    pub entries: Vec<StallInterval>,
}

impl StallSchedule {
    pub fn new(entries: Vec<StallInterval>) -> StallSchedule {
        StallSchedule { entries }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every server below `servers`, every start before its end, no two entries of one server overlapping.
    pub fn validate(&self, servers: usize) -> Result<(), SimError> {
        for (i, e) in self.entries.iter().enumerate() {
            if e.server >= servers {
                return Err(SimError::param(
                    &format!("stall_schedule[{i}].server"),
                    e.server,
                    &format!("0..{servers} (a server index)"),
                ));
            }
            if e.start_ns >= e.end_ns {
                return Err(SimError::param(
                    &format!("stall_schedule[{i}].end"),
                    format!("{} ns", e.end_ns),
                    &format!("> start ({} ns)", e.start_ns),
                ));
            }
        }
        let mut order: Vec<usize> = (0..self.entries.len()).collect();
        order.sort_by_key(|&i| (self.entries[i].server, self.entries[i].start_ns, i));
        for w in order.windows(2) {
            let (a, b) = (&self.entries[w[0]], &self.entries[w[1]]);
            if a.server == b.server && b.start_ns < a.end_ns {
                return Err(SimError::param(
                    &format!("stall_schedule[{}]", w[1]),
                    format!("server {} [{}, {}) ns", b.server, b.start_ns, b.end_ns),
                    &format!(
                        "no overlap with stall_schedule[{}] on the same server ([{}, {}) ns)",
                        w[0], a.start_ns, a.end_ns
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Per server (0..servers), its intervals (start, end) sorted by start. Assumes a validated schedule.
    pub fn per_server(&self, servers: usize) -> Vec<Vec<(u64, u64)>> {
        let mut out = vec![Vec::new(); servers];
        for e in &self.entries {
            out[e.server].push((e.start_ns, e.end_ns));
        }
        for v in &mut out {
            v.sort_unstable();
        }
        out
    }

    /// The end of the last stall (0 when empty).
    pub fn horizon_ns(&self) -> u64 {
        self.entries.iter().map(|e| e.end_ns).max().unwrap_or(0)
    }

    /// Server-time stalled within `[from, to)`, ns (each entry clipped to the window).
    pub fn stalled_ns(&self, from: u64, to: u64) -> u64 {
        self.entries
            .iter()
            .map(|e| e.end_ns.min(to).saturating_sub(e.start_ns.max(from)))
            .sum()
    }

    /// Fraction of the server-time of `servers` servers over `[from, to)` that is stalled; `None` = the window
    /// `[0, horizon)`. An empty window is stalled 0.
    pub fn stalled_fraction(&self, servers: usize, window: Option<(u64, u64)>) -> f64 {
        let (from, to) = window.unwrap_or((0, self.horizon_ns()));
        if to <= from || servers == 0 {
            return 0.0;
        }
        self.stalled_ns(from, to) as f64 / (servers as f64 * (to - from) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(server: usize, start_ns: u64, end_ns: u64) -> StallInterval {
        StallInterval {
            server,
            start_ns,
            end_ns,
        }
    }

    #[test]
    fn validation_names_the_entry() {
        let ok = StallSchedule::new(vec![iv(1, 50, 60), iv(0, 10, 20), iv(1, 10, 50)]);
        ok.validate(2).unwrap();
        assert_eq!(
            ok.per_server(3),
            vec![vec![(10, 20)], vec![(10, 50), (50, 60)], vec![]]
        );
        let e = StallSchedule::new(vec![iv(0, 1, 2), iv(3, 1, 2)])
            .validate(3)
            .unwrap_err();
        assert!(
            e.to_string().contains("'stall_schedule[1].server' = 3"),
            "{e}"
        );
        let e = StallSchedule::new(vec![iv(0, 5, 5)])
            .validate(1)
            .unwrap_err();
        assert!(e.to_string().contains("'stall_schedule[0].end'"), "{e}");
        // Entry 2 starts inside entry 0 on server 1 (entry 1, on server 0, does not count).
        let e = StallSchedule::new(vec![iv(1, 100, 200), iv(0, 150, 160), iv(1, 199, 300)])
            .validate(2)
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("'stall_schedule[2]'") && msg.contains("stall_schedule[0]"),
            "{msg}"
        );
    }

    #[test]
    fn stalled_fraction_over_a_window() {
        // Server 0 stalled [100, 200), server 1 [150, 400): over [0, 400) on 2 servers, 350 / 800.
        let s = StallSchedule::new(vec![iv(0, 100, 200), iv(1, 150, 400)]);
        assert_eq!(s.horizon_ns(), 400);
        assert_eq!(s.stalled_ns(0, 400), 350);
        assert!((s.stalled_fraction(2, None) - 350.0 / 800.0).abs() < 1e-15);
        // Clipped to [180, 300): 20 + 120.
        assert_eq!(s.stalled_ns(180, 300), 140);
        assert!((s.stalled_fraction(2, Some((180, 300))) - 140.0 / 240.0).abs() < 1e-15);
        assert_eq!(s.stalled_fraction(2, Some((5, 5))), 0.0);
    }
}
