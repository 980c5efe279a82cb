//! Size-aware service demand: per-op mean demand = t0 + value_size / bandwidth, and the distribution
//! the actual demand is drawn from around that mean.
//!
//! Defaults are relative to the cluster's service rate so that they behave at any speed: a 1 KB value costs the
//! base service time 1/service_rate and a 512 KB value 32× that (Héron Fig. 7), i.e.
//! bandwidth = (512 KiB − 1 KiB) / (31 / service_rate) and t0 = 1/service_rate − 1 KiB / bandwidth.
use crate::error::{check_range, SimError};
use crate::rng::Rng;

/// Reference small value (1 KiB) and large value (512 KiB) of the default calibration.
pub const SMALL_REF_BYTES: f64 = 1024.0;
pub const LARGE_REF_BYTES: f64 = 512.0 * 1024.0;
/// A 512 KiB value costs this many times a 1 KiB value by default (Héron Fig. 7).
pub const LARGE_REF_RATIO: f64 = 32.0;

/// Mean demand as an affine function of the value size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DemandModel {
    /// Fixed cost per op, seconds.
    pub t0_s: f64,
    /// Bytes served per second by one slot.
    pub bandwidth_bps: f64,
}

impl DemandModel {
    /// The default calibration for a slot serving `service_rate` 1 KiB ops/s.
    pub fn for_service_rate(service_rate: f64) -> DemandModel {
        let base = 1.0 / service_rate;
        let bandwidth_bps = (LARGE_REF_BYTES - SMALL_REF_BYTES) / ((LARGE_REF_RATIO - 1.0) * base);
        DemandModel {
            t0_s: base - SMALL_REF_BYTES / bandwidth_bps,
            bandwidth_bps,
        }
    }

    pub fn validate(&self) -> Result<(), SimError> {
        check_range("t0_s", self.t0_s, 0.0, 1e6, "[0, 1e6] s")?;
        if !(self.bandwidth_bps.is_finite() && self.bandwidth_bps > 0.0) {
            return Err(SimError::param(
                "bandwidth_bps",
                self.bandwidth_bps,
                "> 0 bytes/s",
            ));
        }
        Ok(())
    }

    /// Mean demand (s) of an op reading a value of `bytes`.
    #[inline]
    pub fn mean_s(&self, bytes: f64) -> f64 {
        self.t0_s + bytes / self.bandwidth_bps
    }
}

/// Distribution of an op's demand around its mean.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum DemandDist {
    /// Exponential (the default).
    #[default]
    Exponential,
    /// Exactly the mean (no service-time noise).
    Deterministic,
    /// Lognormal with the given shape σ and the op's mean: μ = ln(mean) − σ²/2.
    Lognormal { sigma: f64 },
}

/// Names accepted by [`DemandDist::from_name`].
pub const DEMAND_DISTS: [&str; 3] = ["exponential", "deterministic", "lognormal"];

impl DemandDist {
    /// `sigma` is used by lognormal only.
    pub fn from_name(name: &str, sigma: f64) -> Result<DemandDist, SimError> {
        Ok(match name {
            "exponential" => DemandDist::Exponential,
            "deterministic" => DemandDist::Deterministic,
            "lognormal" => {
                check_range(
                    "demand_sigma",
                    sigma,
                    1e-6,
                    10.0,
                    "(0, 10] (lognormal shape)",
                )?;
                DemandDist::Lognormal { sigma }
            }
            other => {
                return Err(SimError::param(
                    "demand_dist",
                    other,
                    &format!("one of {DEMAND_DISTS:?}"),
                ))
            }
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            DemandDist::Exponential => "exponential",
            DemandDist::Deterministic => "deterministic",
            DemandDist::Lognormal { .. } => "lognormal",
        }
    }

    /// One demand (s) with the given mean. Exponential draws with `Rng::exp` (as [`Workload::materialize`](crate::Workload::materialize) does);
    /// deterministic draws nothing.
    #[inline]
    pub fn sample(&self, rng: &mut Rng, mean: f64) -> f64 {
        match *self {
            DemandDist::Exponential => rng.exp(mean),
            DemandDist::Deterministic => mean,
            DemandDist::Lognormal { sigma } => {
                if mean <= 0.0 {
                    return 0.0;
                }
                (mean.ln() - 0.5 * sigma * sigma + sigma * rng.normal()).exp()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_calibration_512k_costs_32_times_1k() {
        let m = DemandModel::for_service_rate(4000.0);
        // 1 KiB → 250 µs exactly; 512 KiB → 8 ms.
        assert!((m.mean_s(1024.0) - 250e-6).abs() < 1e-15);
        assert!((m.mean_s(524_288.0) - 8e-3).abs() < 1e-12);
        // bandwidth = 523264 B / 7.75 ms = 67_517_935.48 B/s; t0 = 250 µs − 1024 / bw.
        assert!((m.bandwidth_bps - 523_264.0 / 7.75e-3).abs() < 1e-6);
        assert!(m.t0_s > 0.0 && m.t0_s < 250e-6);
    }

    #[test]
    fn distributions_keep_the_mean() {
        let mut r = Rng::new(3, 1);
        let mut r2 = Rng::new(3, 1);
        // exponential is Rng::exp, draw for draw.
        assert_eq!(DemandDist::Exponential.sample(&mut r, 2.0), r2.exp(2.0));
        assert_eq!(DemandDist::Deterministic.sample(&mut r, 2.5), 2.5);
        let ln = DemandDist::from_name("lognormal", 0.5).unwrap();
        let n = 200_000;
        let m: f64 = (0..n).map(|_| ln.sample(&mut r, 2.0)).sum::<f64>() / n as f64;
        assert!((m - 2.0).abs() < 0.02, "mean {m}");
        let e = DemandDist::from_name("gamma", 1.0).unwrap_err();
        assert!(e.to_string().contains("'demand_dist'"), "{e}");
    }
}
