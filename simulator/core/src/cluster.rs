//! The cluster: N servers × `slots` parallel service slots, a Murmur3-style token ring with RF consecutive
//! replicas (optional vnodes) or an explicit Cassandra ring ([`crate::ring`]), one-way network latency, M clients,
//! and optionally the client ↔ coordinator round trip as a measured distribution ([`Cluster::with_client_rtt`]).
use std::sync::Arc;

use crate::error::{check_range, SimError};
use crate::hash::murmur3_x64_128;
use crate::ring::{Placement, Ring};

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
/// (token[g-1], token[g]]; its replicas are the RF distinct servers met walking the ring clockwise from `g`
/// (with an explicit ring: the range's replicas in the local datacenter, placed as Cassandra places them).
#[derive(Debug, Clone)]
pub struct Cluster {
    pub config: ClusterConfig,
    tokens: Vec<i64>,
    replicas: Vec<u32>,
    placement: Option<Arc<Placement>>,
    client_rtt: Option<Arc<[u64]>>,
    client_key_ns: u64,
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
            placement: None,
            client_rtt: None,
            client_key_ns: 0,
        })
    }

    /// A cluster on an explicit ring: its servers are the local datacenter's nodes (`servers` must be their
    /// number), its replica groups the ring's token ranges, each read from the range's replicas in the local
    /// datacenter (`replication` must be the local datacenter's RF).
    pub fn with_ring(config: ClusterConfig, ring: &Ring) -> Result<Self, SimError> {
        Self::with_placement(config, Arc::new(ring.place()?))
    }

    /// [`Cluster::with_ring`] of a ring already placed.
    pub fn with_placement(
        config: ClusterConfig,
        placement: Arc<Placement>,
    ) -> Result<Self, SimError> {
        let p = &placement;
        let (local, rf) = (p.servers.len(), p.local_rf);
        if config.servers as usize != local {
            return Err(SimError::param(
                "servers",
                config.servers,
                &format!("{local}: the ring's nodes in its local datacenter"),
            ));
        }
        if config.replication as usize != rf {
            return Err(SimError::param(
                "replication",
                config.replication,
                &format!("{rf}: the ring's replication factor in its local datacenter"),
            ));
        }
        if config.vnodes > 1 {
            return Err(SimError::param(
                "vnodes",
                config.vnodes,
                "0 or 1 with a ring (the ring gives each node's tokens)",
            ));
        }
        config.validate()?;
        Ok(Cluster {
            config,
            tokens: p.tokens.clone(),
            replicas: p.read.clone(),
            placement: Some(placement),
            client_rtt: None,
            client_key_ns: 0,
        })
    }

    /// The cluster with the client ↔ coordinator round trip replayed as a measured distribution: quantiles in
    /// ns at the equally spaced probabilities 0, 1/(n−1), …, 1 (n ≥ 2, non-decreasing; [`crate::client_rtt`]).
    /// Each request's reported latency is then the engine's latency less its two constant client hops
    /// (2 · `net_latency_ns`) plus one draw of the round trip. `None`: the constant hops (the default).
    pub fn with_client_rtt(mut self, quantiles_ns: Option<Arc<[u64]>>) -> Result<Self, SimError> {
        if let Some(q) = &quantiles_ns {
            crate::client_rtt::validate(q)?;
        }
        self.client_rtt = quantiles_ns;
        Ok(self)
    }

    /// The round trip's quantiles, ns ([`Cluster::with_client_rtt`]); None: the constant client hops.
    pub fn client_rtt(&self) -> Option<&Arc<[u64]>> {
        self.client_rtt.as_ref()
    }

    /// The cluster with a per-partition client/coordinator cost: each request's reported latency grows by
    /// (keys − 1) × `ns`, keys being its ops (the driver decoding, the coordinator handling and merging each
    /// partition beyond the first; a one-key read is the baseline the service time already includes). Like the
    /// client round trip it is outside the coordinator: no speculative-retry sample, read timeout or selector
    /// sees it. 0 (the default): none. At most 1e12 ns; the error names `client_key_ns`.
    pub fn with_client_key(mut self, ns: u64) -> Result<Self, SimError> {
        if ns > 1_000_000_000_000 {
            return Err(SimError::param("client_key_ns", ns, "0..=1e12 ns"));
        }
        self.client_key_ns = ns;
        Ok(self)
    }

    /// The per-partition client/coordinator cost, ns ([`Cluster::with_client_key`]); 0: none.
    pub fn client_key_ns(&self) -> u64 {
        self.client_key_ns
    }

    /// The explicit ring's placement (None: the evenly spaced or vnodes ring).
    pub fn placement(&self) -> Option<&Placement> {
        self.placement.as_deref()
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
    fn a_ring_cluster_reads_from_the_local_replicas() {
        use crate::ring::{RingNode, Strategy};
        let node = |dc: &str, rack: &str, tokens: &[i64]| RingNode {
            dc: dc.into(),
            rack: rack.into(),
            tokens: tokens.to_vec(),
        };
        // dc1: n0 r1, n1 r2, n2 r1; dc2: n3. ring: -40 n3, -30 n0, -10 n1, 5 n3, 20 n2, 60 n0
        let ring = Ring {
            nodes: vec![
                node("dc1", "r1", &[-30, 60]),
                node("dc1", "r2", &[-10]),
                node("dc1", "r1", &[20]),
                node("dc2", "r1", &[-40, 5]),
            ],
            strategy: Strategy::NetworkTopology {
                replication: vec![("dc1".into(), 2), ("dc2".into(), 1)],
            },
            local_dc: "dc1".into(),
        };
        let cfg = ClusterConfig {
            servers: 3,
            replication: 2,
            ..Default::default()
        };
        let c = Cluster::with_ring(cfg.clone(), &ring).unwrap();
        assert_eq!(c.groups(), 6);
        // from -40: n3, n0 (r1), n1 (r2) | from -30: n0, n1, n3 | from -10: n1 (r2), n3, n2 (r1)
        // from 5: n3, n2 (r1), n0 (r1 again: skipped), n1 (r2) | from 20: n2, n0 (skipped), n3, n1
        // from 60: n0 (r1), n3, n1 (r2)
        let reads: Vec<&[u32]> = (0..6).map(|g| c.replicas(g)).collect();
        assert_eq!(
            reads,
            vec![&[0, 1][..], &[0, 1], &[1, 2], &[2, 1], &[2, 1], &[0, 1]]
        );
        let p = c.placement().unwrap();
        assert_eq!(p.replicas_of(3), &[3, 2, 1]);
        assert_eq!(c.group_of(-40), 0);
        assert_eq!(c.group_of(6), 4);
        assert_eq!(c.group_of(61), 0);
        // servers and replication must be the local datacenter's
        let e = Cluster::with_ring(
            ClusterConfig {
                servers: 4,
                ..cfg.clone()
            },
            &ring,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("'servers'") && e.to_string().contains("valid 3"),
            "{e}"
        );
        let e = Cluster::with_ring(
            ClusterConfig {
                replication: 3,
                ..cfg.clone()
            },
            &ring,
        )
        .unwrap_err();
        assert!(e.to_string().contains("'replication'"), "{e}");
        let e = Cluster::with_ring(ClusterConfig { vnodes: 16, ..cfg }, &ring).unwrap_err();
        assert!(e.to_string().contains("'vnodes'"), "{e}");
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
