//! The cluster: N servers × `slots` parallel service slots, a Murmur3-style token ring with RF consecutive
//! replicas (optional vnodes), one-way network latency, M clients.
use crate::error::{check_range, SimError};
use crate::hash::murmur3_x64_128;

/// Shape of the cluster. Time is integer nanoseconds throughout the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    pub servers: u32,
    /// Parallel service slots per server (Rein: 8, BRB: 4); at most 64.
    pub slots: u32,
    pub replication: u32,
    /// Tokens per server; 0 or 1 = one evenly spaced token per server (balanced ownership).
    pub vnodes: u32,
    /// Mean service rate of one slot, ops/s (Rein 3750, BRB 3500): the default mean demand is 1/service_rate.
    pub service_rate: f64,
    /// One-way network latency client ↔ server, ns.
    pub net_latency_ns: u64,
    pub clients: u32,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            servers: 128,
            slots: 8,
            replication: 3,
            vnodes: 1,
            service_rate: 3750.0,
            net_latency_ns: 50_000,
            clients: 128,
        }
    }
}

impl ClusterConfig {
    pub fn validate(&self) -> Result<(), SimError> {
        check_range(
            "servers",
            self.servers as f64,
            1.0,
            1_000_000.0,
            "1..=1000000",
        )?;
        check_range("slots", self.slots as f64, 1.0, 64.0, "1..=64")?;
        if self.replication < 1 || self.replication > self.servers.min(255) {
            return Err(SimError::param(
                "replication",
                self.replication,
                "1..=min(servers, 255)",
            ));
        }
        check_range("vnodes", self.vnodes as f64, 0.0, 4096.0, "0..=4096")?;
        if !(self.service_rate.is_finite() && self.service_rate > 0.0) {
            return Err(SimError::param(
                "service_rate",
                self.service_rate,
                "> 0 ops/s",
            ));
        }
        check_range(
            "net_latency_ns",
            self.net_latency_ns as f64,
            0.0,
            1e12,
            "0..=1e12 ns",
        )?;
        check_range(
            "clients",
            self.clients as f64,
            1.0,
            1_000_000.0,
            "1..=1000000",
        )?;
        Ok(())
    }

    /// Total service capacity in ops/s at the default mean demand.
    pub fn capacity_ops(&self) -> f64 {
        self.servers as f64 * self.slots as f64 * self.service_rate
    }
}

/// A validated cluster with its token ring: ring position `g` (a replica group) owns the keys with tokens in
/// (token[g-1], token[g]]; its replicas are the RF distinct servers met walking the ring clockwise from `g`.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub config: ClusterConfig,
    tokens: Vec<i64>,
    replicas: Vec<u32>,
}

impl Cluster {
    pub fn new(config: ClusterConfig) -> Result<Self, SimError> {
        config.validate()?;
        let n = config.servers as usize;
        let mut ring: Vec<(i64, u32)> = Vec::new();
        if config.vnodes <= 1 {
            // Evenly spaced initial tokens, as an operator assigns them without vnodes.
            let step = (u64::MAX / n as u64).max(1);
            for s in 0..n {
                ring.push((
                    i64::MIN.wrapping_add((step.wrapping_mul(s as u64)) as i64),
                    s as u32,
                ));
            }
        } else {
            for s in 0..n {
                for v in 0..config.vnodes {
                    let name = format!("server-{s}-vnode-{v}");
                    ring.push((murmur3_x64_128(name.as_bytes(), 0).0 as i64, s as u32));
                }
            }
        }
        ring.sort_unstable();
        ring.dedup_by_key(|e| e.0);
        let rf = config.replication as usize;
        let mut replicas = Vec::with_capacity(ring.len() * rf);
        for g in 0..ring.len() {
            let start = replicas.len();
            let mut i = g;
            while replicas.len() - start < rf {
                let s = ring[i].1;
                if !replicas[start..].contains(&s) {
                    replicas.push(s);
                }
                i = (i + 1) % ring.len();
            }
        }
        Ok(Cluster {
            config,
            tokens: ring.iter().map(|e| e.0).collect(),
            replicas,
        })
    }

    /// Number of replica groups (ring positions).
    pub fn groups(&self) -> usize {
        self.tokens.len()
    }

    /// The replica group owning `token`: the first ring token ≥ it, wrapping around.
    #[inline]
    pub fn group_of(&self, token: i64) -> u32 {
        let p = self.tokens.partition_point(|&t| t < token);
        (if p == self.tokens.len() { 0 } else { p }) as u32
    }

    /// The RF servers of a replica group, primary first.
    #[inline]
    pub fn replicas(&self, group: u32) -> &[u32] {
        let rf = self.config.replication as usize;
        &self.replicas[group as usize * rf..group as usize * rf + rf]
    }

    /// Flat replica table (groups × RF), for the Python reference model.
    pub fn replica_table(&self) -> &[u32] {
        &self.replicas
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_groups_and_replicas_are_consecutive_distinct_servers() {
        let c = Cluster::new(ClusterConfig {
            servers: 4,
            replication: 3,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.groups(), 4);
        assert_eq!(c.replicas(0), &[0, 1, 2]);
        assert_eq!(c.replicas(3), &[3, 0, 1]);
        // token exactly at a ring token belongs to that position; just above it to the next one.
        assert_eq!(c.group_of(i64::MIN), 0);
        assert_eq!(c.group_of(i64::MIN + 1), 1);
        assert_eq!(c.group_of(i64::MAX), 0);
    }

    #[test]
    fn vnodes_replicas_distinct() {
        let c = Cluster::new(ClusterConfig {
            servers: 5,
            replication: 3,
            vnodes: 8,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.groups(), 40);
        for g in 0..c.groups() as u32 {
            let r = c.replicas(g);
            assert!(r[0] != r[1] && r[1] != r[2] && r[0] != r[2]);
        }
    }

    #[test]
    fn bad_params_are_named() {
        let e = Cluster::new(ClusterConfig {
            slots: 0,
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("'slots'"), "{e}");
        let e = Cluster::new(ClusterConfig {
            servers: 2,
            replication: 3,
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("'replication'"), "{e}");
    }
}
