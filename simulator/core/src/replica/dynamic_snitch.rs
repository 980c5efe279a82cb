//! `ds`: Cassandra's dynamic snitching, one snitch per client (coordinator).
//!
//! Every op response adds its client-observed latency to the (client, server) sample window (the last
//! `window` samples, default 100). Scores are snapshots taken at each `update_ms` tick (default 100 ms): the
//! median of the samples received by the tick; samples received before the last `reset_s` boundary (default
//! 600 s) are dropped, as Cassandra resets all scores (Héron §II-A). A server without samples scores 0.
//! Choice (Cassandra's `sortByProximity` with `dynamic_snitch_badness_threshold`): the static order is the
//! replica order (primary first); if for some position i score(static[i]) > (1 + badness) · score(sorted[i])
//! the replicas are used in score order (lowest first, ties keep the static order), otherwise in static order.
//! The first replica of that order is chosen.
use std::collections::VecDeque;

use super::feedback::{Feedback, SelectCtx};
use super::c3::{sort_small, total_key};
use super::ReplicaSelector;
use crate::prefetch::prefetch;
use crate::params::Search;

crate::params! {
    /// Cassandra's dynamic snitch settings (defaults: Cassandra's).
    pub struct DsConfig for "replica selector 'ds'" {
        /// Score recomputation interval, ms (Cassandra's dynamic_snitch_update_interval_in_ms).
        update_ms: f64 = 100.0, Real(1e-6, 1e9, "(0, 1e9] ms"), Search::Fixed;
        /// Sample reset interval, s (dynamic_snitch_reset_interval_in_ms / 1000).
        reset_s: f64 = 600.0, Real(1e-6, 1e9, "(0, 1e9] s"), Search::Fixed;
        /// Badness threshold (dynamic_snitch_badness_threshold).
        badness: f64 = 0.1, Real(0.0, 100.0, "[0, 100]"), Search::Fixed;
        /// Latency samples kept per (client, server) (a whole number).
        window: f64 = 100.0, Rounded(1.0, 100_000.0, "1..=100000 samples"), Search::Fixed;
    }
}

/// The sample windows of every (client, server) cell: ring buffers of (arrival ns, latency ns).
///
/// Layout (speed): one flat array of `cells × window` samples when that is at most `FLAT_MAX` (the default
/// 128 × 128 cells × 100 = 1.6 M samples, 26 MB, zero pages mapped lazily), one vector per cell beyond that
/// (huge windows fill only as samples arrive); the fill count and next slot of every cell in one small dense
/// array. A sample is recorded with one 16-byte write (a second array for the latencies would double the
/// random writes, which cost more than the snapshots' sequential reads). Samples reach a cell in arrival order
/// (the engine sends feedback in time order), so from the oldest slot on a ring is sorted by arrival time: the
/// samples a snapshot counts (arrived in [since, at]) are one contiguous run of it, found from both ends, and
/// their latencies are gathered without per-sample tests.
#[derive(Debug, Clone)]
struct Windows {
    window: usize,
    /// Per cell: (samples held, next slot to overwrite once full = the oldest slot once full).
    fill: Vec<(u32, u32)>,
    flat: Vec<(u64, u64)>,
    per_cell: Vec<Vec<(u64, u64)>>,
}

/// Largest `cells × window` stored flat (64 Mi samples = 1 GiB of address space, committed only as touched).
const FLAT_MAX: usize = 1 << 26;

impl Windows {
    fn new(cells: usize, window: usize) -> Self {
        Self::with_flat_max(cells, window, FLAT_MAX)
    }

    fn with_flat_max(cells: usize, window: usize, flat_max: usize) -> Self {
        let flat = cells.checked_mul(window).filter(|&n| n <= flat_max);
        Windows {
            window,
            fill: vec![(0, 0); cells],
            flat: flat.map_or(Vec::new(), |n| vec![(0, 0); n]),
            per_cell: if flat.is_some() { Vec::new() } else { vec![Vec::new(); cells] },
        }
    }

    /// Adds a sample to cell `i`, evicting its oldest once the window is full. Samples of a cell must come in
    /// non-decreasing arrival order.
    #[inline]
    fn push(&mut self, i: usize, sample: (u64, u64)) {
        let w = self.window;
        let (fill, next) = self.fill[i];
        let j = if (fill as usize) < w {
            self.fill[i].0 = fill + 1;
            fill as usize
        } else {
            self.fill[i].1 = if next as usize + 1 == w { 0 } else { next + 1 };
            next as usize
        };
        if self.per_cell.is_empty() {
            let k = i * w;
            debug_assert!(fill == 0 || self.flat[k + if j == 0 { fill as usize - 1 } else { j - 1 }].0 <= sample.0);
            self.flat[k + j] = sample;
        } else {
            let v = &mut self.per_cell[i];
            if j == v.len() {
                v.push(sample);
            } else {
                v[j] = sample;
            }
        }
    }

    /// Prefetches the samples cell `i` holds (flat layout; the per-cell layout of huge windows is left alone).
    #[inline]
    fn prefetch_cell(&self, i: usize) {
        if self.per_cell.is_empty() {
            let n = self.fill[i].0 as usize;
            let p = self.flat.as_ptr().wrapping_add(i * self.window);
            // 4 samples of 16 bytes to a 64-byte line
            for k in (0..n).step_by(4) {
                prefetch(p.wrapping_add(k));
            }
        }
    }

    /// Appends to `out` the latencies of cell `i`'s samples that arrived in [`since`, `at`] (in ring order).
    #[inline]
    fn latencies_in(&self, i: usize, since: u64, at: u64, out: &mut Vec<u64>) {
        let (fill, next) = self.fill[i];
        let n = fill as usize;
        let ring = if self.per_cell.is_empty() {
            let k = i * self.window;
            &self.flat[k..k + n]
        } else {
            &self.per_cell[i][..]
        };
        // The k-th oldest sample is in slot (oldest + k) mod n.
        let oldest = if n == self.window { next as usize } else { 0 };
        let slot = |k: usize| if oldest + k >= n { oldest + k - n } else { oldest + k };
        let mut lo = 0;
        while lo < n && ring[slot(lo)].0 < since {
            lo += 1;
        }
        let mut hi = n;
        while hi > lo && ring[slot(hi - 1)].0 > at {
            hi -= 1;
        }
        let (a, b) = (oldest + lo, oldest + hi); // unwrapped slots [a, b) ⊆ [oldest, oldest + n)
        if b <= n {
            out.extend(ring[a..b].iter().map(|s| s.1));
        } else if a >= n {
            out.extend(ring[a - n..b - n].iter().map(|s| s.1));
        } else {
            out.extend(ring[a..n].iter().map(|s| s.1));
            out.extend(ring[..b - n].iter().map(|s| s.1));
        }
    }
}

/// A response in flight to its client: (arrival ns, latency ns, cell index).
type Sample = (u64, u64, u32);

#[derive(Debug, Clone)]
pub struct DynamicSnitch {
    update_ns: u64,
    reset_ns: u64,
    badness: f64,
    servers: usize,
    /// Per (client, server) cell: the samples, and apart from them (read on every choice, so kept small and
    /// dense) the tick of the score snapshot and the snapshot.
    windows: Windows,
    snap: Vec<(u64, f64)>,
    /// Responses in flight to the clients, in arrival order (only what the snitch uses of the feedback).
    pending: VecDeque<Sample>,
    /// Per (client, group): the choice made in the latest tick, `tick << 8 | index of the pick` (`NO_PICK`
    /// if none; empty when clients × groups exceeds `PICK_MEMO_MAX`). Exact: a choice depends only on the
    /// snapshots of the group's replicas (a group's replicas are fixed), and a snapshot, once taken for a tick,
    /// does not change during it; so every later choice of the client in the group in the same tick picks the
    /// same replica. Time never goes back, so a tick, once left, is never seen again.
    picks: Vec<u64>,
    groups: usize,
    /// The tick of the latest choice and its time range [start, end): `now / update_ns` without a division
    /// while time stays in it.
    tick: (u64, u64, u64),
    scratch: Vec<u64>,
    scores: Vec<f64>,
    sorted: Vec<(i64, u32)>,
}

/// Largest clients × groups with a pick memo (8 MB; 128 clients × 128 groups = 16 Ki by default).
const PICK_MEMO_MAX: usize = 1 << 20;
const NO_PICK: u64 = u64::MAX;

impl DynamicSnitch {
    pub fn new(cfg: &DsConfig, clients: usize, groups: usize, servers: usize) -> Self {
        let memo = clients.checked_mul(groups).filter(|&n| n <= PICK_MEMO_MAX);
        DynamicSnitch {
            update_ns: (cfg.update_ms * 1e6).round().max(1.0) as u64,
            reset_ns: (cfg.reset_s * 1e9).round().max(1.0) as u64,
            badness: cfg.badness,
            servers,
            windows: Windows::new(clients * servers, cfg.window as usize),
            snap: vec![(u64::MAX, 0.0); clients * servers],
            pending: VecDeque::new(),
            picks: memo.map_or(Vec::new(), |n| vec![NO_PICK; n]),
            groups,
            tick: (0, 0, 0),
            scratch: Vec::new(),
            scores: Vec::new(),
            sorted: Vec::new(),
        }
    }

    /// `now / update_ns`, from the cached range when `now` is in it.
    #[inline]
    fn tick_of(&self, now: u64) -> u64 {
        let (tick, start, end) = self.tick;
        if now >= start && now < end {
            tick
        } else {
            now / self.update_ns
        }
    }

    /// [`tick_of`](Self::tick_of), caching the range of `now`'s tick (the initial range [0, 0) is empty).
    #[inline]
    fn enter_tick(&mut self, now: u64) -> u64 {
        let (tick, start, end) = self.tick;
        if now >= start && now < end {
            return tick;
        }
        let tick = now / self.update_ns;
        let start = tick * self.update_ns;
        self.tick = (tick, start, start.saturating_add(self.update_ns));
        tick
    }

    /// Index of the pick memoized for (`client`, `group`) in `tick`, if any.
    #[inline]
    fn memoized(&self, client: u32, group: u32, tick: u64) -> Option<usize> {
        let p = *self.picks.get(client as usize * self.groups + group as usize)?;
        (p >> 8 == tick).then_some((p & 0xff) as usize)
    }

    #[inline]
    fn add_sample(&mut self, (at, latency, cell): Sample) {
        self.windows.push(cell as usize, (at, latency));
    }

    /// The score snapshot of cell `i` for `tick` (starting at `at`; samples from `since` on count).
    #[inline]
    fn score_in_tick(&mut self, i: usize, tick: u64, at: u64, since: u64) -> f64 {
        if self.snap[i].0 == tick {
            return self.snap[i].1;
        }
        self.scratch.clear();
        self.windows.latencies_in(i, since, at, &mut self.scratch);
        let score = if self.scratch.is_empty() {
            0.0
        } else {
            let n = self.scratch.len();
            let (_, &mut hi, _) = self.scratch.select_nth_unstable(n / 2);
            if n % 2 == 1 {
                hi as f64
            } else {
                let lo = *self.scratch[..n / 2].iter().max().unwrap_or(&hi);
                (lo as f64 + hi as f64) / 2.0
            }
        };
        self.snap[i] = (tick, score);
        score
    }
}

impl ReplicaSelector for DynamicSnitch {
    fn choose(&mut self, ctx: &SelectCtx<'_>) -> Option<u32> {
        while let Some(&smp) = self.pending.front() {
            if smp.0 > ctx.now {
                break;
            }
            self.pending.pop_front();
            self.add_sample(smp);
        }
        let tick = self.enter_tick(ctx.now);
        if let Some(pick) = self.memoized(ctx.client, ctx.group, tick) {
            return Some(ctx.replicas[pick]);
        }
        let at = self.tick.1; // the tick's start
        let since = at / self.reset_ns * self.reset_ns;
        let base = ctx.client as usize * self.servers;
        let mut scores = std::mem::take(&mut self.scores);
        let mut sorted = std::mem::take(&mut self.sorted);
        scores.clear();
        sorted.clear();
        for (i, &s) in ctx.replicas.iter().enumerate() {
            let v = self.score_in_tick(base + s as usize, tick, at, since);
            scores.push(v);
            sorted.push((total_key(v), i as u32));
        }
        // Score order (lowest first, ties keep the static order); `total_key` orders as `f64::total_cmp`.
        sort_small(&mut sorted, |a, b| a < b);
        let use_scores = scores
            .iter()
            .zip(&sorted)
            .any(|(&st, so)| st > (1.0 + self.badness) * scores[so.1 as usize]);
        let pick = if use_scores { sorted[0].1 as usize } else { 0 };
        let memo = ctx.client as usize * self.groups + ctx.group as usize;
        if memo < self.picks.len() && tick < (NO_PICK >> 8) {
            self.picks[memo] = tick << 8 | pick as u64; // pick < RF ≤ 255
        }
        self.scores = scores;
        self.sorted = sorted;
        Some(ctx.replicas[pick])
    }
    fn wants_feedback(&self) -> bool {
        true
    }
    fn on_op_response(&mut self, fb: &Feedback) {
        let cell = fb.client as usize * self.servers + fb.server as usize;
        // No prefetch of the ring slot the sample will go to: reading the cell's fill count to find it missed
        // more often than the prefetch saved (measured 2026-11-24, bench/RESULTS.md).
        self.pending.push_back((fb.at, fb.response_ns, cell as u32));
    }
    /// The snapshot cells of the group's replicas, and the samples of those whose snapshot the choice will take
    /// (not yet taken in this tick, and no pick memoized for the group in it): a snapshot reads a cold window.
    #[inline]
    fn prefetch_choice(&self, now: u64, client: u32, group: u32, replicas: &[u32]) {
        let tick = self.tick_of(now);
        if self.memoized(client, group, tick).is_some() {
            return;
        }
        let base = client as usize * self.servers;
        for &s in replicas {
            let i = base + s as usize;
            if self.snap[i].0 != tick {
                self.windows.prefetch_cell(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// The snitch as specified, written naively: every response enters its window when it reaches the client.
    struct Naive {
        u: u64,
        r: u64,
        badness: f64,
        w: usize,
        servers: usize,
        windows: Vec<VecDeque<(u64, u64)>>,
        snap: Vec<(u64, f64)>,
        pending: VecDeque<Feedback>,
    }

    impl Naive {
        fn choose(&mut self, client: u32, replicas: &[u32], now: u64) -> u32 {
            while self.pending.front().is_some_and(|f| f.at <= now) {
                let f = self.pending.pop_front().unwrap();
                let win = &mut self.windows[f.client as usize * self.servers + f.server as usize];
                if win.len() == self.w {
                    win.pop_front();
                }
                win.push_back((f.at, f.response_ns));
            }
            let tick = now / self.u;
            let at = tick * self.u;
            let since = at / self.r * self.r;
            let scores: Vec<f64> = replicas
                .iter()
                .map(|&s| {
                    let i = client as usize * self.servers + s as usize;
                    if self.snap[i].0 != tick {
                        let mut v: Vec<u64> =
                            self.windows[i].iter().filter(|x| x.0 <= at && x.0 >= since).map(|x| x.1).collect();
                        v.sort_unstable();
                        let n = v.len();
                        let m = match n {
                            0 => 0.0,
                            _ if n % 2 == 1 => v[n / 2] as f64,
                            _ => (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0,
                        };
                        self.snap[i] = (tick, m);
                    }
                    self.snap[i].1
                })
                .collect();
            let mut sorted: Vec<(f64, usize)> = scores.iter().copied().zip(0..).collect();
            sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let use_scores = (0..scores.len()).any(|i| scores[i] > (1.0 + self.badness) * sorted[i].0);
            replicas[if use_scores { sorted[0].1 } else { 0 }]
        }
    }

    #[test]
    fn batched_windows_choose_as_the_naive_snitch() {
        for seed in 0..20u64 {
            let mut rng = Rng::new(seed, 9);
            let (clients, servers) = (2usize, 4usize);
            let cfg = DsConfig {
                update_ms: 1e-3 * (1 + rng.below(5)) as f64, // 1..5 µs ticks
                reset_s: 1e-6 * (3 + rng.below(30)) as f64,
                badness: 0.1,
                window: (1 + rng.below(6)) as f64,
            };
            let mut ds = DynamicSnitch::new(&cfg, clients, servers, servers);
            if seed % 2 == 1 {
                // the per-cell layout of huge windows, against the same naive snitch
                ds.windows = Windows::with_flat_max(clients * servers, cfg.window as usize, 0);
                assert!(ds.windows.flat.is_empty());
            } else {
                assert!(ds.windows.per_cell.is_empty());
            }
            let mut naive = Naive {
                u: ds.update_ns,
                r: ds.reset_ns,
                badness: cfg.badness,
                w: cfg.window as usize,
                servers,
                windows: vec![VecDeque::new(); clients * servers],
                snap: vec![(u64::MAX, 0.0); clients * servers],
                pending: VecDeque::new(),
            };
            let (mut now, mut sent) = (0u64, 0u64);
            for _ in 0..3000 {
                now += rng.below(700);
                if rng.uniform() < 0.6 {
                    // a response reaching a client later (arrival times non-decreasing, as the engine sends them)
                    sent = sent.max(now) + rng.below(300);
                    let fb = Feedback {
                        client: rng.below(clients as u64) as u32,
                        server: rng.below(servers as u64) as u32,
                        at: sent,
                        queue: 0,
                        service_ns: 1,
                        response_ns: rng.below(50),
                        since_start_ns: 0,
                        large_resident: 0,
                        large_est: false,
                    };
                    ds.on_op_response(&fb);
                    naive.pending.push_back(fb);
                } else {
                    let client = rng.below(clients as u64) as u32;
                    let first = rng.below(servers as u64) as u32;
                    let replicas = [first, (first + 1) % servers as u32, (first + 2) % servers as u32];
                    let ctx = SelectCtx {
                        now,
                        client,
                        group: first, // a group's replicas are fixed (the pick memo relies on it)
                        replicas: &replicas,
                        outstanding: &[],
                        size: 1,
                        large_ops: 0,
                    };
                    // the hint reads state only: a choice after it is the naive snitch's all the same
                    ds.prefetch_choice(now, client, first, &replicas);
                    assert_eq!(ds.choose(&ctx), Some(naive.choose(client, &replicas, now)), "seed {seed}");
                }
            }
        }
    }
}
