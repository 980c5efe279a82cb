//! Completion timers of the server slots: the engine's "op done" event queue.
//!
//! Every busy slot holds one pending completion keyed by (time, sequence number). Instead of one global binary
//! heap over all busy slots (≈ servers × slots entries of 32 bytes, a push and a pop per op), each server keeps
//! the key of its earliest busy slot, and a *winner tree* (tournament tree) over the servers holds, at every inner
//! node, the server with the least key below it (servers with no busy slot have key ∞). A completion is one scan
//! of the server's busy slots plus one fixed walk from its leaf to the root (log2 servers steps, one comparison
//! each, no data-dependent direction: branch-predictable); starting an op walks up only while it wins. The order
//! in which completions come out is exactly the global (time, seq) order of the former heap.

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
    /// Winner tree: `leaves` = servers rounded up to a power of two; node i (1-based, root 1) holds the server
    /// with the least key in its subtree; leaf of server s is node `leaves + s`; padding leaves hold the idle
    /// padding entry (index = servers).
    win: Vec<u32>,
    leaves: usize,
}

impl SlotTimers {
    pub fn new(servers: usize, slots: usize) -> Self {
        let leaves = servers.next_power_of_two().max(2);
        let pad = servers as u32;
        let mut win = vec![pad; 2 * leaves];
        for (s, w) in win[leaves..leaves + servers].iter_mut().enumerate() {
            *w = s as u32;
        }
        // Every key is IDLE: the lowest index wins each match (any choice is fine, all are ∞).
        for i in (1..leaves).rev() {
            win[i] = win[2 * i].min(win[2 * i + 1]);
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
            leaves,
        }
    }

    /// Key of the earliest pending completion, if any.
    #[inline]
    pub fn peek_key(&self) -> Option<u128> {
        let k = self.key[self.win[1] as usize];
        (k != IDLE).then_some(k)
    }

    /// Schedules the completion of `op` (of `opset`) on `server`'s free `slot` at (time, seq).
    #[inline]
    pub fn start(&mut self, server: usize, slot: u32, time: u64, seq: u64, op: u32, opset: u32) {
        let i = server * self.slots + slot as usize;
        debug_assert!(self.busy[server] & (1u64 << slot) == 0, "slot double-booked");
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
            let mut n = (self.leaves + server) >> 1;
            while n >= 1 {
                let w = self.win[n];
                let s_wins = (k < self.key[w as usize]) as u32;
                self.win[n] = w ^ ((w ^ server as u32) & s_wins.wrapping_neg());
                n >>= 1;
            }
        }
    }

    /// Removes and returns the earliest pending completion (its slot becomes free).
    #[inline]
    pub fn pop(&mut self) -> Option<Completion> {
        let s = self.win[1] as usize;
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
        let mut n = (self.leaves + s) >> 1;
        while n >= 1 {
            let (a, b) = (self.win[2 * n], self.win[2 * n + 1]);
            // Branch-free select (the outcome is a coin flip to the predictor).
            let b_wins = (self.key[b as usize] < self.key[a as usize]) as u32;
            self.win[n] = a ^ ((a ^ b) & b_wins.wrapping_neg());
            n >>= 1;
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
        // Against a sorted reference: random starts on free slots interleaved with pops.
        let (servers, slots) = (7usize, 3usize);
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
