//! A priority queue for events whose keys come from a few sources, each mostly in non-decreasing order: the
//! speculative-retry timers (Rein §5.1), one source per client (deadline = send time + the client's timeout,
//! and a client's timeout changes only every `window / 10` observations).
//!
//! Each source appends to its open *run*, a FIFO of keys in non-decreasing order; a key smaller than the run's
//! last one closes the run and opens a new one for the source. A small binary heap holds the head key of every
//! non-empty run, so a pop is a k-way merge step: the global minimum comes out of the front of one run and only
//! that run's new head is sifted down a heap of a few hundred entries, instead of sifting one global heap of every
//! pending timer (≈ 10⁵ entries, mostly cache misses). Keys must be distinct (the engine's (time, seq) keys
//! are), so the order in which entries come out is exactly the global key order of a single binary heap.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Default)]
pub struct RunQueue {
    /// The runs: FIFOs of (key, value), each in non-decreasing key order.
    runs: Vec<VecDeque<(u128, u32)>>,
    /// Per run: the source it is open for (`NONE` once closed).
    owner: Vec<u32>,
    /// Per source: its open run (`NONE` if none).
    open: Vec<u32>,
    /// Closed, drained runs, for reuse (their FIFOs keep their capacity).
    free: Vec<u32>,
    /// (head key, run) of every non-empty run.
    heads: BinaryHeap<Reverse<(u128, u32)>>,
    len: usize,
}

impl RunQueue {
    pub fn new(sources: usize) -> Self {
        RunQueue {
            open: vec![NONE; sources],
            ..RunQueue::default()
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `(key, value)` from `source`. Keys must be distinct over the whole queue.
    pub fn push(&mut self, source: usize, key: u128, value: u32) {
        let mut r = self.open[source];
        if r != NONE
            && self.runs[r as usize]
                .back()
                .is_some_and(|&(last, _)| key < last)
        {
            // Out of order for this run: close it (it drains on its own, then is reused).
            self.owner[r as usize] = NONE;
            r = NONE;
        }
        if r == NONE {
            r = match self.free.pop() {
                Some(r) => r,
                None => {
                    self.runs.push(VecDeque::new());
                    self.owner.push(NONE);
                    (self.runs.len() - 1) as u32
                }
            };
            self.owner[r as usize] = source as u32;
            self.open[source] = r;
        }
        let run = &mut self.runs[r as usize];
        if run.is_empty() {
            self.heads.push(Reverse((key, r)));
        }
        run.push_back((key, value));
        self.len += 1;
    }

    /// The least key.
    #[inline]
    pub fn peek_key(&self) -> Option<u128> {
        self.heads.peek().map(|h| h.0 .0)
    }

    /// Removes and returns the entry with the least key.
    pub fn pop(&mut self) -> Option<(u128, u32)> {
        let mut top = self.heads.peek_mut()?;
        let r = top.0 .1 as usize;
        let run = &mut self.runs[r];
        let item = run.pop_front().expect("a run in the heap is non-empty");
        self.len -= 1;
        match run.front() {
            // The run's next key replaces its head (sifted down when the guard drops).
            Some(&(next, _)) => top.0 .0 = next,
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
                if self.owner[r] == NONE {
                    self.free.push(r as u32);
                }
            }
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Against one global binary heap: the same entries in the same order, for sources whose keys are in order,
    /// jump back now and then (a shorter timeout), and interleave with pops.
    #[test]
    fn pops_in_the_order_of_one_binary_heap() {
        for seed in 0..30u64 {
            let mut rng = Rng::new(seed, 11);
            let sources = 1 + rng.below(8) as usize;
            let mut q = RunQueue::new(sources);
            let mut reference: BinaryHeap<Reverse<(u128, u32)>> = BinaryHeap::new();
            let mut timeout = vec![100u64; sources];
            let (mut now, mut seq) = (0u64, 0u64);
            for step in 0..5000u32 {
                now += rng.below(20);
                match rng.below(10) {
                    0 => {
                        // a source's timeout changes, up or down (down starts a new run)
                        let s = rng.below(sources as u64) as usize;
                        timeout[s] = 1 + rng.below(300);
                    }
                    1..=5 => {
                        let s = rng.below(sources as u64) as usize;
                        let key = ((now + timeout[s]) as u128) << 64 | seq as u128;
                        seq += 1;
                        q.push(s, key, step);
                        reference.push(Reverse((key, step)));
                    }
                    _ => {
                        assert_eq!(
                            q.peek_key(),
                            reference.peek().map(|r| r.0 .0),
                            "seed {seed} step {step}"
                        );
                        assert_eq!(
                            q.pop(),
                            reference.pop().map(|r| r.0),
                            "seed {seed} step {step}"
                        );
                    }
                }
                assert_eq!(q.len(), reference.len());
            }
            while let Some(Reverse(want)) = reference.pop() {
                assert_eq!(q.pop(), Some(want), "seed {seed} drain");
            }
            assert!(q.is_empty() && q.pop().is_none() && q.peek_key().is_none());
            // every run drained: the closed ones are all back for reuse, the open ones stay with their source
            assert_eq!(
                q.free.len() + q.open.iter().filter(|&&r| r != NONE).count(),
                q.runs.len()
            );
        }
    }

    #[test]
    fn a_key_behind_the_run_opens_a_new_run_and_reuses_drained_ones() {
        let mut q = RunQueue::new(1);
        q.push(0, 10, 0);
        q.push(0, 20, 1);
        q.push(0, 15, 2); // behind 20: second run
        assert_eq!(q.runs.len(), 2);
        assert_eq!(q.pop(), Some((10, 0)));
        assert_eq!(q.pop(), Some((15, 2)));
        assert_eq!(q.pop(), Some((20, 1))); // the first run, closed, drains and is freed
        assert_eq!(q.free, vec![0]);
        q.push(0, 5, 3); // the open run (empty) takes it: no new run
        q.push(0, 1, 4); // behind: the free run is reused
        assert_eq!(q.runs.len(), 2);
        assert_eq!(q.pop(), Some((1, 4)));
        assert_eq!(q.pop(), Some((5, 3)));
        assert_eq!(q.pop(), None);
    }
}
