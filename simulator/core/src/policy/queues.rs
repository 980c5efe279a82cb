//! Server-side queue structures shared by the policies: FIFO, single priority queue with starvation boost,
//! and Rein's multi-level queue (K FIFO queues served by Deficit Round Robin).
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use super::QItem;
use crate::prefetch::prefetch;

/// One FIFO queue per server.
#[derive(Debug, Clone)]
pub struct FifoQueues {
    q: Vec<VecDeque<QItem>>,
}

impl FifoQueues {
    pub fn new(servers: usize) -> Self {
        FifoQueues {
            q: vec![VecDeque::new(); servers],
        }
    }
    #[inline]
    pub fn push(&mut self, server: usize, item: QItem) {
        self.q[server].push_back(item);
    }
    #[inline]
    pub fn pop(&mut self, server: usize) -> Option<QItem> {
        let q = &mut self.q[server];
        let item = q.pop_front();
        if let Some(next) = q.front() {
            prefetch(next); // the server's next op, cold when the queue is long
        }
        item
    }
}

/// Order-preserving map of an f64 priority to u64 (total order; -0.0 < +0.0).
#[inline]
pub fn prio_key(p: f64) -> u64 {
    let b = p.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

#[derive(Debug, Clone, Copy)]
struct PEntry {
    key: u64,
    seq: u64,
    item: QItem,
}

impl PartialEq for PEntry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.seq == other.seq
    }
}
impl Eq for PEntry {}
impl PartialOrd for PEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for PEntry {
    // BinaryHeap is a max-heap: reverse so that the lowest (priority, arrival) comes out first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.key, other.seq).cmp(&(self.key, self.seq))
    }
}

/// One priority queue per server: lowest `tag.prio` first, FIFO among equal priorities. With a boost, an op
/// that has waited `boost_ns` or more is served before any other (in arrival order): its priority is raised to
/// the top (Rein §3.2's counter to starvation).
///
/// With a boost every push sits in both the priority heap and the server's arrival FIFO; whichever pops it first
/// serves it. A push is known by its sequence number, not its op id: a copy of an op (a coordinator retry, a
/// driver execution, a write's replica copy: ids op + k·n_ops) is a push of its own.
#[derive(Debug, Clone)]
pub struct PrioQueues {
    heaps: Vec<BinaryHeap<PEntry>>,
    seq: u64,
    boost_ns: Option<u64>,
    arrivals: Vec<VecDeque<(u64, QItem)>>,
    /// With a boost: push `seq` was served, at `seq − 1`.
    served: Vec<bool>,
}

impl PrioQueues {
    pub fn new(servers: usize, ops: usize, boost_ns: Option<u64>) -> Self {
        PrioQueues {
            heaps: vec![BinaryHeap::new(); servers],
            seq: 0,
            boost_ns,
            arrivals: if boost_ns.is_some() {
                vec![VecDeque::new(); servers]
            } else {
                Vec::new()
            },
            served: if boost_ns.is_some() {
                Vec::with_capacity(ops)
            } else {
                Vec::new()
            },
        }
    }

    #[inline]
    pub fn push(&mut self, server: usize, item: QItem) {
        self.seq += 1;
        self.heaps[server].push(PEntry {
            key: prio_key(item.prio),
            seq: self.seq,
            item,
        });
        if self.boost_ns.is_some() {
            self.arrivals[server].push_back((self.seq, item));
            self.served.push(false);
        }
    }

    #[inline]
    pub fn pop(&mut self, server: usize, now: u64) -> Option<QItem> {
        let Some(boost) = self.boost_ns else {
            return self.heaps[server].pop().map(|e| e.item);
        };
        let arr = &mut self.arrivals[server];
        while let Some(&(seq, front)) = arr.front() {
            if self.served[seq as usize - 1] {
                arr.pop_front();
                continue;
            }
            if now.saturating_sub(front.enq) >= boost {
                arr.pop_front();
                self.served[seq as usize - 1] = true;
                return Some(front);
            }
            break;
        }
        let heap = &mut self.heaps[server];
        while let Some(e) = heap.pop() {
            if !self.served[e.seq as usize - 1] {
                self.served[e.seq as usize - 1] = true;
                return Some(e.item);
            }
        }
        None
    }
}

/// Rein's multi-level queue: K FIFO queues per server dequeued by Deficit Round Robin with quanta `quanta`
/// (each op costs 1). A queue's turn adds its quantum to its deficit and serves ops while the deficit is ≥ 1;
/// an emptied queue's deficit is reset to 0 (classic DRR). Quanta are normalized so the smallest is ≥ 1, so every
/// turn of a non-empty queue serves at least one op (shares are unchanged: they are proportional to the rates).
/// Storage is flat (queue i of server s at index s·K + i) so a pick touches one row, not a per-server `Vec`.
/// Each server keeps a bit mask of its non-empty queues (K ≤ 64): a turn goes straight to the next non-empty
/// queue instead of testing the empty ones (whose deficit is already 0: it is reset when a queue empties).
#[derive(Debug, Clone)]
pub struct MultiLevelQueues {
    quanta: Vec<f64>,
    k: usize,
    queues: Vec<VecDeque<QItem>>,
    deficit: Vec<f64>,
    servers: Vec<MlqServer>,
}

#[derive(Debug, Clone, Copy)]
struct MlqServer {
    cur: usize,
    in_turn: bool,
    /// Bit i set ⇔ queue i is non-empty.
    nonempty: u64,
}

impl MultiLevelQueues {
    pub fn new(servers: usize, rates: &[f64]) -> Self {
        let min = rates.iter().cloned().fold(f64::INFINITY, f64::min);
        let scale = if min < 1.0 { 1.0 / min } else { 1.0 };
        let k = rates.len();
        assert!((1..=64).contains(&k), "1..=64 queues");
        MultiLevelQueues {
            quanta: rates.iter().map(|r| r * scale).collect(),
            k,
            queues: vec![VecDeque::new(); servers * k],
            deficit: vec![0.0; servers * k],
            servers: vec![
                MlqServer {
                    cur: 0,
                    in_turn: false,
                    nonempty: 0,
                };
                servers
            ],
        }
    }

    #[inline]
    pub fn push(&mut self, server: usize, item: QItem) {
        let q = item.queue as usize;
        assert!(q < self.k, "queue {q} out of range");
        self.queues[server * self.k + q].push_back(item);
        self.servers[server].nonempty |= 1 << q;
    }

    #[inline]
    pub fn pop(&mut self, server: usize) -> Option<QItem> {
        if self.servers[server].nonempty == 0 {
            return None;
        }
        Some(self.pop_nonempty(server))
    }

    fn pop_nonempty(&mut self, server: usize) -> QItem {
        let k = self.k;
        let s = &mut self.servers[server];
        let queues = &mut self.queues[server * k..(server + 1) * k];
        let deficit = &mut self.deficit[server * k..(server + 1) * k];
        let quanta = &self.quanta[..k];
        loop {
            let mut c = s.cur;
            if !s.in_turn {
                // The next non-empty queue from c on, cyclically (the mask is not 0).
                let above = s.nonempty >> c;
                c = if above != 0 {
                    c + above.trailing_zeros() as usize
                } else {
                    s.nonempty.trailing_zeros() as usize
                };
                s.cur = c;
                deficit[c] += quanta[c];
                s.in_turn = true;
            }
            // In its turn a queue is non-empty (it leaves its turn when it empties).
            if deficit[c] >= 1.0 {
                let q = &mut queues[c];
                let it = q.pop_front().expect("a queue in its turn is non-empty");
                deficit[c] -= 1.0;
                match q.front() {
                    Some(next) => prefetch(next),
                    None => {
                        deficit[c] = 0.0;
                        s.nonempty &= !(1 << c);
                        s.in_turn = false;
                        s.cur = if c + 1 == k { 0 } else { c + 1 };
                    }
                }
                return it;
            }
            // Turn over: quantum used up.
            s.in_turn = false;
            s.cur = if c + 1 == k { 0 } else { c + 1 };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Tag;

    fn item(op: u32, queue: u32, prio: f64, enq: u64) -> QItem {
        QItem::new(op, op, enq, Tag { prio, queue }, 1)
    }

    #[test]
    fn prio_key_orders_like_f64() {
        let v = [-3.5, -0.0, 0.0, 1e-9, 2.0, 1e300];
        for w in v.windows(2) {
            assert!(prio_key(w[0]) < prio_key(w[1]));
        }
    }

    #[test]
    fn drr_shares_follow_rates_exactly_when_backlogged() {
        let mut m = MultiLevelQueues::new(1, &[5.0, 4.0, 3.0, 2.0]);
        let mut op = 0;
        for q in 0..4 {
            for _ in 0..1000 {
                m.push(0, item(op, q, 0.0, 0));
                op += 1;
            }
        }
        // one round = 5 + 4 + 3 + 2 = 14 picks, in queue order.
        let first: Vec<u32> = (0..14).map(|_| m.pop(0).unwrap().queue).collect();
        assert_eq!(first, vec![0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3, 3]);
        let mut counts = [0usize; 4];
        for _ in 0..(14 * 50) {
            counts[m.pop(0).unwrap().queue as usize] += 1;
        }
        assert_eq!(counts, [250, 200, 150, 100]);
    }

    #[test]
    fn drr_fractional_rates_are_normalized() {
        // rates 1.0 and 0.5 → quanta 2 and 1: shares 2:1.
        let mut m = MultiLevelQueues::new(1, &[1.0, 0.5]);
        for i in 0..60 {
            m.push(0, item(i, i % 2, 0.0, 0));
        }
        let picks: Vec<u32> = (0..6).map(|_| m.pop(0).unwrap().queue).collect();
        assert_eq!(picks, vec![0, 0, 1, 0, 0, 1]);
    }

    #[test]
    fn drr_skips_empty_queues_and_drains() {
        let mut m = MultiLevelQueues::new(2, &[3.0, 2.0, 1.0]);
        m.push(1, item(0, 2, 0.0, 0));
        m.push(1, item(1, 2, 0.0, 0));
        assert_eq!(m.pop(0), None);
        assert_eq!(m.pop(1).unwrap().op, 0);
        assert_eq!(m.pop(1).unwrap().op, 1);
        assert_eq!(m.pop(1), None);
    }

    /// Classic DRR written naively (every queue visited in turn, an empty queue's deficit reset when visited),
    /// the definition the bit-mask version must follow pick for pick.
    struct NaiveDrr {
        quanta: Vec<f64>,
        queues: Vec<std::collections::VecDeque<u32>>,
        deficit: Vec<f64>,
        cur: usize,
        in_turn: bool,
    }

    impl NaiveDrr {
        fn pop(&mut self) -> Option<u32> {
            if self.queues.iter().all(|q| q.is_empty()) {
                return None;
            }
            loop {
                let c = self.cur;
                if !self.in_turn {
                    if self.queues[c].is_empty() {
                        self.deficit[c] = 0.0;
                        self.cur = (c + 1) % self.queues.len();
                        continue;
                    }
                    self.deficit[c] += self.quanta[c];
                    self.in_turn = true;
                }
                if self.deficit[c] >= 1.0 {
                    if let Some(op) = self.queues[c].pop_front() {
                        self.deficit[c] -= 1.0;
                        if self.queues[c].is_empty() {
                            self.deficit[c] = 0.0;
                            self.in_turn = false;
                            self.cur = (c + 1) % self.queues.len();
                        }
                        return Some(op);
                    }
                }
                if self.queues[c].is_empty() {
                    self.deficit[c] = 0.0;
                }
                self.in_turn = false;
                self.cur = (c + 1) % self.queues.len();
            }
        }
    }

    #[test]
    fn drr_with_the_nonempty_mask_picks_as_naive_drr() {
        use crate::rng::Rng;
        for seed in 0..40u64 {
            let mut rng = Rng::new(seed, 3);
            // K from 1 to 64 (the mask's width), the edge cases included
            let k = match seed {
                0 => 1,
                1 => 64,
                2 => 63,
                _ => 1 + rng.below(64) as usize,
            };
            let rates: Vec<f64> = (0..k).map(|_| 0.25 + 4.0 * rng.uniform()).collect();
            let mut m = MultiLevelQueues::new(1, &rates);
            let mut naive = NaiveDrr {
                quanta: m.quanta.clone(),
                queues: vec![Default::default(); k],
                deficit: vec![0.0; k],
                cur: 0,
                in_turn: false,
            };
            let mut op = 0;
            for step in 0..4000 {
                // bursts of pushes to a few queues (so some queues sit empty for long), then pops
                if rng.uniform() < 0.55 {
                    let q = if rng.uniform() < 0.5 {
                        k - 1
                    } else {
                        rng.below(k as u64) as usize
                    };
                    m.push(0, item(op, q as u32, 0.0, 0));
                    naive.queues[q].push_back(op);
                    op += 1;
                } else {
                    assert_eq!(
                        m.pop(0).map(|it| it.op),
                        naive.pop(),
                        "seed {seed} step {step} k {k}"
                    );
                }
            }
            while let Some(want) = naive.pop() {
                assert_eq!(m.pop(0).map(|it| it.op), Some(want), "seed {seed} drain");
            }
            assert_eq!(m.pop(0), None);
        }
    }

    #[test]
    fn priority_queue_with_boost_serves_old_ops_first() {
        let mut p = PrioQueues::new(1, 3, Some(10));
        p.push(0, item(0, 0, 9.0, 0));
        p.push(0, item(1, 0, 1.0, 5));
        p.push(0, item(2, 0, 1.0, 6));
        // at t=9 nobody waited 10 ns: priority order (FIFO among equals).
        assert_eq!(p.pop(0, 9).unwrap().op, 1);
        // at t=10 op 0 has waited 10 ns: boosted.
        assert_eq!(p.pop(0, 10).unwrap().op, 0);
        assert_eq!(p.pop(0, 10).unwrap().op, 2);
        assert_eq!(p.pop(0, 10), None);
    }

    #[test]
    fn priority_queue_with_boost_takes_copies_past_the_op_count() {
        // 2 ops; copies run as op + k·2 (ids 2, 3, 5): each push is served once, whatever its id
        let mut p = PrioQueues::new(1, 2, Some(10));
        p.push(0, item(0, 0, 1.0, 0));
        p.push(0, item(3, 0, 2.0, 0));
        p.push(0, item(5, 0, 0.5, 3));
        assert_eq!(p.pop(0, 5).unwrap().op, 5);
        // at t=10 op 0 has waited 10 ns: boosted (then its heap entry is skipped)
        assert_eq!(p.pop(0, 10).unwrap().op, 0);
        assert_eq!(p.pop(0, 10).unwrap().op, 3);
        assert_eq!(p.pop(0, 10), None);
    }
}
