//! What a replica selector sees: the context of one choice and the feedback piggybacked on every op response.
//! Feedback reaches the client one network latency after the op ends; selectors apply it only once `now` has
//! reached its arrival time (`Pending`), so every decision uses information as stale as the network makes it.
use std::collections::VecDeque;

/// One replica choice for an opset.
#[derive(Debug, Clone, Copy)]
pub struct SelectCtx<'a> {
    pub now: u64,
    pub client: u32,
    pub group: u32,
    /// The group's RF servers, primary first (the static "snitch" order).
    pub replicas: &'a [u32],
    /// Ops in flight to / queued at / in service at each server, all clients (global truth).
    pub outstanding: &'a [u32],
    /// Ops in the opset.
    pub size: u32,
    /// Ops of the opset the size estimator (Bloom filter) says are large.
    pub large_ops: u32,
}

/// Piggybacked on the response of one op.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Feedback {
    pub client: u32,
    pub server: u32,
    /// Time the response reaches the client (op end + network latency), ns.
    pub at: u64,
    /// Ops resident at the server (queued + in service) right after this op left.
    pub queue: u32,
    /// The op's service time, ns.
    pub service_ns: u64,
    /// Client-observed response time of the op (its opset's send → response), ns.
    pub response_ns: u64,
    /// The read message's age when its response reaches the coordinator: from its request's start at the
    /// coordinator (Cassandra's `createdAtNanos` is `requestTime.startedAtNanos()`: the request's arrival for its
    /// reads and their coordinator retries, a driver execution's own start for that execution's reads) to the
    /// response. What `DynamicEndpointSnitch` samples (`ResponseVerbHandler`: `now − createdAtNanos`).
    pub since_start_ns: u64,
    /// Large ops (true sizes) resident at the server right after this op left.
    pub large_resident: u32,
    /// The op was estimated large by the client.
    pub large_est: bool,
}

/// Feedback in flight to the clients, released in arrival order.
#[derive(Debug, Clone, Default)]
pub struct Pending {
    q: VecDeque<Feedback>,
}

impl Pending {
    #[inline]
    pub fn push(&mut self, fb: Feedback) {
        self.q.push_back(fb);
    }
    /// Pops the next feedback that has reached its client by `now`.
    #[inline]
    pub fn pop_ready(&mut self, now: u64) -> Option<Feedback> {
        if self.q.front().is_some_and(|f| f.at <= now) {
            self.q.pop_front()
        } else {
            None
        }
    }
    /// Arrival time of the next feedback still in flight.
    pub fn next_at(&self) -> Option<u64> {
        self.q.front().map(|f| f.at)
    }
}
