//! Opsets held at their clients by the replica selector (C3's rate limits, Héron's blocked large requests).
//!
//! They are retried in the order they were first held (FIFO); the ones refused again stay held, in order. Held
//! opsets are kept per replica group, each group's queue in hold order, and a retry walks the groups it is given
//! merged by hold order (a heap over the groups' fronts), so the choices happen in exactly the order of one
//! global FIFO scan. What that buys (Héron): a retry after some servers turned available visits only their
//! groups, and stops in a group as soon as the selector says the group can take nothing more — with an unstable
//! backlog of 10⁵ opsets a global rescan per turn made one replay take minutes.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// One held opset: (hold sequence number, opset, time first held).
pub type Held = (u64, u32, u64);

#[derive(Debug, Clone, Default)]
pub struct HeldOpsets {
    per_group: Vec<VecDeque<Held>>,
    len: usize,
    next_seq: u64,
    /// The retry in progress: groups by the hold number of their front, groups closed for this retry, and the
    /// opsets refused again per group (given back in order at the end).
    fronts: BinaryHeap<Reverse<(u64, u32)>>,
    closed: Vec<bool>,
    refused: Vec<Vec<Held>>,
    touched: Vec<u32>,
}

impl HeldOpsets {
    pub fn new(groups: usize) -> Self {
        HeldOpsets {
            per_group: vec![VecDeque::new(); groups],
            closed: vec![false; groups],
            refused: vec![Vec::new(); groups],
            ..HeldOpsets::default()
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

    /// Starts a retry over the opsets of `groups` (`None` = every group): [`HeldOpsets::next_held`] yields them in hold
    /// order; each is either placed (dropped) or given back with [`HeldOpsets::refuse`]; [`HeldOpsets::end`]
    /// closes the retry.
    pub fn begin(&mut self, groups: Option<&[u32]>) {
        debug_assert!(
            self.fronts.is_empty() && self.touched.is_empty(),
            "a retry is in progress"
        );
        let fronts = &mut self.fronts;
        let mut add = |g: u32, q: &VecDeque<Held>| {
            if let Some(h) = q.front() {
                fronts.push(Reverse((h.0, g)));
            }
        };
        match groups {
            None => {
                for (g, q) in self.per_group.iter().enumerate() {
                    add(g as u32, q);
                }
            }
            Some(gs) => {
                for &g in gs {
                    add(g, &self.per_group[g as usize]);
                }
            }
        }
    }

    /// The next held opset of the retry (group, opset), in hold order; `None` when every group given to
    /// [`HeldOpsets::begin`] is exhausted or closed.
    pub fn next_held(&mut self) -> Option<(u32, Held)> {
        while let Some(Reverse((_, g))) = self.fronts.pop() {
            if self.closed[g as usize] {
                continue;
            }
            let q = &mut self.per_group[g as usize];
            let h = q.pop_front().expect("a group in the heap has a front");
            if let Some(n) = q.front() {
                self.fronts.push(Reverse((n.0, g)));
            }
            self.len -= 1;
            return Some((g, h));
        }
        None
    }

    /// Gives back an opset of this retry that was refused again; it keeps its place in the hold order.
    pub fn refuse(&mut self, group: u32, held: Held) {
        let r = &mut self.refused[group as usize];
        if r.is_empty() {
            self.touched.push(group);
        }
        r.push(held);
        self.len += 1;
    }

    /// No opset of `group` can be placed for the rest of this retry: the walk leaves its queue as it is.
    pub fn close(&mut self, group: u32) {
        if !self.closed[group as usize] {
            self.closed[group as usize] = true;
            if self.refused[group as usize].is_empty() {
                self.touched.push(group); // to reopen it at the end
            }
        }
    }

    /// Ends the retry: refused opsets go back to the front of their groups, in hold order.
    pub fn end(&mut self) {
        self.fronts.clear();
        for g in self.touched.drain(..) {
            let g = g as usize;
            self.closed[g] = false;
            for h in self.refused[g].drain(..).rev() {
                self.per_group[g].push_front(h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opsets(
        h: &mut HeldOpsets,
        groups: Option<&[u32]>,
        mut keep: impl FnMut(u32, u32) -> Keep,
    ) -> Vec<u32> {
        let mut seen = Vec::new();
        h.begin(groups);
        while let Some((g, x)) = h.next_held() {
            seen.push(x.1);
            match keep(g, x.1) {
                Keep::Place => {}
                Keep::Refuse => h.refuse(g, x),
                Keep::Close => {
                    h.refuse(g, x);
                    h.close(g);
                }
            }
        }
        h.end();
        seen
    }

    enum Keep {
        Place,
        Refuse,
        Close,
    }

    #[test]
    fn a_partial_retry_keeps_the_global_hold_order() {
        let mut h = HeldOpsets::new(3);
        // opsets 10.. held in this order over groups 0, 2, 0, 1, 2
        for (i, g) in [0u32, 2, 0, 1, 2].into_iter().enumerate() {
            h.hold(g, 10 + i as u32, 100 + i as u64);
        }
        // groups 2 and 0, in that order: visited in hold order; 11 and 14 refused, 10 and 12 placed
        let seen = opsets(&mut h, Some(&[2, 0]), |_, o| {
            if o == 11 || o == 14 {
                Keep::Refuse
            } else {
                Keep::Place
            }
        });
        assert_eq!(seen, vec![10, 11, 12, 14]);
        assert_eq!(h.len(), 3);
        // a full retry sees 11, 13, 14 in hold order and keeps them all
        let seen = opsets(&mut h, None, |_, _| Keep::Refuse);
        assert_eq!(seen, vec![11, 13, 14]);
        assert_eq!(h.len(), 3);
        let seen = opsets(&mut h, None, |_, _| Keep::Refuse);
        assert_eq!(seen, vec![11, 13, 14], "refused opsets keep their places");
    }

    #[test]
    fn a_closed_group_is_left_as_it_is_for_the_rest_of_the_retry() {
        let mut h = HeldOpsets::new(2);
        for (i, g) in [0u32, 0, 1, 0, 1, 0].into_iter().enumerate() {
            h.hold(g, i as u32, 0);
        }
        // group 0 places its first opset, then closes at its second; group 1 places both
        let seen = opsets(&mut h, None, |g, o| match (g, o) {
            (0, 0) => Keep::Place,
            (0, _) => Keep::Close,
            _ => Keep::Place,
        });
        assert_eq!(
            seen,
            vec![0, 1, 2, 4],
            "3 and 5 (group 0 after it closed) are not visited"
        );
        assert_eq!(h.len(), 3);
        let seen = opsets(&mut h, None, |_, _| Keep::Place);
        assert_eq!(
            seen,
            vec![1, 3, 5],
            "the closed group kept its order, and is open again"
        );
        assert!(h.is_empty());
    }
}
