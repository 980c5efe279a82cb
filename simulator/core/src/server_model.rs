//! Server heterogeneity and variability: per-server speed factors and C3-style time-varying slowdowns.
//!
//! An op of demand `D` (ns of work at speed 1) started at `t` on server `s` is served at the server's speed,
//! which is piecewise constant in time: `speed[s]`, divided by `factor` while the server is slowed. Its service
//! ends when the integral of the speed from `t` reaches `D` (an op that straddles the start or end of a slowdown is
//! served partly at each speed). The end is computed when the op starts (the schedule is a deterministic function
//! of the seed, known in advance), so the engine still only schedules one completion per op.
//!
//! Slowdowns (the C3 paper's time-varying service times, absim's `timeVaryingServiceTimes`): time is cut into
//! windows of `interval_ns`; at the start of window k a subset of ⌊fraction · servers⌉ servers, drawn uniformly
//! without replacement from stream 5 of the seed (windows drawn in order, so window k's subset does not depend on
//! how far the run goes), is slowed by `factor` for the window's first `duration_ns` (≤ interval). Windows are
//! materialized lazily in order: the schedule is the same whatever the run length.
//!
//! Stalls (speed 0) come either at random ([`Stalls`]) or on an explicit schedule
//! ([`crate::stall_schedule::StallSchedule`], e.g. a recorded run's); both reach the served-time computation
//! through the same lookup (`stall_after`: the stall of a server that ends after a time).
use crate::error::{check_range, SimError};
use crate::rng::Rng;
use crate::stall_schedule::StallSchedule;

const STREAM_SLOWDOWN: u64 = 5;
/// Stalls: server s draws from stream `STREAM_STALL_BASE + s` (one independent stream per server).
const STREAM_STALL_BASE: u64 = 1 << 32;

/// Transient stop-the-world stalls (GC pauses, safepoints): each server independently, stalls start as a
/// Poisson process of `rate_per_s` per second of non-stalled time and last `duration_ns`; a stalled server
/// makes no progress (ops in service are paused, queued ops wait). Stall k of server s starts at
/// end(k − 1) + Exp(1 / rate), drawn in order from the server's own stream, so the schedule does not depend
/// on the run length or on the other servers.
#[derive(Debug, Clone, PartialEq)]
pub struct Stalls {
    pub rate_per_s: f64,
    pub duration_ns: u64,
}

impl Stalls {
    pub fn validate(&self) -> Result<(), SimError> {
        check_range(
            "stall_rate",
            self.rate_per_s,
            0.0,
            1e6,
            "[0, 1e6] per s per server",
        )?;
        check_range(
            "stall_ns",
            self.duration_ns as f64,
            0.0,
            1e15,
            "0..=1e15 ns",
        )
    }

    fn is_off(&self) -> bool {
        self.rate_per_s == 0.0 || self.duration_ns == 0
    }

    /// Expected fraction of time a server is stalled (renewal: D / (1/rate + D)).
    pub fn stalled_fraction(&self) -> f64 {
        if self.is_off() {
            return 0.0;
        }
        let d = self.duration_ns as f64 / 1e9;
        d / (1.0 / self.rate_per_s + d)
    }
}

/// Time-varying slowdowns.
#[derive(Debug, Clone, PartialEq)]
pub struct Slowdown {
    /// Length of a window, ns.
    pub interval_ns: u64,
    /// Fraction of the servers slowed in each window (rounded to the nearest count).
    pub fraction: f64,
    /// Service-time multiplier while slowed (speed / factor), ≥ 1.
    pub factor: f64,
    /// How long a slowdown lasts from the window's start, ns (0 < duration ≤ interval).
    pub duration_ns: u64,
}

impl Slowdown {
    pub fn validate(&self) -> Result<(), SimError> {
        check_range(
            "slowdown_interval_ns",
            self.interval_ns as f64,
            1.0,
            1e15,
            "1..=1e15 ns",
        )?;
        check_range("slowdown_fraction", self.fraction, 0.0, 1.0, "[0, 1]")?;
        check_range(
            "slowdown_factor",
            self.factor,
            1.0,
            1e6,
            "[1, 1e6] (service-time multiplier)",
        )?;
        if self.duration_ns == 0 || self.duration_ns > self.interval_ns {
            return Err(SimError::param(
                "slowdown_duration_ns",
                self.duration_ns,
                &format!("1..=slowdown_interval_ns ({})", self.interval_ns),
            ));
        }
        Ok(())
    }

    /// Servers slowed per window.
    pub fn count(&self, servers: usize) -> usize {
        ((self.fraction * servers as f64).round() as usize).min(servers)
    }
}

/// Speeds and slowdowns of the servers. The default (no speeds, no slowdown) is the core model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerModelConfig {
    /// Speed factor per server (service time = demand / speed); empty = all 1.
    pub speeds: Vec<f64>,
    pub slowdown: Option<Slowdown>,
    /// Transient stop-the-world stalls at random (None = none).
    pub stalls: Option<Stalls>,
    /// Stalls on an explicit schedule instead of at random (None = none; not with `stalls`).
    pub stall_schedule: Option<StallSchedule>,
}

impl ServerModelConfig {
    /// `n` of `servers` servers run `factor` times slower (speed 1/factor), spread evenly over the ring:
    /// servers ⌊i · servers / n⌋ for i in 0..n (so no two are adjacent while n ≤ servers / 2).
    pub fn slow_servers(servers: usize, n: usize, factor: f64) -> Result<Vec<f64>, SimError> {
        if n > servers {
            return Err(SimError::param(
                "slow_servers",
                n,
                &format!("0..=servers ({servers})"),
            ));
        }
        check_range(
            "slow_factor",
            factor,
            1.0,
            1e6,
            "[1, 1e6] (service-time multiplier)",
        )?;
        let mut v = vec![1.0; servers];
        for i in 0..n {
            v[i * servers / n] = 1.0 / factor;
        }
        Ok(v)
    }

    /// True when every server always runs at speed 1 (the engine's plain path applies).
    pub fn is_uniform(&self) -> bool {
        self.speeds.iter().all(|&s| s == 1.0)
            && self.slowdown.as_ref().is_none_or(|s| s.count_is_zero())
            && self.stalls.as_ref().is_none_or(|s| s.is_off())
            && self.stall_schedule.as_ref().is_none_or(|s| s.is_empty())
    }

    pub fn validate(&self, servers: usize) -> Result<(), SimError> {
        if !self.speeds.is_empty() && self.speeds.len() != servers {
            return Err(SimError::param(
                "server_speeds",
                format!("{} values", self.speeds.len()),
                &format!("one speed factor per server ({servers})"),
            ));
        }
        if let Some(i) = self
            .speeds
            .iter()
            .position(|v| !(v.is_finite() && *v > 0.0 && *v <= 1e6))
        {
            return Err(SimError::param(
                &format!("server_speeds[{i}]"),
                self.speeds[i],
                "(0, 1e6]",
            ));
        }
        if let Some(s) = &self.slowdown {
            s.validate()?;
        }
        if let Some(s) = &self.stalls {
            s.validate()?;
        }
        if let Some(s) = &self.stall_schedule {
            if self.stalls.is_some() {
                return Err(SimError::param(
                    "stall_schedule",
                    format!("{} entries", s.entries.len()),
                    "not with random stalls (stall_rate): give one or the other",
                ));
            }
            s.validate(servers)?;
        }
        Ok(())
    }

    /// Time-averaged capacity relative to `servers` servers at speed 1: mean over servers of
    /// speed × (1 − p · (1 − 1/factor)), p = (slowed count / servers) · (duration / interval) the expected
    /// fraction of time a server is slowed, times (1 − the stalled fraction). Offered load (`--load`) is relative
    /// to this capacity. A stall schedule's stalled fraction is its stalled server-time over the schedule's own
    /// span `[0, last end)`; [`Self::capacity_factor_over`] takes the replay's span instead.
    pub fn capacity_factor(&self, servers: usize) -> f64 {
        self.capacity_factor_over(servers, None)
    }

    /// [`Self::capacity_factor`] with a stall schedule's stalled fraction taken over `window` = `[from, to)` ns
    /// (the replay's span); `None` = the schedule's own span. Random stalls: their expected fraction either way.
    pub fn capacity_factor_over(&self, servers: usize, window: Option<(u64, u64)>) -> f64 {
        let mean_speed = if self.speeds.is_empty() {
            1.0
        } else {
            self.speeds.iter().sum::<f64>() / self.speeds.len() as f64
        };
        let slow = self.slowdown.as_ref().map_or(0.0, |s| {
            let p = s.count(servers) as f64 / servers.max(1) as f64
                * (s.duration_ns as f64 / s.interval_ns as f64);
            p * (1.0 - 1.0 / s.factor)
        });
        let stalled = match (&self.stalls, &self.stall_schedule) {
            (Some(s), _) => s.stalled_fraction(),
            (None, Some(s)) => s.stalled_fraction(servers, window),
            (None, None) => 0.0,
        };
        mean_speed * (1.0 - slow) * (1.0 - stalled)
    }
}

impl Slowdown {
    fn count_is_zero(&self) -> bool {
        self.fraction == 0.0 || self.factor == 1.0
    }
}

/// The materialized server model of one replay.
#[derive(Debug, Clone)]
pub struct ServerModel {
    speed: Vec<f64>,
    slow: Option<Slowdown>,
    count: usize,
    servers: usize,
    words: usize,
    /// Bitset of slowed servers per window, windows 0..len.
    windows: Vec<u64>,
    rng: Rng,
    /// Random stalls: (mean gap ns, duration ns), per server its materialized (start, end) intervals and stream.
    stall: Option<(f64, u64)>,
    /// Scheduled stalls: per server its (start, end) intervals, sorted (None = no schedule).
    fixed: Option<Vec<Vec<(u64, u64)>>>,
    stalls: Vec<Vec<(u64, u64)>>,
    stall_rng: Vec<Rng>,
    seed: u64,
}

impl ServerModel {
    pub fn new(
        cfg: &ServerModelConfig,
        servers: usize,
        seed: u64,
    ) -> Result<ServerModel, SimError> {
        cfg.validate(servers)?;
        let slow = cfg.slowdown.clone().filter(|s| !s.count_is_zero());
        Ok(ServerModel {
            speed: if cfg.speeds.is_empty() {
                vec![1.0; servers]
            } else {
                cfg.speeds.clone()
            },
            count: slow.as_ref().map_or(0, |s| s.count(servers)),
            slow,
            servers,
            words: servers.div_ceil(64),
            windows: Vec::new(),
            rng: Rng::new(seed, STREAM_SLOWDOWN),
            stall: cfg
                .stalls
                .as_ref()
                .filter(|s| !s.is_off())
                .map(|s| (1e9 / s.rate_per_s, s.duration_ns)),
            fixed: cfg
                .stall_schedule
                .as_ref()
                .filter(|s| !s.is_empty())
                .map(|s| s.per_server(servers)),
            stalls: Vec::new(),
            stall_rng: Vec::new(),
            seed,
        })
    }

    /// Whether any server stalls (at random or on the schedule).
    fn stalls_on(&self) -> bool {
        self.stall.is_some() || self.fixed.is_some()
    }

    /// The stall of server `s` that ends after `t` (materializing the random schedule up to it): (start, end);
    /// (u64::MAX, u64::MAX) when the explicit schedule has none.
    fn stall_after(&mut self, s: usize, t: u64) -> (u64, u64) {
        if let Some(fixed) = &self.fixed {
            let iv = &fixed[s];
            return iv
                .get(iv.partition_point(|&(_, e)| e <= t))
                .copied()
                .unwrap_or((u64::MAX, u64::MAX));
        }
        let (gap, dur) = self.stall.expect("stalls on");
        if self.stalls.is_empty() {
            self.stalls = vec![Vec::new(); self.servers];
            self.stall_rng = (0..self.servers)
                .map(|i| Rng::new(self.seed, STREAM_STALL_BASE + i as u64))
                .collect();
        }
        let iv = &mut self.stalls[s];
        while iv.last().is_none_or(|&(_, e)| e <= t) {
            let from = iv.last().map_or(0, |&(_, e)| e);
            let a = from + self.stall_rng[s].exp(gap).round() as u64;
            iv.push((a, a + dur));
        }
        iv[iv.partition_point(|&(_, e)| e <= t)]
    }

    /// Whether server `s` is slowed in window `k` (materializes windows up to k).
    pub fn slowed_in(&mut self, s: usize, k: u64) -> bool {
        let k = k as usize;
        while self.windows.len() < (k + 1) * self.words {
            // Floyd's sampling of `count` distinct servers out of `servers`.
            let base = self.windows.len();
            self.windows.resize(base + self.words, 0);
            let n = self.servers as u64;
            for j in n - self.count as u64..n {
                let t = self.rng.below(j + 1) as usize;
                let pick = if self.windows[base + t / 64] & (1 << (t % 64)) != 0 {
                    j as usize
                } else {
                    t
                };
                self.windows[base + pick / 64] |= 1 << (pick % 64);
            }
        }
        self.windows[k * self.words + s / 64] & (1 << (s % 64)) != 0
    }

    /// Speed of server `s` at time `t` and the time at which it next changes (u64::MAX = never).
    pub fn speed_at(&mut self, s: usize, t: u64) -> (f64, u64) {
        let (v, until) = self.slowdown_speed_at(s, t);
        if !self.stalls_on() {
            return (v, until);
        }
        let (a, e) = self.stall_after(s, t);
        if t >= a {
            (0.0, e.min(until))
        } else {
            (v, a.min(until))
        }
    }

    fn slowdown_speed_at(&mut self, s: usize, t: u64) -> (f64, u64) {
        let base = self.speed[s];
        let Some(sl) = self.slow.clone() else {
            return (base, u64::MAX);
        };
        let k = t / sl.interval_ns;
        let w0 = k * sl.interval_ns;
        if t < w0 + sl.duration_ns && self.slowed_in(s, k) {
            (base / sl.factor, w0 + sl.duration_ns)
        } else {
            (base, w0 + sl.interval_ns)
        }
    }

    /// When an op of `demand` ns (at speed 1) started at `start` on server `s` finishes.
    pub fn end(&mut self, s: usize, start: u64, demand: u64) -> u64 {
        if self.slow.is_none() && !self.stalls_on() {
            let v = self.speed[s];
            return if v == 1.0 {
                start + demand
            } else {
                start + (demand as f64 / v).round() as u64
            };
        }
        let mut t = start;
        let mut left = demand as f64;
        loop {
            let (v, until) = self.speed_at(s, t);
            let room = (until - t) as f64 * v;
            if left <= room || until == u64::MAX {
                return t + (left / v).round() as u64;
            }
            left -= room;
            t = until;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_speed_scales_service_time() {
        let cfg = ServerModelConfig {
            speeds: vec![1.0, 0.5, 2.0],
            slowdown: None,
            stalls: None,
            stall_schedule: None,
        };
        let mut m = ServerModel::new(&cfg, 3, 1).unwrap();
        assert_eq!(m.end(0, 100, 1000), 1100);
        assert_eq!(m.end(1, 100, 1000), 2100);
        assert_eq!(m.end(2, 100, 1000), 600);
        assert!((cfg.capacity_factor(3) - 3.5 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn an_op_straddling_a_slowdown_is_served_partly_at_each_speed() {
        // Every server slowed 2× for the first 5 ms of every 10 ms window.
        let cfg = ServerModelConfig {
            speeds: vec![],
            slowdown: Some(Slowdown {
                interval_ns: 10_000_000,
                fraction: 1.0,
                factor: 2.0,
                duration_ns: 5_000_000,
            }),
            stalls: None,
            stall_schedule: None,
        };
        let mut m = ServerModel::new(&cfg, 2, 1).unwrap();
        // 4 ms of work from t = 0: 5 ms at half speed = 2.5 ms of work, then 1.5 ms at full speed → 6.5 ms.
        assert_eq!(m.end(0, 0, 4_000_000), 6_500_000);
        // 1 ms of work from t = 7 ms (not slowed until 10 ms): 8 ms.
        assert_eq!(m.end(1, 7_000_000, 1_000_000), 8_000_000);
        // 6 ms of work from 8 ms: 2 ms full (2 ms work), 5 ms slowed (2.5 ms), 1.5 ms full → 16.5 ms.
        assert_eq!(m.end(1, 8_000_000, 6_000_000), 16_500_000);
        // Capacity: half the time at half speed → 0.75.
        assert!((cfg.capacity_factor(2) - 0.75).abs() < 1e-12);
    }

    #[test]
    fn slowed_subsets_have_the_right_size_and_do_not_depend_on_query_order() {
        let cfg = ServerModelConfig {
            speeds: vec![],
            slowdown: Some(Slowdown {
                interval_ns: 1000,
                fraction: 0.25,
                factor: 4.0,
                duration_ns: 1000,
            }),
            stalls: None,
            stall_schedule: None,
        };
        let mut a = ServerModel::new(&cfg, 130, 7).unwrap();
        let mut b = ServerModel::new(&cfg, 130, 7).unwrap();
        let late = b.slowed_in(5, 40);
        let mut seen = vec![0u32; 130];
        for k in 0..50 {
            let n = (0..130)
                .filter(|&s| a.slowed_in(s, k))
                .inspect(|&s| seen[s] += 1)
                .count();
            assert_eq!(n, 33); // round(0.25 × 130) = 32.5 → 33
        }
        assert_eq!(a.slowed_in(5, 40), late);
        // Subsets vary across windows: over 50 windows more than half of the servers were slowed at least once.
        assert!(seen.iter().filter(|&&c| c > 0).count() > 65);
    }

    #[test]
    fn slow_servers_shorthand_and_bad_input() {
        let v = ServerModelConfig::slow_servers(8, 2, 4.0).unwrap();
        assert_eq!(v, vec![0.25, 1.0, 1.0, 1.0, 0.25, 1.0, 1.0, 1.0]);
        let e = ServerModelConfig::slow_servers(8, 9, 4.0).unwrap_err();
        assert!(e.to_string().contains("'slow_servers'"), "{e}");
        let e = ServerModelConfig {
            speeds: vec![1.0, 0.0],
            slowdown: None,
            stalls: None,
            stall_schedule: None,
        }
        .validate(2)
        .unwrap_err();
        assert!(e.to_string().contains("'server_speeds[1]'"), "{e}");
        let e = ServerModelConfig {
            speeds: vec![1.0],
            slowdown: None,
            stalls: None,
            stall_schedule: None,
        }
        .validate(2)
        .unwrap_err();
        assert!(e.to_string().contains("'server_speeds'"), "{e}");
        let e = Slowdown {
            interval_ns: 10,
            fraction: 0.5,
            factor: 2.0,
            duration_ns: 11,
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("'slowdown_duration_ns'"), "{e}");
    }

    #[test]
    fn a_stall_pauses_the_op_in_service() {
        // One server, 1 stall/s of 10 ms: the first stall starts at a (drawn), ends at a + 10 ms. An op of 4 ms
        // started 2 ms before a does 2 ms, waits out the stall, does 2 ms more: ends at a + 12 ms.
        let cfg = ServerModelConfig {
            stalls: Some(Stalls {
                rate_per_s: 1.0,
                duration_ns: 10_000_000,
            }),
            ..ServerModelConfig::default()
        };
        assert!(!cfg.is_uniform());
        let mut m = ServerModel::new(&cfg, 1, 7).unwrap();
        let (a, e) = m.stall_after(0, 0);
        assert_eq!(e - a, 10_000_000);
        assert!(a > 2_000_000);
        assert_eq!(m.end(0, a - 2_000_000, 4_000_000), a + 12_000_000);
        // An op started inside the stall starts its work at the stall's end.
        assert_eq!(m.end(0, a + 1, 1_000_000), e + 1_000_000);
        // Between stalls: full speed.
        let (a2, _) = m.stall_after(0, e);
        assert!(a2 >= e);
        assert_eq!(m.end(0, e, (a2 - e).min(1_000)), e + (a2 - e).min(1_000));
        // Capacity: stalled fraction 0.01 / (1 + 0.01).
        assert!((cfg.capacity_factor(1) - (1.0 - 0.01 / 1.01)).abs() < 1e-12);
        let bad = Stalls {
            rate_per_s: -1.0,
            duration_ns: 1,
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn a_scheduled_stall_pauses_only_its_server() {
        use crate::stall_schedule::{StallInterval, StallSchedule};
        // Server 1 stalled [10 ms, 30 ms) and [40 ms, 45 ms); server 0 never.
        let iv = |server, a: u64, b: u64| StallInterval {
            server,
            start_ns: a * 1_000_000,
            end_ns: b * 1_000_000,
        };
        let cfg = ServerModelConfig {
            stall_schedule: Some(StallSchedule::new(vec![iv(1, 40, 45), iv(1, 10, 30)])),
            ..ServerModelConfig::default()
        };
        assert!(!cfg.is_uniform());
        let mut m = ServerModel::new(&cfg, 2, 7).unwrap();
        // 4 ms from 8 ms: 2 ms, the stall, 2 ms → 32 ms; from inside it (20 ms): 30 + 4.
        assert_eq!(m.end(1, 8_000_000, 4_000_000), 32_000_000);
        assert_eq!(m.end(1, 20_000_000, 4_000_000), 34_000_000);
        // 12 ms from 30 ms: 10 ms to 40, the second stall, 2 ms → 47 ms; after the last one: no stall.
        assert_eq!(m.end(1, 30_000_000, 12_000_000), 47_000_000);
        assert_eq!(m.end(1, 45_000_000, 1_000_000), 46_000_000);
        // Server 0 is unaffected.
        assert_eq!(m.end(0, 8_000_000, 4_000_000), 12_000_000);
        // Capacity: 25 ms stalled of 2 × 45 ms (the schedule's span), or of 2 × 100 ms over [0, 100 ms).
        assert!((cfg.capacity_factor(2) - (1.0 - 25.0 / 90.0)).abs() < 1e-12);
        assert!((cfg.capacity_factor_over(2, Some((0, 100_000_000))) - 0.875).abs() < 1e-12);
        // Not with random stalls; a bad entry is named.
        let both = ServerModelConfig {
            stalls: Some(Stalls {
                rate_per_s: 1.0,
                duration_ns: 1,
            }),
            ..cfg.clone()
        };
        let e = both.validate(2).unwrap_err();
        assert!(e.to_string().contains("'stall_schedule'"), "{e}");
        let e = ServerModel::new(&cfg, 1, 7).unwrap_err();
        assert!(
            e.to_string().contains("'stall_schedule[0].server' = 1"),
            "{e}"
        );
    }
}
