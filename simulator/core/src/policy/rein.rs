//! `rein`: Rein's combined scheme (§3.3, Algorithm 1). K FIFO queues per server served by Deficit Round Robin
//! with decreasing rates w_i = r_q1 − (i−1)·rate_step. The bottleneck opset goes to the queue whose cost interval
//! [τ_i, τ_i·R) holds its cost (τ_1 = tau_1, τ_{i+1} = τ_i·R; costs below τ_1 → Q1, costs beyond the last
//! threshold → Q_K, R = 1 → Q1); every other opset goes to the queue with rate ≤ the bottleneck's that minimizes
//! |cost(op)/cost(B) − w_q/w_B| (first such queue on ties).
use super::queues::MultiLevelQueues;
use super::{bottleneck, PolicyImpl, QItem, Scheduler, Tag, TagCtx, TagFields};
use crate::error::SimError;
use crate::params::Search;

crate::params! {
    /// The paper's sensitivity-analysis defaults: K = 4, R = 3, r_q1 = 5, rates decreasing by 1, τ_1 = 1. The
    /// tuner fixes r_q1 (only the rate ratios matter) and searches the rate step.
    pub struct ReinConfig for "policy 'rein'" {
        /// Number of queues K.
        k: u32 = 4, Integer(1.0, 64.0, "integer in 1..=64"), Search::int(2, 8);
        /// Range factor R between consecutive thresholds.
        range_factor: f64 = 3.0, Real(1.0, 1e6, "[1, 1e6]"), Search::grid(1.5, 8.0, 0.5);
        /// DRR rate (quantum) of Q1.
        r_q1: f64 = 5.0, Real(1e-3, 1e6, "[0.001, 1e6]"), Search::Fixed;
        /// Rate decrease from one queue to the next.
        rate_step: f64 = 1.0, Real(0.0, 1e6, "[0, 1e6]"), Search::grid(0.0, 2.0, 0.5);
        /// First threshold τ_1 (minimum cost).
        tau_1: f64 = 1.0, Real(1e-9, 1e9, "[1e-9, 1e9]"), Search::Choices(&[1.0, 2.0]);
    }
    validate = rates_stay_positive;
}

/// Every queue keeps a DRR rate > 0: r_q1 − (k − 1)·rate_step > 0.
fn rates_stay_positive(c: &ReinConfig) -> Result<(), SimError> {
    let last = c.r_q1 - (c.k as f64 - 1.0) * c.rate_step;
    if last <= 0.0 {
        return Err(SimError::param(
            "rate_step",
            c.rate_step,
            &format!(
                "< r_q1/(k-1) = {} so that every queue keeps a rate > 0",
                c.r_q1 / (c.k as f64 - 1.0)
            ),
        ));
    }
    Ok(())
}

impl ReinConfig {
    /// Dequeue rates w_1..w_K.
    pub fn rates(&self) -> Vec<f64> {
        (0..self.k)
            .map(|i| self.r_q1 - i as f64 * self.rate_step)
            .collect()
    }
}

/// Queue (0-based) of a bottleneck opset of cost `cost`.
pub fn bottleneck_queue(cost: f64, k: usize, range_factor: f64, tau_1: f64) -> usize {
    if range_factor <= 1.0 {
        return 0;
    }
    let mut upper = tau_1 * range_factor;
    for i in 0..k - 1 {
        if cost < upper {
            return i;
        }
        upper *= range_factor;
    }
    k - 1
}

/// Queue (0-based) of a non-bottleneck opset: Algorithm 1, lines 14–22.
pub fn slack_queue(cost: f64, cost_bn: f64, q_bn: usize, rates: &[f64]) -> usize {
    let cost_ratio = cost / cost_bn;
    let mut best = q_bn;
    let mut min_error = 1e9;
    for (q, &w) in rates.iter().enumerate() {
        let error = (cost_ratio - w / rates[q_bn]).abs();
        if error < min_error && rates[q_bn] >= w {
            min_error = error;
            best = q;
        }
    }
    best
}

#[derive(Debug, Clone)]
pub struct Rein {
    rates: Vec<f64>,
    range_factor: f64,
    tau_1: f64,
    /// Per bottleneck queue q_bn: the candidate queues of [`slack_queue`] (w_q ≤ w_{q_bn}) in order, with their
    /// ratio w_q / w_{q_bn} — the same f64 values `slack_queue` computes, precomputed once.
    slack: Vec<Vec<(u32, f64)>>,
    q: MultiLevelQueues,
}

impl PolicyImpl for Rein {
    type Config = ReinConfig;
    fn new(cfg: &ReinConfig, servers: usize, _ops: usize) -> Self {
        let rates = cfg.rates();
        let slack = (0..rates.len())
            .map(|q_bn| {
                (0..rates.len())
                    .filter(|&q| rates[q_bn] >= rates[q])
                    .map(|q| (q as u32, rates[q] / rates[q_bn]))
                    .collect()
            })
            .collect();
        Rein {
            q: MultiLevelQueues::new(servers, &rates),
            rates,
            range_factor: cfg.range_factor,
            tau_1: cfg.tau_1,
            slack,
        }
    }
}

impl Rein {
    /// [`slack_queue`] over the precomputed candidates (identical result: skipped queues never qualify).
    #[inline]
    fn slack_queue(&self, cost: f64, cost_bn: f64, q_bn: usize) -> u32 {
        let cost_ratio = cost / cost_bn;
        let mut best = q_bn as u32;
        let mut min_error = 1e9;
        for &(q, r) in &self.slack[q_bn] {
            let error = (cost_ratio - r).abs();
            if error < min_error {
                min_error = error;
                best = q;
            }
        }
        best
    }
}

impl Scheduler for Rein {
    #[inline]
    fn tag(&mut self, ctx: &TagCtx<'_>, tags: &mut [Tag]) {
        let (bn, cb) = bottleneck(ctx.costs);
        let q_bn = bottleneck_queue(cb, self.rates.len(), self.range_factor, self.tau_1);
        for (i, (t, &c)) in tags.iter_mut().zip(ctx.costs).enumerate() {
            t.queue = if i == bn {
                q_bn as u32
            } else {
                self.slack_queue(c, cb, q_bn)
            };
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
    fn tag_fields(&self) -> TagFields {
        TagFields::QUEUE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;

    #[test]
    fn bottleneck_thresholds_k4_r3() {
        // intervals [1,3) [3,9) [9,27) [27,∞)
        let q = |c: f64| bottleneck_queue(c, 4, 3.0, 1.0);
        let got: Vec<usize> = [
            0.5, 1.0, 2.0, 2.999, 3.0, 8.0, 9.0, 26.0, 27.0, 80.0, 81.0, 5000.0,
        ]
        .iter()
        .map(|&c| q(c))
        .collect();
        assert_eq!(got, vec![0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 3, 3]);
        // R = 1: all intervals empty → Q1 (Algorithm 1's default); R = 2, τ1 = 4: [4,8) [8,16) [16,∞).
        assert_eq!(bottleneck_queue(100.0, 4, 1.0, 1.0), 0);
        let q2: Vec<usize> = [3.0, 7.0, 8.0, 15.0, 16.0]
            .iter()
            .map(|&c| bottleneck_queue(c, 3, 2.0, 4.0))
            .collect();
        assert_eq!(q2, vec![0, 0, 1, 1, 2]);
    }

    #[test]
    fn non_bottleneck_queue_by_cost_and_rate_ratio() {
        let rates = [5.0, 4.0, 3.0, 2.0];
        // bottleneck in Q1 (w=5): ratios 1, .8, .6, .4
        assert_eq!(slack_queue(10.0, 10.0, 0, &rates), 0); // ratio 1
        assert_eq!(slack_queue(8.0, 10.0, 0, &rates), 1); // .8
        assert_eq!(slack_queue(7.0, 10.0, 0, &rates), 2); // .7: |.7−.6| < |.7−.8| in f64 → Q3
        assert_eq!(slack_queue(1.0, 10.0, 0, &rates), 3); // .1 → .4
                                                          // bottleneck in Q2 (w=4): candidates Q2..Q4 with ratios 1, .75, .5 — never faster than the bottleneck.
        assert_eq!(slack_queue(4.0, 4.0, 1, &rates), 1);
        assert_eq!(slack_queue(3.0, 4.0, 1, &rates), 2);
        assert_eq!(slack_queue(2.0, 4.0, 1, &rates), 3);
        assert_eq!(slack_queue(1.0, 4.0, 1, &rates), 3);
        // bottleneck in the last queue: everything stays there.
        assert_eq!(slack_queue(1.0, 50.0, 3, &rates), 3);
    }

    #[test]
    fn precomputed_slack_queue_matches_the_formula() {
        for (k, r_q1, step) in [
            (4u32, 5.0, 1.0),
            (6, 1.0, 0.15),
            (1, 3.0, 0.0),
            (5, 5.0, 0.0),
        ] {
            let cfg = ReinConfig {
                k,
                r_q1,
                rate_step: step,
                ..ReinConfig::default()
            };
            let rein = Rein::new(&cfg, 1, 0);
            for q_bn in 0..k as usize {
                for cost in [0.0, 0.3, 1.0, 2.0, 3.5, 7.0, 10.0, 11.0, 1e6, f64::NAN] {
                    let want = slack_queue(cost, 10.0, q_bn, &rein.rates);
                    assert_eq!(
                        rein.slack_queue(cost, 10.0, q_bn),
                        want as u32,
                        "k={k} q_bn={q_bn} cost={cost}"
                    );
                }
            }
        }
    }

    #[test]
    fn rate_step_must_keep_rates_positive() {
        let mut c = ReinConfig::default();
        c.set("rate_step", 2.0).unwrap();
        let e = c.validate().unwrap_err();
        assert!(e.to_string().contains("'rate_step'"), "{e}");
        let e = c.set("k", 0.0).unwrap_err();
        assert!(
            e.to_string().contains("'k'") && e.to_string().contains("1..=64"),
            "{e}"
        );
        let e = c.set("bogus", 1.0).unwrap_err();
        assert!(e.to_string().contains("'bogus'"), "{e}");
    }
}
