//! Linear service profile of a memcached query of `k` keys: processing P_S = a + b·k and network N_S = c + d·k (µs).

/// `P_S(k) = a + b·k` at the server and `N_S(k) = c + d·k` on the wire, both in microseconds.
///
/// The network constant `c` is split evenly between the request leg (N') and the response leg (N''); the
/// per-key term `d·k` belongs to the response leg (values travel back).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServiceProfile {
    pub a: f64,
    pub b: f64,
    pub c: f64,
    pub d: f64,
}

impl ServiceProfile {
    /// The profile measured in the Chisel paper (ICAC'19, §V-A): P_S = 3.3 + 0.6K, N_S = 85.0 + 6.5K µs.
    pub const PAPER: ServiceProfile = ServiceProfile {
        a: 3.3,
        b: 0.6,
        c: 85.0,
        d: 6.5,
    };

    /// Server processing time of a query of `k` keys (µs).
    pub fn processing_us(&self, k: u32) -> f64 {
        self.a + self.b * f64::from(k)
    }

    /// Request leg of the network time (client → server), independent of `k`.
    pub fn net_out_us(&self) -> f64 {
        self.c / 2.0
    }

    /// Response leg of the network time (server → client) for `k` values.
    pub fn net_back_us(&self, k: u32) -> f64 {
        self.c / 2.0 + self.d * f64::from(k)
    }

    /// Whole network time N_S(k).
    pub fn network_us(&self, k: u32) -> f64 {
        self.c + self.d * f64::from(k)
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        for (name, v) in [("a", self.a), ("b", self.b), ("c", self.c), ("d", self.d)] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!(
                    "profile coefficient {name} must be finite and >= 0, got {v}"
                ));
            }
        }
        Ok(())
    }
}

impl Default for ServiceProfile {
    fn default() -> Self {
        Self::PAPER
    }
}

#[cfg(test)]
mod tests {
    use super::ServiceProfile;

    #[test]
    fn paper_profile_values() {
        let p = ServiceProfile::PAPER;
        assert!((p.processing_us(100) - 63.3).abs() < 1e-9);
        assert!((p.network_us(100) - 735.0).abs() < 1e-9);
        assert!((p.net_out_us() + p.net_back_us(100) - 735.0).abs() < 1e-9);
    }

    #[test]
    fn rejects_negative() {
        let p = ServiceProfile {
            a: -1.0,
            ..ServiceProfile::PAPER
        };
        assert!(p.validate().is_err());
    }
}
