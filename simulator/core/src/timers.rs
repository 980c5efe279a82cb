//! Completion timers of the server slots: the engine's "op done" event queue.
//!
//! Every busy slot holds one pending completion keyed by (time, sequence number). Instead of one global binary
//! heap over all busy slots (≈ servers × slots entries of 32 bytes, a push and a pop per op), each server keeps
//! the key of its earliest busy slot, and a *winner tree* (tournament tree) over the servers holds, at every inner
//! node, the server with the least key below it (servers with no busy slot have key ∞). A completion is one scan
//! of the server's busy slots plus one fixed walk from its leaf to the root (no data-dependent direction:
//! branch-predictable); starting an op walks up only while it wins. The tree is 4-ary: the walk is a chain of
//! dependent loads (a node's winner feeds its parent's match), so its length — log4 instead of log2 servers
//! levels, 4 instead of 7 for 128 servers — sets the cost, and the four children of a node are read in
//! parallel. The order in which completions come out is exactly the global (time, seq) order of the former heap.

/// Key of an event: time (ns) in the high 64 bits, sequence number in the low 64 bits.
#[inline(always)]
pub fn event_key(time: u64, seq: u64) -> u128 {
    ((time as u128) << 64) | seq as u128
}

/// Time part of a key.
#[inline(always)]
pub fn key_time(key: u128) -> u64 {
    (key >> 64) as u64
}

const IDLE: u128 = u128::MAX;

/// A completion that came out of the timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub time: u64,
    pub server: u32,
    pub slot: u32,
    pub op: u32,
    pub opset: u32,
}

#[derive(Debug, Clone)]
pub struct SlotTimers {
    slots: usize,
    /// Per server × slot: key of the pending completion (valid while the slot is busy).
    slot_key: Vec<u128>,
    slot_op: Vec<u32>,
    slot_opset: Vec<u32>,
    /// Per server: bit set = slot busy.
    busy: Vec<u64>,
    /// Per server (+ one always-idle padding entry): key of its earliest busy slot (IDLE when none), that slot.
    key: Vec<u128>,
    min_slot: Vec<u32>,
    /// Winner tree, 4-ary: `leaves` = servers rounded up to a power of four, `inner` = (leaves − 1) / 3 inner
    /// nodes; node i (root 0, children 4i+1 ..= 4i+4) holds the server with the least key in its subtree; leaf of
    /// server s is node `inner + s`; padding leaves hold the idle
    /// padding entry (index = servers).
    win: Vec<u32>,
    inner: usize,
}

impl SlotTimers {
    pub fn new(servers: usize, slots: usize) -> Self {
        let mut leaves = 4;
        while leaves < servers {
            leaves *= 4;
        }
        let inner = (leaves - 1) / 3;
        let pad = servers as u32;
        let mut win = vec![pad; inner + leaves];
        for (s, w) in win[inner..inner + servers].iter_mut().enumerate() {
            *w = s as u32;
        }
        // Every key is IDLE: the lowest index wins each match (any choice is fine, all are ∞).
        for i in (0..inner).rev() {
            win[i] = win[4 * i + 1..4 * i + 5]
                .iter()
                .copied()
                .min()
                .unwrap_or(pad);
        }
        SlotTimers {
            slots,
            slot_key: vec![IDLE; servers * slots],
            slot_op: vec![0; servers * slots],
            slot_opset: vec![0; servers * slots],
            busy: vec![0; servers],
            key: vec![IDLE; servers + 1],
            min_slot: vec![0; servers + 1],
            win,
            inner,
        }
    }

    /// Key of the earliest pending completion, if any.
    #[inline]
    pub fn peek_key(&self) -> Option<u128> {
        let k = self.key[self.win[0] as usize];
        (k != IDLE).then_some(k)
    }

    /// Schedules the completion of `op` (of `opset`) on `server`'s free `slot` at (time, seq).
    #[inline]
    pub fn start(&mut self, server: usize, slot: u32, time: u64, seq: u64, op: u32, opset: u32) {
        let i = server * self.slots + slot as usize;
        debug_assert!(
            self.busy[server] & (1u64 << slot) == 0,
            "slot double-booked"
        );
        let k = event_key(time, seq);
        self.slot_key[i] = k;
        self.slot_op[i] = op;
        self.slot_opset[i] = opset;
        self.busy[server] |= 1u64 << slot;
        if k < self.key[server] {
            self.key[server] = k;
            self.min_slot[server] = slot;
            // The key went down: the server takes over every node on its path that it now beats (a fixed
            // walk with branch-free selects; a node it already holds compares k < k = false and keeps it).
            let mut n = self.inner + server;
            while n > 0 {
                n = (n - 1) / 4;
                let w = self.win[n];
                let s_wins = (k < self.key[w as usize]) as u32;
                self.win[n] = w ^ ((w ^ server as u32) & s_wins.wrapping_neg());
            }
        }
    }

    /// Removes and returns the earliest pending completion (its slot becomes free).
    #[inline]
    pub fn pop(&mut self) -> Option<Completion> {
        let s = self.win[0] as usize;
        let k = self.key[s];
        if k == IDLE {
            return None;
        }
        let slot = self.min_slot[s];
        let i = s * self.slots + slot as usize;
        let done = Completion {
            time: key_time(k),
            server: s as u32,
            slot,
            op: self.slot_op[i],
            opset: self.slot_opset[i],
        };
        self.busy[s] &= !(1u64 << slot);
        // The server's next earliest busy slot (a scan of ≤ 64 slots).
        let base = s * self.slots;
        let (mut best, mut best_slot) = (IDLE, 0u32);
        let mut m = self.busy[s];
        while m != 0 {
            let j = m.trailing_zeros();
            let kj = self.slot_key[base + j as usize];
            if kj < best {
                best = kj;
                best_slot = j;
            }
            m &= m - 1;
        }
        self.key[s] = best;
        self.min_slot[s] = best_slot;
        // The key went up: replay the matches on the path to the root.
        let mut n = self.inner + s;
        while n > 0 {
            n = (n - 1) / 4;
            let c = &self.win[4 * n + 1..4 * n + 5];
            let (a, b, c, d) = (c[0], c[1], c[2], c[3]);
            let (ka, kb, kc, kd) = (
                self.key[a as usize],
                self.key[b as usize],
                self.key[c as usize],
                self.key[d as usize],
            );
            // Branch-free selects (the outcomes are coin flips to the predictor); ties go to the earlier child.
            let (ab, kab) = if kb < ka { (b, kb) } else { (a, ka) };
            let (cd, kcd) = if kd < kc { (d, kd) } else { (c, kc) };
            self.win[n] = if kcd < kab { cd } else { ab };
        }
        Some(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn completions_come_out_in_time_then_sequence_order() {
        let mut t = SlotTimers::new(3, 2);
        assert_eq!(t.pop(), None);
        t.start(2, 1, 50, 7, 70, 700);
        t.start(0, 0, 50, 3, 30, 300);
        t.start(1, 0, 10, 9, 90, 900);
        t.start(0, 1, 60, 1, 10, 100);
        let order: Vec<(u64, u32, u32, u32)> =
            std::iter::from_fn(|| t.pop().map(|c| (c.time, c.server, c.slot, c.op))).collect();
        assert_eq!(
            order,
            vec![
                (10, 1, 0, 90),
                (50, 0, 0, 30),
                (50, 2, 1, 70),
                (60, 0, 1, 10)
            ]
        );
        assert_eq!(t.peek_key(), None);
    }

    #[test]
    fn matches_a_global_heap_on_random_schedules() {
        // Against a sorted reference: random starts on free slots interleaved with pops; server counts around the
        // powers of four (1 to 3 tree levels, with and without padding leaves).
        for servers in [1usize, 3, 4, 5, 7, 16, 17, 70] {
            random_schedule_matches_a_global_heap(servers);
        }
    }

    fn random_schedule_matches_a_global_heap(servers: usize) {
        let slots = 3usize;
        let mut t = SlotTimers::new(servers, slots);
        let mut reference: Vec<(u128, u32, u32)> = Vec::new();
        let mut rng = Rng::new(5, 0);
        let mut seq = 0u64;
        let mut now = 0u64;
        let mut busy = vec![0u64; servers];
        for _ in 0..20_000 {
            if rng.uniform() < 0.55 {
                let s = rng.below(servers as u64) as usize;
                let free = !busy[s] & ((1 << slots) - 1);
                if free != 0 {
                    let slot = free.trailing_zeros();
                    let time = now + rng.below(5); // many ties in time: the sequence number decides
                    t.start(s, slot, time, seq, seq as u32, 0);
                    reference.push((event_key(time, seq), s as u32, slot));
                    busy[s] |= 1 << slot;
                    seq += 1;
                }
            } else {
                reference.sort_unstable();
                let want = (!reference.is_empty()).then(|| reference.remove(0));
                assert_eq!(t.peek_key(), want.map(|w| w.0));
                let got = t.pop();
                assert_eq!(
                    got.map(|c| (event_key(c.time, c.op as u64), c.server, c.slot)),
                    want
                );
                if let Some(c) = got {
                    busy[c.server as usize] &= !(1 << c.slot);
                    now = c.time;
                }
            }
        }
    }
}
