//! `tailx` (TailX, Algorithms 1 and 2): the coordinator estimates each opset's cost as
//! TL·|NL| + TS·(size − |NL|) (NL = the opset's keys the large-key Bloom filter flags), tags every opset with its
//! delay allowance Tw = max cost − cost, and procrastinates the opsets with an allowance in a delay queue at the
//! coordinator: such an opset is sent to its replica only at Td = arrival + allowance_scale · Tw (Algorithm 2).
//! Servers serve FIFO. Replica choice is the selector's (dynamic snitching by default in `tailtune simulate`).
//!
//! The delay queue lives in the engine (the client = coordinator side of the replay); this policy decides the
//! delay through [`Scheduler::release_delay_ns`]. **Choice** (docs/simulator-replicas.md): an opset is
//! procrastinated only when its allowance exceeds `min_allowance` × its own cost (default 1): the paper's
//! Fig. 2 schedule sends C (allowance 1 = its own cost) at once and procrastinates E (allowance 4 > 1);
//! `min_allowance = 0` is the literal Algorithm 1 (every Tw > 0 is procrastinated).
use super::queues::FifoQueues;
use super::{PolicyImpl, QItem, Scheduler, Tag, TagCtx, THR_L_CHOICES};
use crate::params::Search;

crate::params! {
    pub struct TailxConfig for "policy 'tailx'" {
        /// Size threshold of the large-key filter, bytes (applied where the filter is built; 0 = derived default).
        thr_l_bytes: f64 = 0.0, Real(0.0, 1e12, "[0, 1e12] bytes (0 = derived)"), Search::Choices(THR_L_CHOICES);
        /// Service time of a large value, ms; 0 = derived from the workload's demand model (mean demand of the ops
        /// above THR_L) by [`TailxConfig::resolved`].
        tl_ms: f64 = 0.0, Real(0.0, 1e6, "[0, 1e6] ms (0 = derived)"), Search::Fixed;
        /// Service time of a small value, ms; 0 = derived (mean demand of the ops below THR_L).
        ts_ms: f64 = 0.0, Real(0.0, 1e6, "[0, 1e6] ms (0 = derived)"), Search::Fixed;
        /// Multiplier of TL, applied on top of the value above.
        tl_scale: f64 = 1.0, Real(1e-3, 1e3, "[0.001, 1000]"), Search::grid(0.5, 2.0, 0.25);
        /// Multiplier of TS, applied on top of the value above.
        ts_scale: f64 = 1.0, Real(1e-3, 1e3, "[0.001, 1000]"), Search::grid(0.5, 2.0, 0.25);
        /// Procrastination time = allowance_scale × Tw.
        allowance_scale: f64 = 1.0, Real(0.0, 100.0, "[0, 100] (0 = never delay)"), Search::grid(0.5, 2.0, 0.25);
        /// Procrastinate only when Tw > min_allowance × the opset's own cost (0 = any Tw > 0).
        min_allowance: f64 = 1.0, Real(0.0, 1e6, "[0, 1e6] × own cost"), Search::Fixed;
    }
}

impl TailxConfig {
    /// TL and TS filled in where 0: the mean per-op demand (ms) of the ops flagged large / not large by `large`
    /// (true sizes where known). No large op → TL = TS; no op → 1 / service_rate.
    pub fn resolved(&self, demand_ns: &[f64], large: &[bool], service_rate: f64) -> TailxConfig {
        let (mut sl, mut nl, mut ss, mut ns) = (0.0, 0usize, 0.0, 0usize);
        for (i, &x) in demand_ns.iter().enumerate() {
            if large.get(i).copied().unwrap_or(false) {
                sl += x;
                nl += 1;
            } else {
                ss += x;
                ns += 1;
            }
        }
        let unit = 1e3 / service_rate;
        let ts = if ns > 0 { ss / ns as f64 / 1e6 } else { unit };
        let tl = if nl > 0 { sl / nl as f64 / 1e6 } else { ts };
        let mut c = self.clone();
        if c.ts_ms == 0.0 {
            c.ts_ms = ts;
        }
        if c.tl_ms == 0.0 {
            c.tl_ms = tl;
        }
        c
    }

    /// Estimated cost of an opset of `size` ops, `large` of them flagged, ns (Algorithm 1 line 5).
    #[inline]
    pub fn opset_cost_ns(&self, size: u32, large: u32) -> f64 {
        let tl = self.tl_ms * self.tl_scale * 1e6;
        let ts = self.ts_ms * self.ts_scale * 1e6;
        tl * large as f64 + ts * (size - large) as f64
    }
}

#[derive(Debug, Clone)]
pub struct Tailx {
    q: FifoQueues,
    scale: f64,
    min_allowance: f64,
}

impl PolicyImpl for Tailx {
    type Config = TailxConfig;
    fn new(cfg: &TailxConfig, servers: usize, _ops: usize) -> Self {
        Tailx {
            q: FifoQueues::new(servers),
            scale: cfg.allowance_scale,
            min_allowance: cfg.min_allowance,
        }
    }
}

/// Procrastination time (ns) of an opset costing `cost` in a request whose costliest opset costs `max_cost`.
#[inline]
pub fn procrastination_ns(cost: f64, max_cost: f64, scale: f64, min_allowance: f64) -> u64 {
    let tw = max_cost - cost;
    if tw > 0.0 && tw > min_allowance * cost {
        (scale * tw).round() as u64
    } else {
        0
    }
}

impl Scheduler for Tailx {
    /// `ctx.costs` are the TailX opset costs in ns (the engine computes them with [`TailxConfig::opset_cost_ns`]);
    /// the tag's `prio` carries the procrastination time in ns (the allowance metadata of the paper).
    #[inline]
    fn tag(&mut self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
        let max_cost = ctx.costs.iter().copied().fold(0.0, f64::max);
        for (i, t) in tags.iter_mut().enumerate() {
            t.prio = procrastination_ns(ctx.costs[i], max_cost, self.scale, self.min_allowance) as f64;
        }
    }
    #[inline]
    fn enqueue(&mut self, server: usize, item: QItem) {
        self.q.push(server, item);
    }
    #[inline]
    fn pick(&mut self, server: usize, _now: u64) -> Option<QItem> {
        self.q.pop(server)
    }
    #[inline]
    fn release_delay_ns(&self, tag: &Tag) -> u64 {
        tag.prio as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_and_allowances_hand_worked() {
        let c = TailxConfig {
            tl_ms: 5.0,
            ts_ms: 1.0,
            ..TailxConfig::default()
        };
        assert_eq!(c.opset_cost_ns(1, 1), 5e6);
        assert_eq!(c.opset_cost_ns(3, 1), 7e6);
        assert_eq!(c.opset_cost_ns(2, 0), 2e6);
        // Fig. 2: E (cost 1) beside D (cost 5): allowance 4 > 1 × own cost → procrastinated by 4.
        assert_eq!(procrastination_ns(1e6, 5e6, 1.0, 1.0), 4_000_000);
        // C (cost 1) beside A B (cost 2): allowance 1, not above its own cost → sent at once; literal rule delays.
        assert_eq!(procrastination_ns(1e6, 2e6, 1.0, 1.0), 0);
        assert_eq!(procrastination_ns(1e6, 2e6, 1.0, 0.0), 1_000_000);
        assert_eq!(procrastination_ns(1e6, 5e6, 0.5, 1.0), 2_000_000);
        assert_eq!(procrastination_ns(5e6, 5e6, 1.0, 0.0), 0);
    }

    #[test]
    fn derived_tl_ts_are_class_means() {
        let c = TailxConfig::default().resolved(&[1e6, 3e6, 10e6, 20e6], &[false, false, true, true], 1000.0);
        assert_eq!((c.ts_ms, c.tl_ms), (2.0, 15.0));
        let c = TailxConfig::default().resolved(&[], &[], 1000.0);
        assert_eq!((c.ts_ms, c.tl_ms), (1.0, 1.0));
        let fixed = TailxConfig {
            tl_ms: 7.0,
            ..TailxConfig::default()
        };
        assert_eq!(fixed.resolved(&[1e6], &[false], 1000.0).tl_ms, 7.0);
    }
}
