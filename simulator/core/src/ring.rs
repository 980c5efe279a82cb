//! An explicit Cassandra token ring: every node with its tokens, datacenter and rack, a keyspace's replication
//! strategy and the datacenter the clients read from. [`Ring::place`] computes, once per token range, the
//! range's replicas exactly as Cassandra's `AbstractReplicationStrategy.calculateNaturalReplicas` does:
//!
//! - A token range ends at a ring token: the range of ring token `i` holds the key tokens in
//!   (token[i−1], token[i]] (the first range wraps around from the last token). A key's range is the first ring
//!   token ≥ its token, wrapping to the first one past the last.
//! - `SimpleStrategy` (RF): walk the ring clockwise from the range's token, taking each node not taken yet,
//!   until RF nodes (datacenters and racks ignored).
//! - `NetworkTopologyStrategy` ({dc: RF}): one walk clockwise from the range's token over every node; a node of
//!   a datacenter still short of replicas is taken when its rack has no replica of that datacenter yet, or — when
//!   the datacenter has fewer racks than its RF — as one of the first RF − racks "rack repeats" met; a node is
//!   never taken twice, and a datacenter is done at min(RF, its nodes) replicas. Replicas are listed in the order
//!   they are taken (the first is the range's primary).
//!
//! The simulated servers are the nodes of the local datacenter (server `i` = its `i`-th node in the ring's node
//! order): reads at `LOCAL_*` consistency through a datacenter-aware driver reach only them, and another
//! datacenter's nodes serve nothing a replay measures. A range's read group is its replicas in the local
//! datacenter, in replica order.
use crate::error::SimError;
use std::collections::HashMap;

/// One node of the ring.
#[derive(Debug, Clone, PartialEq)]
pub struct RingNode {
    pub dc: String,
    pub rack: String,
    /// The node's tokens (Murmur3 range, any order).
    pub tokens: Vec<i64>,
}

/// A keyspace's replication strategy.
#[derive(Debug, Clone, PartialEq)]
pub enum Strategy {
    Simple {
        replication_factor: u32,
    },
    /// Per datacenter replication factors (a datacenter absent or at 0 holds no replica).
    NetworkTopology {
        replication: Vec<(String, u32)>,
    },
}

/// A ring: its nodes, the keyspace's strategy and the datacenter reads are served from.
#[derive(Debug, Clone, PartialEq)]
pub struct Ring {
    pub nodes: Vec<RingNode>,
    pub strategy: Strategy,
    pub local_dc: String,
}

/// Most tokens a node may hold (Cassandra's `num_tokens` is at most 1536 in practice).
pub const MAX_NODE_TOKENS: usize = 4096;
/// Most tokens a ring may hold.
pub const MAX_RING_TOKENS: usize = 1 << 22;
/// Most replicas a datacenter may hold (the engine's replica groups are at most 255 wide).
pub const MAX_DC_RF: u32 = 255;

/// The replicas of every token range of a [`Ring`].
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// The ring's tokens, ascending (range `i` ends at `tokens[i]`).
    pub tokens: Vec<i64>,
    /// The node owning each token.
    pub owners: Vec<u32>,
    /// Replicas per range, every datacenter (Σ over datacenters of min(RF, nodes)).
    pub width: usize,
    /// ranges × `width` node indices, in the order Cassandra takes them (primary first).
    pub replicas: Vec<u32>,
    /// The node of each simulated server: the local datacenter's nodes in the ring's node order.
    pub servers: Vec<u32>,
    /// The local datacenter's RF: replicas per read group.
    pub local_rf: usize,
    /// ranges × `local_rf` servers: each range's replicas in the local datacenter, in replica order.
    pub read: Vec<u32>,
}

impl Placement {
    /// Number of token ranges.
    pub fn ranges(&self) -> usize {
        self.tokens.len()
    }

    /// The range of a key token: the first ring token ≥ it, wrapping to 0.
    #[inline]
    pub fn range_of(&self, token: i64) -> usize {
        let p = self.tokens.partition_point(|&t| t < token);
        if p == self.tokens.len() {
            0
        } else {
            p
        }
    }

    /// The replicas (node indices, every datacenter, primary first) of range `r`.
    pub fn replicas_of(&self, r: usize) -> &[u32] {
        &self.replicas[r * self.width..(r + 1) * self.width]
    }

    /// The read group (servers of the local datacenter, replica order) of range `r`.
    pub fn read_group(&self, r: usize) -> &[u32] {
        &self.read[r * self.local_rf..(r + 1) * self.local_rf]
    }
}

fn bad(field: impl Into<String>, msg: impl Into<String>) -> SimError {
    SimError::BadRing {
        field: field.into(),
        msg: msg.into(),
    }
}

/// Replicas still to take in one datacenter during one walk (Cassandra's `DatacenterEndpoints`).
#[derive(Clone, Copy)]
struct DcFill {
    rf_left: u32,
    rack_repeats: i64,
}

impl Ring {
    /// The replicas of every token range, or a [`SimError::BadRing`] naming what is wrong.
    pub fn place(&self) -> Result<Placement, SimError> {
        let n = self.nodes.len();
        if n == 0 {
            return Err(bad("nodes", "the ring has no node"));
        }
        if n > 1_000_000 {
            return Err(bad("nodes", format!("{n} nodes: at most 1000000")));
        }
        // Datacenters and (datacenter, rack) pairs, interned in node order; a rack is a (datacenter, rack) pair:
        // one rack name in two datacenters is two racks.
        let mut dcs: Vec<String> = Vec::new();
        let mut dc_index: HashMap<&str, usize> = HashMap::new();
        let mut rack_index: HashMap<(usize, &str), usize> = HashMap::new();
        let mut dc_nodes: Vec<u32> = Vec::new();
        let mut dc_racks: Vec<i64> = Vec::new();
        let mut node_dc = Vec::with_capacity(n);
        let mut node_rack = Vec::with_capacity(n);
        let mut ring: Vec<(i64, u32)> = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let d = *dc_index.entry(node.dc.as_str()).or_insert_with(|| {
                dcs.push(node.dc.clone());
                dc_nodes.push(0);
                dc_racks.push(0);
                dcs.len() - 1
            });
            dc_nodes[d] += 1;
            let racks = rack_index.len();
            let r = *rack_index
                .entry((d, node.rack.as_str()))
                .or_insert_with(|| {
                    dc_racks[d] += 1;
                    racks
                });
            node_dc.push(d);
            node_rack.push(r);
            if node.tokens.is_empty() {
                return Err(bad(
                    format!("nodes[{i}].tokens"),
                    "a node needs at least one token",
                ));
            }
            if node.tokens.len() > MAX_NODE_TOKENS {
                return Err(bad(
                    format!("nodes[{i}].tokens"),
                    format!("{} tokens: at most {MAX_NODE_TOKENS}", node.tokens.len()),
                ));
            }
            ring.extend(node.tokens.iter().map(|&t| (t, i as u32)));
            if ring.len() > MAX_RING_TOKENS {
                return Err(bad("nodes", format!("more than {MAX_RING_TOKENS} tokens")));
            }
        }
        ring.sort_unstable();
        for w in ring.windows(2) {
            if w[0].0 == w[1].0 {
                let (a, b) = (w[0].1.min(w[1].1), w[0].1.max(w[1].1));
                let msg = if a == b {
                    format!("token {} is listed twice", w[0].0)
                } else {
                    format!("token {} is owned by nodes[{a}] and nodes[{b}]", w[0].0)
                };
                return Err(bad(format!("nodes[{b}].tokens"), msg));
            }
        }
        let Some(&local) = dc_index.get(self.local_dc.as_str()) else {
            return Err(bad(
                "local_dc",
                format!(
                    "{:?} is not the datacenter of any node (the ring's: {})",
                    self.local_dc,
                    dcs.join(", ")
                ),
            ));
        };
        // Per datacenter RF (0 = no replica there), checked against its nodes.
        let mut dc_rf = vec![0u32; dcs.len()];
        match &self.strategy {
            Strategy::Simple {
                replication_factor: rf,
            } => {
                let rf = *rf;
                if !(1..=MAX_DC_RF).contains(&rf) || rf as usize > n {
                    return Err(bad(
                        "strategy.replication_factor",
                        format!("{rf}: valid 1..=min({n} nodes, {MAX_DC_RF})"),
                    ));
                }
                if dcs.len() > 1 {
                    return Err(bad(
                        "strategy",
                        format!(
                            "SimpleStrategy places replicas regardless of datacenters, so reads at LOCAL_* \
                             consistency would find a varying number of replicas in {:?}: the ring has nodes in \
                             {} datacenters ({}); use NetworkTopologyStrategy",
                            self.local_dc,
                            dcs.len(),
                            dcs.join(", ")
                        ),
                    ));
                }
                dc_rf[local] = rf;
            }
            Strategy::NetworkTopology { replication } => {
                for (k, (dc, rf)) in replication.iter().enumerate() {
                    if replication[..k].iter().any(|(d, _)| d == dc) {
                        return Err(bad(
                            format!("strategy.replication.{dc}"),
                            "the datacenter is listed twice",
                        ));
                    }
                    let Some(&d) = dc_index.get(dc.as_str()) else {
                        return Err(bad(
                            format!("strategy.replication.{dc}"),
                            format!(
                                "no node is in datacenter {dc:?} (the ring's: {})",
                                dcs.join(", ")
                            ),
                        ));
                    };
                    if *rf > MAX_DC_RF || *rf > dc_nodes[d] {
                        return Err(bad(
                            format!("strategy.replication.{dc}"),
                            format!(
                                "RF {rf} but datacenter {dc:?} has {} nodes: valid 0..=min(its nodes, \
                                 {MAX_DC_RF})",
                                dc_nodes[d]
                            ),
                        ));
                    }
                    dc_rf[d] = *rf;
                }
                if dc_rf[local] == 0 {
                    return Err(bad(
                        format!("strategy.replication.{}", self.local_dc),
                        "the local datacenter holds no replica: reads at LOCAL_* consistency need RF ≥ 1 there",
                    ));
                }
            }
        }
        let tokens: Vec<i64> = ring.iter().map(|e| e.0).collect();
        let owners: Vec<u32> = ring.iter().map(|e| e.1).collect();
        let t = tokens.len();
        let width: usize = dc_rf
            .iter()
            .zip(&dc_nodes)
            .map(|(&rf, &nodes)| rf.min(nodes) as usize)
            .sum();
        let mut replicas: Vec<u32> = Vec::with_capacity(t * width);
        let simple = matches!(self.strategy, Strategy::Simple { .. });
        // rack_seen[rack] == walk + 1: the rack holds a replica in this walk (no clearing between walks)
        let mut rack_seen = vec![0usize; rack_index.len()];
        let mut fill = vec![
            DcFill {
                rf_left: 0,
                rack_repeats: 0
            };
            dcs.len()
        ];
        for g in 0..t {
            let start = replicas.len();
            if simple {
                let mut i = g;
                while replicas.len() - start < width {
                    let node = owners[i];
                    if !replicas[start..].contains(&node) {
                        replicas.push(node);
                    }
                    i = if i + 1 == t { 0 } else { i + 1 };
                }
                continue;
            }
            let mut to_fill = 0;
            for d in 0..dcs.len() {
                fill[d] = DcFill {
                    rf_left: dc_rf[d].min(dc_nodes[d]),
                    rack_repeats: dc_rf[d] as i64 - dc_racks[d],
                };
                if fill[d].rf_left > 0 {
                    to_fill += 1;
                }
            }
            let mut i = g;
            for _ in 0..t {
                if to_fill == 0 {
                    break;
                }
                let node = owners[i];
                i = if i + 1 == t { 0 } else { i + 1 };
                let f = &mut fill[node_dc[node as usize]];
                if f.rf_left == 0 || replicas[start..].contains(&node) {
                    continue;
                }
                let rack = node_rack[node as usize];
                if rack_seen[rack] != g + 1 {
                    rack_seen[rack] = g + 1;
                } else if f.rack_repeats > 0 {
                    f.rack_repeats -= 1;
                } else {
                    continue;
                }
                replicas.push(node);
                f.rf_left -= 1;
                if f.rf_left == 0 {
                    to_fill -= 1;
                }
            }
            debug_assert_eq!(replicas.len() - start, width);
        }
        let mut server_of = vec![u32::MAX; n];
        let mut servers = Vec::new();
        for (i, &d) in node_dc.iter().enumerate() {
            if d == local {
                server_of[i] = servers.len() as u32;
                servers.push(i as u32);
            }
        }
        let local_rf = dc_rf[local] as usize;
        let mut read = Vec::with_capacity(t * local_rf);
        for g in 0..t {
            let before = read.len();
            read.extend(
                replicas[g * width..(g + 1) * width]
                    .iter()
                    .map(|&node| server_of[node as usize])
                    .filter(|&s| s != u32::MAX),
            );
            debug_assert_eq!(read.len() - before, local_rf);
        }
        Ok(Placement {
            tokens,
            owners,
            width,
            replicas,
            servers,
            local_rf,
            read,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(dc: &str, rack: &str, tokens: &[i64]) -> RingNode {
        RingNode {
            dc: dc.into(),
            rack: rack.into(),
            tokens: tokens.to_vec(),
        }
    }

    fn simple(nodes: Vec<RingNode>, rf: u32) -> Ring {
        Ring {
            nodes,
            strategy: Strategy::Simple {
                replication_factor: rf,
            },
            local_dc: "dc1".into(),
        }
    }

    fn nts(nodes: Vec<RingNode>, rf: &[(&str, u32)], local: &str) -> Ring {
        Ring {
            nodes,
            strategy: Strategy::NetworkTopology {
                replication: rf.iter().map(|&(d, r)| (d.to_string(), r)).collect(),
            },
            local_dc: local.into(),
        }
    }

    fn all_replicas(p: &Placement) -> Vec<Vec<u32>> {
        (0..p.ranges()).map(|r| p.replicas_of(r).to_vec()).collect()
    }

    #[test]
    fn simple_strategy_three_nodes_two_tokens_rf2() {
        // ring: -50 A, -20 B, 0 C, 10 A, 40 C, 70 B
        let ring = simple(
            vec![
                node("dc1", "r1", &[10, -50]),
                node("dc1", "r1", &[-20, 70]),
                node("dc1", "r1", &[0, 40]),
            ],
            2,
        );
        let p = ring.place().unwrap();
        assert_eq!(p.tokens, vec![-50, -20, 0, 10, 40, 70]);
        assert_eq!(p.owners, vec![0, 1, 2, 0, 2, 1]);
        assert_eq!(
            all_replicas(&p),
            vec![
                vec![0, 1], // -50 A, -20 B
                vec![1, 2], // -20 B, 0 C
                vec![2, 0], // 0 C, 10 A
                vec![0, 2], // 10 A, 40 C
                vec![2, 1], // 40 C, 70 B
                vec![1, 0], // 70 B, wraps to -50 A
            ]
        );
        // one datacenter: the read groups are the replicas, the servers the nodes
        assert_eq!(p.servers, vec![0, 1, 2]);
        assert_eq!(p.read, p.replicas);
        // key tokens: up to and including a ring token belong to its range; past the last one wrap to range 0
        assert_eq!(p.range_of(-50), 0);
        assert_eq!(p.range_of(-49), 1);
        assert_eq!(p.range_of(i64::MIN), 0);
        assert_eq!(p.range_of(70), 5);
        assert_eq!(p.range_of(71), 0);
        assert_eq!(p.range_of(i64::MAX), 0);
    }

    #[test]
    fn simple_strategy_skips_a_node_met_twice() {
        // ring: 1 A, 2 A, 3 B, 4 C: range 1 walks A (taken), A again (skipped), B, C
        let ring = simple(
            vec![
                node("dc1", "r", &[1, 2]),
                node("dc1", "r", &[3]),
                node("dc1", "r", &[4]),
            ],
            3,
        );
        let p = ring.place().unwrap();
        assert_eq!(
            all_replicas(&p),
            vec![vec![0, 1, 2], vec![0, 1, 2], vec![1, 2, 0], vec![2, 0, 1]]
        );
    }

    #[test]
    fn nts_two_datacenters_two_racks() {
        // dc1: n0 r1, n1 r1, n2 r2, n3 r2; dc2: n4 r1, n5 r2. RF {dc1: 2, dc2: 1}.
        // ring (token node): 0 n0, 10 n4, 20 n1, 30 n2, 40 n5, 50 n3
        let ring = nts(
            vec![
                node("dc1", "r1", &[0]),
                node("dc1", "r1", &[20]),
                node("dc1", "r2", &[30]),
                node("dc1", "r2", &[50]),
                node("dc2", "r1", &[10]),
                node("dc2", "r2", &[40]),
            ],
            &[("dc1", 2), ("dc2", 1)],
            "dc1",
        );
        let p = ring.place().unwrap();
        assert_eq!(p.width, 3);
        assert_eq!(
            all_replicas(&p),
            vec![
                // from 0: n0 (dc1 r1), n4 (dc2, done), n1 (dc1 r1 again: 2 racks = RF, no repeat), n2 (dc1 r2)
                vec![0, 4, 2],
                // from 10: n4, n1 (r1), n2 (r2)
                vec![4, 1, 2],
                // from 20: n1 (r1), n2 (r2), n5 (dc2)
                vec![1, 2, 5],
                // from 30: n2 (r2), n5, n3 (r2 again: skipped), n0 (r1)
                vec![2, 5, 0],
                // from 40: n5, n3 (r2), n0 (r1)
                vec![5, 3, 0],
                // from 50: n3 (r2), n0 (r1), n4
                vec![3, 0, 4],
            ]
        );
        // servers = dc1's nodes; read groups = dc1's replicas in order
        assert_eq!(p.servers, vec![0, 1, 2, 3]);
        assert_eq!(p.local_rf, 2);
        assert_eq!(
            (0..6).map(|r| p.read_group(r).to_vec()).collect::<Vec<_>>(),
            vec![
                vec![0, 2],
                vec![1, 2],
                vec![1, 2],
                vec![2, 0],
                vec![3, 0],
                vec![3, 0]
            ]
        );
        // read from dc2: its nodes are servers 0 (n4) and 1 (n5)
        let mut dc2 = ring.clone();
        dc2.local_dc = "dc2".into();
        let p2 = dc2.place().unwrap();
        assert_eq!(p2.servers, vec![4, 5]);
        assert_eq!(p2.local_rf, 1);
        assert_eq!(p2.read, vec![0, 0, 1, 1, 1, 0]);
    }

    #[test]
    fn nts_fewer_racks_than_rf_takes_the_first_rack_repeats() {
        // one dc, racks: n0 a, n1 a, n2 a, n3 b. RF 3 → 2 racks: one rack repeat allowed.
        // ring: 0 n0, 1 n1, 2 n2, 3 n3
        let ring = nts(
            vec![
                node("dc1", "a", &[0]),
                node("dc1", "a", &[1]),
                node("dc1", "a", &[2]),
                node("dc1", "b", &[3]),
            ],
            &[("dc1", 3)],
            "dc1",
        );
        let p = ring.place().unwrap();
        assert_eq!(
            all_replicas(&p),
            vec![
                vec![0, 1, 3], // n0 (a), n1 (a repeat: the one allowed), n2 (no more repeats), n3 (b)
                vec![1, 2, 3], // n1, n2 (repeat), n3
                vec![2, 3, 0], // n2 (a), n3 (b), n0 (repeat)
                vec![3, 0, 1], // n3 (b), n0 (a), n1 (repeat)
            ]
        );
    }

    #[test]
    fn rack_names_are_per_datacenter() {
        // rack "r" in dc1 and in dc2 are different racks: dc2's node does not use up dc1's rack
        let ring = nts(
            vec![
                node("dc1", "r", &[0]),
                node("dc2", "r", &[5]),
                node("dc1", "s", &[10]),
            ],
            &[("dc1", 2), ("dc2", 1)],
            "dc1",
        );
        let p = ring.place().unwrap();
        assert_eq!(p.replicas_of(1), &[1, 2, 0]);
    }

    #[test]
    fn bad_rings_are_named() {
        let err = |r: Ring| r.place().unwrap_err().to_string();
        let two = || vec![node("dc1", "r", &[1]), node("dc1", "r", &[2])];
        assert!(err(simple(vec![], 1)).contains("'nodes'"));
        let e = err(simple(
            vec![node("dc1", "r", &[1]), node("dc1", "r", &[1])],
            1,
        ));
        assert!(
            e.contains("'nodes[1].tokens'") && e.contains("owned by nodes[0] and nodes[1]"),
            "{e}"
        );
        let e = err(simple(vec![node("dc1", "r", &[3, 3])], 1));
        assert!(e.contains("listed twice"), "{e}");
        assert!(err(simple(vec![node("dc1", "r", &[])], 1)).contains("'nodes[0].tokens'"));
        let e = err(simple(two(), 3));
        assert!(e.contains("'strategy.replication_factor'"), "{e}");
        let e = err(simple(
            vec![node("dc1", "r", &[1]), node("dc2", "r", &[2])],
            1,
        ));
        assert!(e.contains("NetworkTopologyStrategy"), "{e}");
        let e = err(nts(two(), &[("dc1", 3)], "dc1"));
        assert!(
            e.contains("'strategy.replication.dc1'") && e.contains("2 nodes"),
            "{e}"
        );
        let e = err(nts(two(), &[("dc1", 1), ("dc9", 1)], "dc1"));
        assert!(
            e.contains("'strategy.replication.dc9'") && e.contains("no node"),
            "{e}"
        );
        let e = err(nts(two(), &[("dc1", 1)], "dc2"));
        assert!(e.contains("'local_dc'"), "{e}");
        let mut r = nts(two(), &[("dc1", 1)], "dc1");
        r.nodes.push(node("dc2", "r", &[9]));
        r.local_dc = "dc2".into();
        let e = err(r);
        assert!(
            e.contains("'strategy.replication.dc2'") && e.contains("no replica"),
            "{e}"
        );
    }
}
