//! Opsets held at their clients by the replica selector (C3's rate limits, Héron's blocked large requests).
//!
//! They are retried in the order they were first held (FIFO); the ones refused again stay held, in order. Held
//! opsets are kept per replica group, each group's queue in hold order, so that a retry can visit only the
//! groups that may take one now (Héron: the groups of the servers that turned available — with an unstable
//! backlog of 10⁵ opsets, a retry per turn over the whole backlog made one replay take minutes). A retry of
//! several groups merges their queues by hold order, so the choices happen in exactly the order of one global
//! FIFO scan.
use std::collections::VecDeque;

/// One held opset: (hold sequence number, opset, time first held).
pub type Held = (u64, u32, u64);

#[derive(Debug, Clone, Default)]
pub struct HeldOpsets {
    per_group: Vec<VecDeque<Held>>,
    len: usize,
    next_seq: u64,
}

impl HeldOpsets {
    pub fn new(groups: usize) -> Self {
        HeldOpsets {
            per_group: vec![VecDeque::new(); groups],
            len: 0,
            next_seq: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Holds `opset` (of replica group `group`) from `since` on, behind every opset held so far.
    pub fn hold(&mut self, group: u32, opset: u32, since: u64) {
        self.per_group[group as usize].push_back((self.next_seq, opset, since));
        self.next_seq += 1;
        self.len += 1;
    }

    /// Takes out every held opset of `groups` (`None` = all groups) into `out`, in hold order. The caller
    /// retries them in that order and gives back the refused ones with [`HeldOpsets::put_back`] (in the same
    /// order, before taking again).
    pub fn take(&mut self, groups: Option<&[u32]>, out: &mut Vec<(u32, Held)>) {
        out.clear();
        let mut drain = |g: usize, q: &mut VecDeque<Held>| out.extend(q.drain(..).map(|h| (g as u32, h)));
        match groups {
            None => {
                for (g, q) in self.per_group.iter_mut().enumerate() {
                    drain(g, q);
                }
            }
            Some(gs) => {
                for &g in gs {
                    drain(g as usize, &mut self.per_group[g as usize]);
                }
            }
        }
        self.len -= out.len();
        out.sort_unstable_by_key(|&(_, h)| h.0);
    }

    /// Gives back a refused opset taken by [`HeldOpsets::take`]; it keeps its place in the hold order.
    pub fn put_back(&mut self, group: u32, held: Held) {
        self.per_group[group as usize].push_back(held);
        self.len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_retry_keeps_the_global_hold_order() {
        let mut h = HeldOpsets::new(3);
        // opsets 10.. held in this order over groups 0, 2, 0, 1, 2
        for (i, g) in [0u32, 2, 0, 1, 2].into_iter().enumerate() {
            h.hold(g, 10 + i as u32, 100 + i as u64);
        }
        let mut out = Vec::new();
        h.take(Some(&[2, 0]), &mut out);
        let opsets: Vec<u32> = out.iter().map(|&(_, x)| x.1).collect();
        assert_eq!(opsets, vec![10, 11, 12, 14]); // hold order, whatever the order of the groups asked
        assert_eq!(h.len(), 1);
        // 11 and 14 are refused again; then a full retry sees 11, 13, 14 in hold order
        for &(g, x) in &out {
            if x.1 == 11 || x.1 == 14 {
                h.put_back(g, x);
            }
        }
        assert_eq!(h.len(), 3);
        h.take(None, &mut out);
        let all: Vec<(u32, u32, u64)> = out.iter().map(|&(g, x)| (g, x.1, x.2)).collect();
        assert_eq!(all, vec![(2, 11, 101), (1, 13, 103), (2, 14, 104)]);
        assert!(h.is_empty());
    }
}
