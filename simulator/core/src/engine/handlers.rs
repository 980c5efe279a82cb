//! The event loop and one handler per event kind, over the replay's state ([`Sim`]).
//!
//! [`Sim::run`] takes the least (time, seq) of the pending events' heads, applies it with its handler, and once
//! every event of the current instant is applied lets the dirty servers start ops ([`Sim::dispatch`]). Handlers
//! are `#[inline(always)]`: the loop compiles to one function per (EXT, policy, selector) as it did when it was
//! written as one, so the split costs no speed (bench/sim_callgrind/HANDLERS.md).
use std::cmp::Reverse;

use super::state::{
    Sent, Sim, COPY_OPSET, DRV_BATCH, DRV_TIMER, LATE_OPSET, NOT_SENT, PAGE_SEND, PAGE_TIMER,
};
use crate::held::Held;
use crate::policy::stock_driver::{execution_start, input_order, request_ops};
use crate::policy::{QItem, Scheduler, Tag, TagCtx};
use crate::prefetch::prefetch;
use crate::replica::{Feedback, HeldRetry, ReplicaSelector, SelectCtx};
use crate::timers::{event_key, key_time};

/// `native_transport_timeout` (Cassandra 5.0: 12 s): the client deadline a coordinator retry must fit in.
const NATIVE_TRANSPORT_TIMEOUT_NS: u64 = 12_000_000_000;

/// A read that ended (or was dropped) at its server, as its coordinator hears of it.
#[derive(Debug, Clone, Copy)]
struct ReadEnd {
    /// Op or copy id, its opset, its server.
    id: u32,
    o: usize,
    s: usize,
    /// Its coordinator's node, when coordinators are nodes.
    coord: Option<u32>,
    /// Served by its own coordinator: inline, no message.
    local: bool,
    /// When its coordinator hears of it: the end, plus one network hop unless `local`.
    at: u64,
}

impl<const EXT: bool, S: Scheduler, R: ReplicaSelector> Sim<'_, EXT, S, R> {
    /// Applies every event in (time, seq) order.
    #[inline(always)]
    pub(super) fn run(&mut self) {
        loop {
            let arrival_key = self.arrival_key();
            let srv_key = self.p.at_servers.front().map_or(u128::MAX, |e| e.0);
            let done_key = self.p.timers.peek_key().unwrap_or(u128::MAX);
            // Without the general loop these queues stay empty: their keys are constant ∞ and the branches fold
            // away.
            let (retry_key, delay_key, spec_key) = if EXT {
                (
                    self.p.retries.peek().map_or(u128::MAX, |k| k.0),
                    self.p.delay_q.peek().map_or(u128::MAX, |k| k.0 .0),
                    self.p.spec_q.peek_key().unwrap_or(u128::MAX),
                )
            } else {
                (u128::MAX, u128::MAX, u128::MAX)
            };
            let now = if spec_key < delay_key
                && spec_key < retry_key
                && spec_key < arrival_key
                && spec_key < srv_key
                && spec_key < done_key
            {
                self.on_speculative_timer(spec_key)
            } else if delay_key < retry_key
                && delay_key < arrival_key
                && delay_key < srv_key
                && delay_key < done_key
            {
                self.on_delay_release(delay_key)
            } else if retry_key < arrival_key && retry_key < srv_key && retry_key < done_key {
                self.on_held_retry(retry_key)
            } else if arrival_key < srv_key && arrival_key < done_key {
                self.on_arrival()
            } else if srv_key < done_key {
                self.on_reach_servers()
            } else if done_key != u128::MAX {
                self.on_op_done()
            } else {
                break;
            };
            self.events += 1;
            if !self.p.dirty.is_empty() {
                self.dispatch_after(now);
            }
            if self.stop_left == 0 {
                break;
            }
        }
    }

    /// Key of the next request arrival (∞ when every request has arrived).
    #[inline(always)]
    fn arrival_key(&self) -> u128 {
        if self.next_req >= self.n_req {
            u128::MAX
        } else if self.closed_on() {
            // Closed loop: the next request goes to the thread that becomes free first.
            self.p
                .ready
                .peek()
                .map_or(u128::MAX, |k| event_key(k.0 .0, k.0 .1))
        } else {
            event_key(self.wl.arrival[self.next_req], self.next_req as u64)
        }
    }

    /// The next sequence number.
    #[inline(always)]
    fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        s
    }

    #[inline(always)]
    fn mark_dirty(&mut self, s: usize) {
        if !self.is_dirty[s] {
            self.is_dirty[s] = true;
            self.p.dirty.push(s as u32);
        }
    }

    /// The op is a write (served at every replica).
    #[inline(always)]
    fn is_write(&self, op: usize) -> bool {
        self.write_on() && self.rc.writes[op]
    }

    /// Ops of opset `o` the client estimates large (0 without estimates).
    #[inline(always)]
    fn large_ops_of(&self, o: usize) -> u32 {
        let est = &self.rc.sizes.large_est;
        if !EXT || est.is_empty() {
            return 0;
        }
        let (a, b) = (
            self.wl.opset_ops[o] as usize,
            self.wl.opset_ops[o + 1] as usize,
        );
        est[a..b].iter().filter(|&&l| l).count() as u32
    }

    #[inline(always)]
    fn large_true(&self, op: usize) -> bool {
        !self.rc.sizes.large_true.is_empty() && self.rc.sizes.large_true[op]
    }

    /// The replica after `s` in group `g` (where copies go).
    #[inline(always)]
    fn next_replica(&self, g: u32, s: u32) -> u32 {
        let reps = self.cluster.replicas(g);
        let i = reps.iter().position(|&x| x == s).unwrap_or(0);
        reps[(i + 1) % reps.len()]
    }

    /// The send record of opset `o` (`sent_on`): when it was sent, its request and the request's client.
    #[inline(always)]
    fn sent_of(&self, o: usize) -> Sent {
        let req = self.wl.opset_req[o];
        Sent {
            at: self.sent_at[o],
            client: self.wl.client[req as usize],
            req,
        }
    }

    /// Where the copies of sent opset `o` go (duplication, speculative retry): the replica after its server.
    #[inline(always)]
    fn copy_server(&self, o: usize) -> u32 {
        self.next_replica(self.wl.opset_group[o], self.opset_server[o])
    }

    /// Schedules a retry of the held opsets when the selector names a time (once per distinct time).
    #[inline(always)]
    fn schedule_wakeup(&mut self, now: u64) {
        if let Some(t) = self.p.selector.wakeup(now) {
            let t = t.max(now + 1);
            if t != self.last_wakeup {
                self.last_wakeup = t;
                let key = event_key(t, self.next_seq());
                self.p.retries.push(Reverse(key));
            }
        }
    }

    // ---------------------------------------------------------------------------------------- client side

    /// A request arrives at its client (open loop) or its thread issues it (closed loop): every opset gets a
    /// replica (or is held), the policy tags the request, the opsets leave for their servers (TailX may delay
    /// some; duplication sends copies, speculative retry arms timers).
    #[inline(always)]
    fn on_arrival(&mut self) -> u64 {
        let r = self.next_req;
        self.next_req += 1;
        let now = if self.closed_on() {
            let Reverse((t, _, th)) = self.p.ready.pop().expect("head exists");
            self.arrival_rt[r] = t;
            self.thread_of[r] = th;
            t
        } else {
            self.wl.arrival[r]
        };
        let wl = self.wl;
        let (o0, o1) = (wl.req_opsets[r] as usize, wl.req_opsets[r + 1] as usize);
        let client = wl.client[r];
        self.p.sizes.clear();
        self.p.costs.clear();
        self.p.servers.clear();
        if !self.plain() {
            // The selector's state for every choice of this request, fetched at once (misses overlap).
            for o in o0..o1 {
                let g = wl.opset_group[o];
                self.p
                    .selector
                    .prefetch_choice(now, client, g, self.cluster.replicas(g));
            }
        }
        for o in o0..o1 {
            self.place_opset(o, client, now);
        }
        self.tag_request(r, o0, o1, now);
        if self.page_on() {
            // Paged: the first partition's read now, the others one at a time (`page_answer`).
            if o1 > o0 {
                self.page_send(r, wl.opset_ops[o0] as usize, now);
            }
            return now;
        }
        let key = event_key(now + self.d, self.next_seq());
        self.p.at_servers.push_back((key, r as u32));
        if self.local_on() {
            self.enqueue_local_opsets(o0, o1, now);
        }
        if self.redundant() {
            self.send_copies(o0, o1, client, now);
        }
        if self.hedge_on() {
            self.arm_executions(r, client, now);
        }
        if !self.plain() {
            if r + 1 == self.n_req / 2 + 1 {
                self.held.at_half = self.p.backlog.len() as u64;
            }
            if r + 1 == self.n_req {
                self.held.at_end = self.p.backlog.len() as u64;
            }
        }
        now
    }

    /// Opset `o` of the arriving request: its replica (or held at the client, tagged with its primary as provisional
    /// server), its size and cost for the policy's tagging.
    #[inline(always)]
    fn place_opset(&mut self, o: usize, client: u32, now: u64) {
        if self.route_on() {
            return self.place_routed(o, client, now);
        }
        let wl = self.wl;
        let size = wl.opset_ops[o + 1] - wl.opset_ops[o];
        let g = wl.opset_group[o];
        let replicas = self.cluster.replicas(g);
        let s = if self.plain() {
            self.p
                .selector
                .select(client, g, replicas, &self.outstanding)
        } else {
            let ctx = SelectCtx {
                now,
                client,
                group: g,
                replicas,
                outstanding: &self.outstanding,
                size,
                large_ops: self.large_ops_of(o),
            };
            match self.p.selector.choose(&ctx) {
                Some(s) => {
                    if self.fb_on() {
                        self.sent_at[o] = now;
                    }
                    s
                }
                None => {
                    self.late.set(o);
                    self.p.backlog.hold(g, o as u32, now);
                    self.held.opsets += 1;
                    self.held.max = self.held.max.max(self.p.backlog.len() as u64);
                    self.schedule_wakeup(now);
                    u32::MAX
                }
            }
        };
        self.opset_server[o] = s;
        let s = if s == u32::MAX { replicas[0] } else { s };
        if self.opset_server[o] != u32::MAX {
            self.outstanding[s as usize] += size;
        }
        self.p.sizes.push(size);
        let cost = self.opset_cost(o, size);
        self.p.costs.push(cost);
        self.p.servers.push(s);
    }

    /// The per-partition shape: the key's query goes to the first node of the driver's plan, a replica, which
    /// reads it from the replica its snitch chooses (inline when that is itself).
    #[inline(always)]
    fn place_routed(&mut self, o: usize, client: u32, now: u64) {
        let wl = self.wl;
        let g = wl.opset_group[o];
        let replicas = self.cluster.replicas(g);
        let size = wl.opset_ops[o + 1] - wl.opset_ops[o];
        let write = self.is_write(wl.opset_ops[o] as usize);
        let sc = self.p.stock.as_mut().expect("stock client");
        let mut plan = std::mem::take(&mut sc.plan_buf);
        sc.driver.plan(client, replicas, now, &mut plan);
        let n = plan[0];
        if !write {
            sc.driver.sent(client, n);
        }
        if sc.hedge {
            sc.req_plans.extend_from_slice(&plan);
        }
        sc.plan_buf = plan;
        // The coordinator reads the replica its snitch puts first (`SimpleSnitch`: the ring order, no preference
        // for itself); a write is its own (served at every replica).
        let s = if write {
            n
        } else {
            let ctx = SelectCtx {
                now,
                client: self.cluster.config.clients + n,
                group: g,
                replicas,
                outstanding: &self.outstanding,
                size,
                large_ops: self.large_ops_of(o),
            };
            self.p.selector.choose(&ctx).unwrap_or(replicas[0])
        };
        if self.fb_on() {
            self.sent_at[o] = now;
        }
        self.opset_coord[o] = n;
        self.opset_server[o] = s;
        self.outstanding[s as usize] += size;
        self.p.sizes.push(size);
        let cost = self.opset_cost(o, size);
        self.p.costs.push(cost);
        self.p.servers.push(s);
    }

    /// The driver: the first driver speculative execution of each query of request `r`, `delay` from now (on
    /// the driver's timer: `StockClient::next_execution_at`), in query order (the keys' input order).
    #[inline(always)]
    fn arm_executions(&mut self, r: usize, client: u32, now: u64) {
        let source = self.cluster.config.clients as usize + client as usize;
        let mut sc = self.p.stock.take().expect("stock client");
        let at = sc.next_execution_at(now);
        if sc.per_key {
            // One query per key (its op); `per-partition`: the plans were made in engine order as the keys were
            // placed.
            let (a, b) = request_ops(self.wl, r);
            input_order(self.wl, a, b, &mut sc.order);
            for k in 0..sc.order.len() {
                let op = sc.order[k].1 as usize;
                let i = if sc.per_partition {
                    let p = (op - a) * sc.rf;
                    sc.execs.open(op as u32, &sc.req_plans[p..p + sc.rf])
                } else {
                    sc.execs.open(op as u32, &[])
                };
                let key = event_key(at, self.next_seq());
                self.p.spec_q.push(source, key, i | DRV_TIMER);
            }
            sc.req_plans.clear();
        } else {
            for q in sc.queries.req_start[r]..sc.queries.req_start[r + 1] {
                let i = sc.execs.open(q, &[]);
                let key = event_key(at, self.next_seq());
                self.p.spec_q.push(source, key, i | DRV_TIMER);
            }
        }
        self.p.stock = Some(sc);
    }

    /// The driver: the armed execution `i` of a query starts (unless the query is answered): every key is read
    /// again — coordinated by the plan's next node (`per-partition`), or another coordinator (`in`, and past the
    /// plan's replicas), each key from that coordinator's snitch's choice — and the next execution is armed while
    /// the driver allows one more.
    #[inline(always)]
    fn on_execution(&mut self, now: u64, i: u32) -> u64 {
        let mut sc = self.p.stock.take().expect("stock client");
        let q = sc.execs.query(i) as usize;
        let wl = self.wl;
        // The query (a key's op when `per_key`) is answered, or its request answered with a timeout.
        let key_opset = if sc.per_key { self.opset_of(q) } else { 0 };
        let key_req = wl.opset_req[key_opset] as usize;
        let done = if sc.per_key {
            self.key_done(q, key_req, now)
        } else {
            sc.queries.done_at[q] <= now
        };
        if done {
            sc.execs.close(i);
            self.p.stock = Some(sc);
            return now;
        }
        // The query's request and the opsets to scan for its keys, in engine order (`per_key`: its op's).
        let (r, o0, o1) = if sc.per_key {
            (key_req, key_opset, key_opset + 1)
        } else {
            let r = sc.queries.request(q);
            (r, wl.req_opsets[r] as usize, wl.req_opsets[r + 1] as usize)
        };
        let a = wl.opset_ops[o0] as usize;
        let e = sc.execs.start(i) as usize;
        let client = wl.client[r];
        let routed = sc.per_partition && e - 1 < sc.rf;
        let clients = self.cluster.config.clients;
        let (mut last_o, mut s, mut node) = (usize::MAX, 0u32, None);
        let (mut n, mut reads) = (0u32, 0u64);
        for (o, op) in (o0..o1).flat_map(|o| {
            (wl.opset_ops[o] as usize..wl.opset_ops[o + 1] as usize).map(move |op| (o, op))
        }) {
            if (sc.per_key && op != q)
                || (!sc.per_key && sc.queries.of(wl, op, r, a) != q)
                || self.is_write(op)
            {
                continue;
            }
            if o != last_o {
                last_o = o;
                let g = wl.opset_group[o];
                let replicas = self.cluster.replicas(g);
                // The execution's coordinator: the plan's e-th node (`per-partition`), which reads from its
                // snitch's choice; else the client's coordinator (a node with `local` = 1; past the plan's
                // replicas, a node that is no replica).
                node = if routed {
                    Some(sc.execs.node(i, e - 1))
                } else if self.local_on() && !sc.per_partition {
                    Some(client % self.n_servers as u32)
                } else {
                    None
                };
                let ctx = SelectCtx {
                    now,
                    client: match node {
                        Some(x) if routed => clients + x,
                        _ => client,
                    },
                    group: g,
                    replicas,
                    outstanding: &self.outstanding,
                    size: 1,
                    large_ops: 0,
                };
                s = self.p.selector.choose(&ctx).unwrap_or(replicas[0]);
                if let Some(x) = node.filter(|_| routed) {
                    sc.driver.sent(client, x);
                }
            }
            let id = op as u32 + e as u32 * self.n_ops32;
            self.outstanding[s as usize] += 1;
            reads += 1;
            if let Some(x) = node.filter(|_| routed) {
                sc.exec_coord.insert(id, x);
            }
            if node == Some(s) {
                self.enqueue_read(id, o as u32, s as usize, now); // inline
            } else {
                sc.sends.push_back((id, o as u32, s));
                n += 1;
            }
        }
        self.copies.ops += reads;
        if n > 0 {
            let key = event_key(now + self.d, self.next_seq());
            self.p.at_servers.push_back((key, DRV_BATCH | n));
        }
        if e < sc.max_exec as usize {
            let key = event_key(sc.next_execution_at(now), self.next_seq());
            let clients = self.cluster.config.clients as usize;
            self.p
                .spec_q
                .push(clients + client as usize, key, i | DRV_TIMER);
        } else {
            sc.execs.close(i);
        }
        self.p.stock = Some(sc);
        now
    }

    /// Paged: the coordinator sends the read of op `op` (request `r`'s next partition) to its opset's replica
    /// now, and arms its speculative retry. Every partition's read carries the request's start
    /// (`Dispatcher.RequestTime`): the retry is due at start + threshold (`shouldSpeculateAndMaybeWait` waits
    /// until `requestTime.startedAtNanos() + T`: a partition sent after that is retried at once; none when
    /// now + T is past the client deadline, start + 12 s), and the read waits at most until start + read
    /// timeout — a partition sent after that times its request out at once (its own latency sample: 0).
    #[inline(always)]
    fn page_send(&mut self, r: usize, op: usize, now: u64) {
        let o = self.opset_of(op);
        let s = self.opset_server[o];
        let start = self.arrived(r);
        let sc = self.p.stock.as_mut().expect("stock client");
        sc.page_at[r] = now;
        if self.drop_on() && now >= start + self.read_timeout {
            self.time_out(r, s as usize, now);
            return;
        }
        if self.sent_on() {
            self.sent_at[o] = now;
        }
        let inline = self.is_local(op as u32, o, s as usize) && self.can_run_now(s as usize, 1);
        self.send_read(op as u32, o, s, now);
        if inline {
            return; // done before the retry check
        }
        let client = self.wl.client[r] as usize;
        if let Some(t) = self.p.spec.as_mut().and_then(|e| e.timeout_at(client, now)) {
            if now + t <= start + NATIVE_TRANSPORT_TIMEOUT_NS {
                let key = event_key(now.max(start + t), self.next_seq());
                self.p.spec_q.push(client, key, op as u32 | PAGE_TIMER);
            }
        }
    }

    /// Paged: op `op` of request `r` has its first answer at the coordinator at `at`: its latency is one
    /// threshold sample, and the next partition's read leaves then.
    #[inline(always)]
    fn page_answer(&mut self, op: usize, r: usize, at: u64) {
        let client = self.wl.client[r] as usize;
        let sent = self.p.stock.as_ref().expect("stock client").page_at[r];
        if let Some(e) = self.p.spec.as_mut() {
            e.observe_at(client, at - sent, at);
        }
        let (_, b) = request_ops(self.wl, r);
        if op + 1 < b {
            let key = event_key(at, self.next_seq());
            self.p.spec_q.push(client, key, (op + 1) as u32 | PAGE_SEND);
        }
    }

    /// Paged: the coordinator retry of op `op`'s read: unless answered (or its request timed out), the read goes
    /// to the next replica of its opset's group.
    #[inline(always)]
    fn page_retry(&mut self, op: usize, now: u64) {
        let o = self.opset_of(op);
        let r = self.wl.opset_req[o] as usize;
        if (self.drop_on() && self.timed_out[r]) || self.answered_at.at(op, self.arrived(r)) <= now
        {
            return;
        }
        let c = self.copy_server(o);
        self.copied.set(op);
        self.outstanding[c as usize] += 1;
        self.copies.ops += 1;
        self.send_read(op as u32 + self.n_ops32, o, c, now);
    }

    /// A query of one key (`StockClient::per_key`), op `op` of request `r`, is over by `now`: its answer has
    /// reached the client, or its request was answered with a timeout.
    #[inline(always)]
    fn key_done(&self, op: usize, r: usize, now: u64) -> bool {
        match self.answered_at.at(op, self.arrived(r)) {
            u64::MAX => self.drop_on() && self.timed_out[r],
            at => at <= now,
        }
    }

    /// The coordinator node of read `id` (op or copy id) of opset `o` when coordinators are nodes: the node the
    /// driver sent the key's query to (`per-partition`: for its first execution's read and that read's
    /// coordinator retry; a routed execution's own node, from `StockClient::exec_coord`), or client c's node c mod
    /// servers (`local` = 1: every read of its requests). None: a coordinator that is no server.
    #[inline(always)]
    fn coordinator_of(&self, id: u32, o: usize) -> Option<u32> {
        if !self.local_on() {
            None
        } else if !self.route_on() {
            Some(self.wl.client[self.wl.opset_req[o] as usize] % self.n_servers as u32)
        } else if id / self.n_ops32 <= 1 {
            Some(self.opset_coord[o])
        } else {
            self.p
                .stock
                .as_ref()
                .and_then(|sc| sc.exec_coord.get(&id).copied())
        }
    }

    /// Read `id` of opset `o` at server `s` is served by its own coordinator (inline; writes never are).
    #[inline(always)]
    fn is_local(&self, id: u32, o: usize, s: usize) -> bool {
        self.local_on()
            && !self.is_write((id % self.n_ops32) as usize)
            && self.coordinator_of(id, o) == Some(s as u32)
    }

    /// One more op waits in server `s`'s queue (counted when coordinators are nodes).
    #[inline(always)]
    fn count_queued(&mut self, s: usize) {
        if self.local_on() {
            self.queued[s] += 1;
        }
    }

    /// Server `s` can start `n` more ops at once: free slots beyond the ops already waiting (a local read then
    /// runs inline, in the coordinator's own thread, before its speculation check).
    #[inline(always)]
    fn can_run_now(&self, s: usize, n: u32) -> bool {
        self.free[s].count_ones() >= self.queued[s] + n
    }

    /// Opset `o`'s reads are served by their coordinator: its server is its coordinator and it holds no write.
    #[inline(always)]
    fn opset_local(&self, o: usize) -> bool {
        let wl = self.wl;
        let (a, b) = (wl.opset_ops[o] as usize, wl.opset_ops[o + 1] as usize);
        let s = self.opset_server[o];
        s != u32::MAX
            && !(a..b).any(|op| self.is_write(op))
            && self.is_local(a as u32, o, s as usize)
    }

    /// The opset of op `op`.
    #[inline(always)]
    fn opset_of(&self, op: usize) -> usize {
        self.wl.opset_ops.partition_point(|&x| x as usize <= op) - 1
    }

    /// When the read `id` (op `op`, or a copy of it), which left its coordinator at `sent`, was created there —
    /// its message's `createdAtNanos`, from which it expires and the dynamic snitch times it. With the coordinator
    /// section's client side: the start of the request the read serves — the client's send of
    /// its opset (its arrival, unless the selector held it), for its first read and its coordinator retry; the
    /// request's arrival for every partition of a paged query; execution e's own start, (e − 1) × the driver's
    /// delay after the arrival on its timer (`execution_start`), for that execution's reads (a new request at its coordinator). Otherwise (and
    /// for writes) its own send.
    #[inline(always)]
    fn read_start(&self, id: u32, op: usize, o: usize, sent: u64) -> u64 {
        let own = sent;
        if !self.sq_on() || self.is_write(op) {
            return own;
        }
        let k = id / self.n_ops32;
        let r = self.wl.opset_req[o] as usize;
        if k >= 2 {
            execution_start(self.arrived(r), k, self.exec_delay, self.exec_tick)
        } else if self.page_on() {
            self.arrived(r)
        } else if k == 0 {
            own
        } else {
            match self.sent_at.get(o) {
                Some(&at) if at != NOT_SENT => at,
                _ => self.arrived(r),
            }
        }
    }

    /// The reads of a driver speculative execution (or one paged read, or its retry) reach their servers.
    #[inline(always)]
    fn enqueue_execution(&mut self, n: u32, now: u64) {
        for _ in 0..n {
            let (id, o, s) = self
                .p
                .stock
                .as_mut()
                .and_then(|sc| sc.sends.pop_front())
                .expect("execution reads in flight");
            self.enqueue_read(id, o, s as usize, now);
        }
    }

    /// Read `id` (op or copy id) of opset `o` joins server `s`'s queue at `now`.
    #[inline(always)]
    fn enqueue_read(&mut self, id: u32, o: u32, s: usize, now: u64) {
        let wl = self.wl;
        let op = (id % self.n_ops32) as usize;
        if self.fb_on() {
            self.resident[s] += 1;
            if self.large_true(op) {
                self.large_resident[s] += 1;
            }
        }
        let item = QItem::new(
            id,
            o,
            now,
            self.opset_tag.get(o as usize, &wl.opset_req),
            wl.demand[op],
        );
        self.p.sched.enqueue(s, item);
        self.count_queued(s);
        self.mark_dirty(s);
        if let Some(rec) = self.rec.as_mut().filter(|_| id < self.n_ops32) {
            rec.enqueue[op] = now; // a paged read (an execution's reads are copies)
        }
    }

    /// Read `id` of opset `o` leaves its coordinator for server `s` now: it reaches the server one hop later (in
    /// the next driver batch), or at once when the coordinator is `s` (a local read runs inline).
    #[inline(always)]
    fn send_read(&mut self, id: u32, o: usize, s: u32, now: u64) {
        if self.is_local(id, o, s as usize) {
            return self.enqueue_read(id, o as u32, s as usize, now);
        }
        let sc = self.p.stock.as_mut().expect("stock client");
        sc.sends.push_back((id, o as u32, s));
        let key = event_key(now + self.d, self.next_seq());
        self.p.at_servers.push_back((key, DRV_BATCH | 1));
    }

    /// Coordinators are nodes: request `r`'s opsets `o0..o1` whose replica is their coordinator (and that hold
    /// no write) reach their server now, not with the request's batch one hop later; those their server can start
    /// at once run inline (`inline`: no coordinator retry).
    #[inline(always)]
    fn enqueue_local_opsets(&mut self, o0: usize, o1: usize, now: u64) {
        let wl = self.wl;
        for o in o0..o1 {
            let s = self.opset_server[o];
            if s == u32::MAX || self.late.get(o) {
                continue; // held, or procrastinated by TailX
            }
            let (a, b) = (wl.opset_ops[o] as usize, wl.opset_ops[o + 1] as usize);
            if (a..b).any(|op| self.is_write(op)) || !self.is_local(a as u32, o, s as usize) {
                continue;
            }
            if self.can_run_now(s as usize, (b - a) as u32) {
                self.inline.set(o);
            }
            self.late.set(o);
            self.enqueue_opset(o, false, now);
        }
    }

    /// The cost the policy sees: TailX's estimate in ns, Σ mean demand (size-aware), else the op count.
    #[inline(always)]
    fn opset_cost(&self, o: usize, size: u32) -> f64 {
        if let Some(t) = self.tailx.as_ref().filter(|_| EXT) {
            t.opset_cost_ns(size, self.large_ops_of(o))
        } else if self.size_aware {
            let wl = self.wl;
            let (a, b) = (wl.opset_ops[o] as usize, wl.opset_ops[o + 1] as usize);
            wl.mean_demand[a..b].iter().map(|&m| m as f64).sum::<f64>() * self.cost_unit
        } else {
            size as f64
        }
    }

    /// The policy tags the request's opsets o0..o1; TailX (Algorithm 1) puts those with a delay allowance in the
    /// client's delay queue.
    #[inline(always)]
    fn tag_request(&mut self, r: usize, o0: usize, o1: usize, now: u64) {
        self.p.tags.clear();
        self.p.tags.resize(o1 - o0, Tag::default());
        let cfg = &self.cluster.config;
        let ctx = TagCtx {
            now,
            sizes: &self.p.sizes,
            costs: &self.p.costs,
            servers: &self.p.servers,
            outstanding: &self.outstanding,
            slots: cfg.slots,
            service_rate: cfg.service_rate,
        };
        self.p.sched.tag(&ctx, &mut self.p.tags);
        self.opset_tag.set(r, o0, &self.p.tags);
        if self.tailx_on() {
            for i in 0..o1 - o0 {
                let o = o0 + i;
                let dl = self.p.sched.release_delay_ns(&self.p.tags[i]);
                if dl > 0 && self.opset_server[o] != u32::MAX {
                    self.late.set(o);
                    let key = event_key(now + dl, self.next_seq());
                    self.p.delay_q.push(Reverse((key, o as u32)));
                }
            }
        }
    }

    /// Duplication: every sent opset's reads go to the next replica too. Speculative retry: a timer per sent
    /// opset, once the client has a timeout.
    #[inline(always)]
    fn send_copies(&mut self, o0: usize, o1: usize, client: u32, now: u64) {
        let wl = self.wl;
        for o in o0..o1 {
            if self.opset_server[o] == u32::MAX {
                continue; // held by the selector: no copy
            }
            if self.sent_on() {
                self.sent_at[o] = now;
            }
            if self.dup() {
                let c = self.copy_server(o);
                // Writes are at every replica already: only the reads get a copy.
                let mut size = 0;
                for op in wl.opset_ops[o] as usize..wl.opset_ops[o + 1] as usize {
                    if !self.is_write(op) {
                        self.copied.set(op);
                        size += 1;
                    }
                }
                self.outstanding[c as usize] += size;
                self.copies.ops += size as u64;
                let key = event_key(now + self.d, self.next_seq());
                self.p
                    .at_servers
                    .push_back((key, o as u32 | LATE_OPSET | COPY_OPSET));
            } else if self.local_on() && self.inline.get(o) {
                // read inline: done before the retry check, no timer
            } else if let Some(t) = self
                .p
                .spec
                .as_mut()
                .and_then(|e| e.timeout_at(client as usize, now))
            {
                let key = event_key(now + t, self.next_seq());
                self.p.spec_q.push(client as usize, key, o as u32);
            }
        }
    }

    /// Held opsets try again (FIFO); the ones still refused stay held in order. A selector may know that every
    /// held opset would be refused again, or all but those of some servers: the others are not visited.
    #[inline(always)]
    fn on_held_retry(&mut self, key: u128) -> u64 {
        self.p.retries.pop();
        let now = key_time(key);
        self.p.freed.clear();
        let mode = self.p.selector.held_retry(now, &mut self.p.freed);
        match mode {
            HeldRetry::All => self.p.backlog.begin(None),
            HeldRetry::Skip => {}
            HeldRetry::Freed => {
                self.groups_of_freed_servers();
                self.p.backlog.begin(Some(&self.p.cand_groups));
            }
        }
        while let Some((g, held)) = if mode == HeldRetry::Skip {
            None
        } else {
            self.p.backlog.next_held()
        } {
            self.retry_held(g, held, mode, now);
        }
        self.p.backlog.end();
        if !self.p.backlog.is_empty() {
            self.schedule_wakeup(now);
        }
        now
    }

    /// `cand_groups` = the replica groups of the servers the selector freed.
    #[inline(always)]
    fn groups_of_freed_servers(&mut self) {
        if self.p.server_groups.is_empty() {
            self.p.server_groups = vec![Vec::new(); self.n_servers];
            for g in 0..self.cluster.groups() as u32 {
                for &s in self.cluster.replicas(g) {
                    self.p.server_groups[s as usize].push(g);
                }
            }
        }
        self.p.cand_groups.clear();
        let server_groups = &self.p.server_groups;
        self.p.cand_groups.extend(
            self.p
                .freed
                .iter()
                .flat_map(|&s| server_groups[s as usize].iter().copied()),
        );
        self.p.cand_groups.sort_unstable();
        self.p.cand_groups.dedup();
    }

    /// One held opset of group `g` asks the selector again: sent now, or held again in order.
    #[inline(always)]
    fn retry_held(&mut self, g: u32, held: Held, mode: HeldRetry, now: u64) {
        let (_, o, since) = held;
        let o = o as usize;
        let replicas = self.cluster.replicas(g);
        if mode == HeldRetry::Freed && !self.p.selector.may_place_in(replicas) {
            // Nothing more fits this group in this retry: its queue is left as it is.
            self.p.backlog.refuse(g, held);
            self.p.backlog.close(g);
            return;
        }
        let wl = self.wl;
        let size = wl.opset_ops[o + 1] - wl.opset_ops[o];
        let req = wl.opset_req[o];
        let client = wl.client[req as usize];
        let ctx = SelectCtx {
            now,
            client,
            group: g,
            replicas,
            outstanding: &self.outstanding,
            size,
            large_ops: self.large_ops_of(o),
        };
        match self.p.selector.choose(&ctx) {
            Some(s) => {
                self.opset_server[o] = s;
                self.outstanding[s as usize] += size;
                if self.fb_on() {
                    self.sent_at[o] = now;
                }
                self.held_wait_ns += (now - since) as u128;
                let key = event_key(now + self.d, self.next_seq());
                self.p.at_servers.push_back((key, o as u32 | LATE_OPSET));
            }
            None => self.p.backlog.refuse(g, held),
        }
    }

    /// TailX Algorithm 2: a procrastinated opset's time has come; it is sent to its replica.
    #[inline(always)]
    fn on_delay_release(&mut self, key: u128) -> u64 {
        let Reverse((_, o)) = self.p.delay_q.pop().expect("head exists");
        let now = key_time(key);
        if self.sent_on() {
            self.sent_at[o as usize] = now;
        }
        if self.local_on() && self.opset_local(o as usize) {
            self.enqueue_opset(o as usize, false, now);
            return now;
        }
        let key = event_key(now + self.d, self.next_seq());
        self.p.at_servers.push_back((key, o | LATE_OPSET));
        now
    }

    /// Speculative retry: the opset's ops whose answers have not reached the client are re-issued to the next
    /// replica.
    #[inline(always)]
    fn on_speculative_timer(&mut self, key: u128) -> u64 {
        let (_, o) = self.p.spec_q.pop().expect("head exists");
        let now = key_time(key);
        if o & DRV_TIMER != 0 {
            return self.on_execution(now, o & !DRV_TIMER);
        }
        if self.page_on() && o & PAGE_SEND != 0 {
            let op = (o & !PAGE_SEND) as usize;
            let r = self.wl.opset_req[self.opset_of(op)] as usize;
            if !(self.drop_on() && self.timed_out[r]) {
                self.page_send(r, op, now);
            }
            return now;
        }
        if self.page_on() && o & PAGE_TIMER != 0 {
            self.page_retry((o & !PAGE_TIMER) as usize, now);
            return now;
        }
        let o = o as usize;
        let wl = self.wl;
        if self.drop_on() && self.timed_out[wl.opset_req[o] as usize] {
            return now;
        }
        let mut n = 0;
        let arrived = self.arrived(wl.opset_req[o] as usize);
        for op in wl.opset_ops[o] as usize..wl.opset_ops[o + 1] as usize {
            if self.answered_at.at(op, arrived) > now && !self.is_write(op) {
                self.copied.set(op);
                n += 1;
            }
        }
        if n > 0 {
            let c = self.copy_server(o);
            self.outstanding[c as usize] += n;
            self.copies.ops += n as u64;
            if self.local_on() && self.is_local(wl.opset_ops[o] + self.n_ops32, o, c as usize) {
                // (the opset's first op stands for it: every op of an opset has its coordinator)
                self.enqueue_opset(o, true, now);
                return now;
            }
            let key = event_key(now + self.d, self.next_seq());
            self.p
                .at_servers
                .push_back((key, o as u32 | LATE_OPSET | COPY_OPSET));
        }
        now
    }

    // ---------------------------------------------------------------------------------------- server side

    /// A request's opsets (or one late opset, or a copy) reach their servers: their ops are enqueued.
    #[inline(always)]
    fn on_reach_servers(&mut self) -> u64 {
        let (key, r) = self.p.at_servers.pop_front().expect("head exists");
        let now = key_time(key);
        if EXT && r & LATE_OPSET == 0 && r & DRV_BATCH != 0 {
            self.enqueue_execution(r & !DRV_BATCH, now);
            return now;
        }
        let r = r as usize;
        let copy = EXT && r as u32 & COPY_OPSET != 0;
        let late_entry = EXT && r as u32 & LATE_OPSET != 0;
        let (o_lo, o_hi) = if late_entry {
            let o = r & !((LATE_OPSET | COPY_OPSET) as usize);
            (o, o + 1)
        } else {
            (
                self.wl.req_opsets[r] as usize,
                self.wl.req_opsets[r + 1] as usize,
            )
        };
        for o in o_lo..o_hi {
            if EXT && !late_entry && !self.late.is_empty() && self.late.get(o) {
                continue; // sent on its own later
            }
            self.enqueue_opset(o, copy, now);
        }
        now
    }

    /// The ops of opset `o` (its copies with `copy`) join their server's queue; a write's copies join the other
    /// replicas' queues.
    #[inline(always)]
    fn enqueue_opset(&mut self, o: usize, copy: bool, now: u64) {
        let wl = self.wl;
        let s = if copy {
            self.copy_server(o)
        } else {
            self.opset_server[o]
        } as usize;
        if self.fb_on() && !copy {
            self.resident[s] += wl.opset_ops[o + 1] - wl.opset_ops[o];
            let truth = &self.rc.sizes.large_true;
            if !truth.is_empty() {
                let (a, b) = (wl.opset_ops[o] as usize, wl.opset_ops[o + 1] as usize);
                self.large_resident[s] += truth[a..b].iter().filter(|&&l| l).count() as u32;
            }
        }
        let tag = self.opset_tag.get(o, &wl.opset_req);
        for op in wl.opset_ops[o]..wl.opset_ops[o + 1] {
            if copy {
                if !self.copied.get(op as usize) {
                    continue;
                }
                if self.fb_on() {
                    self.resident[s] += 1;
                    if self.large_true(op as usize) {
                        self.large_resident[s] += 1;
                    }
                }
                let item = QItem::new(
                    op + self.n_ops32,
                    o as u32,
                    now,
                    tag,
                    wl.demand[op as usize],
                );
                self.p.sched.enqueue(s, item);
                self.count_queued(s);
                continue;
            }
            self.p.sched.enqueue(
                s,
                QItem::new(op, o as u32, now, tag, wl.demand[op as usize]),
            );
            self.count_queued(s);
            if let Some(rec) = self.rec.as_mut() {
                rec.enqueue[op as usize] = now;
            }
        }
        self.mark_dirty(s);
        if self.write_on() && !copy {
            self.enqueue_write_copies(o, s, tag, now);
        }
    }

    /// A write is served at every replica of its group: copies k = 1.. (op id op + k·n_ops) to the replicas
    /// other than `s`, in replica order.
    #[inline(always)]
    fn enqueue_write_copies(&mut self, o: usize, s: usize, tag: Tag, now: u64) {
        let wl = self.wl;
        for op in wl.opset_ops[o]..wl.opset_ops[o + 1] {
            if !self.rc.writes[op as usize] {
                continue;
            }
            self.writes.ops += 1;
            let mut k = 0u32;
            for &t in self.cluster.replicas(wl.opset_group[o]) {
                let t = t as usize;
                if t == s {
                    continue;
                }
                k += 1;
                self.writes.copies += 1;
                self.outstanding[t] += 1;
                if self.fb_on() {
                    self.resident[t] += 1;
                    if self.large_true(op as usize) {
                        self.large_resident[t] += 1;
                    }
                }
                let item = QItem::new(
                    op + k * self.n_ops32,
                    o as u32,
                    now,
                    tag,
                    wl.demand[op as usize],
                );
                self.p.sched.enqueue(t, item);
                self.count_queued(t);
                self.mark_dirty(t);
            }
        }
    }

    /// An op ends at a server slot: the slot is free, the selector hears about it, and the request completes when
    /// this was its last unanswered op (the response reaches the client one network latency later; a read its
    /// coordinator served itself is there when it ends).
    #[inline(always)]
    fn on_op_done(&mut self) -> u64 {
        let c = self.p.timers.pop().expect("head exists");
        let now = c.time;
        let (op, o, slot) = (c.op as usize, c.opset as usize, c.slot);
        let n_ops = self.n_ops;
        let is_copy = EXT && op >= n_ops;
        let op = if is_copy { op % n_ops } else { op };
        let s = c.server as usize;
        self.free[s] |= 1u64 << slot;
        self.outstanding[s] -= 1;
        let svc = self.slot_svc[s * self.cluster.config.slots as usize + slot as usize];
        self.server_demand[s] += svc;
        if EXT {
            self.served_ops += 1;
        }
        self.p.sched.on_done(s, op as u32, now);
        let end = self.read_end(c.op, o, s, now);
        if self.route_on() && !self.is_write(op) {
            self.driver_answer(&end);
        }
        let st = if self.sent_on() {
            self.sent_of(o)
        } else {
            Sent::default()
        };
        if self.fb_on() {
            let enq = self.slot_enq[s * self.cluster.config.slots as usize + slot as usize];
            self.op_feedback(&end, svc, st, enq);
        }
        let r = if self.fb_on() {
            st.req
        } else {
            self.wl.opset_req[o]
        } as usize;
        if self.drop_on() && self.timed_out[r] {
            // answered with a timeout already: a late answer is ignored
            self.mark_dirty(s);
            return now;
        }
        // With copies (and writes at every replica), only an op's first answer counts.
        let first = !self.multi() || !self.answered_at.answered(op);
        if self.multi() && first {
            self.first_answer(op, o, r, is_copy, st, end.at);
        }
        if first {
            if self.page_on() {
                self.page_answer(op, r, end.at);
            }
            self.remaining[r] -= 1;
            if self.remaining[r] == 0 {
                self.complete_request(r, s, now, end.at);
            }
        }
        self.mark_dirty(s);
        now
    }

    /// Read `id` (op or copy id) of opset `o` ends at server `s` at `now` (or is dropped there): its coordinator
    /// and when the coordinator hears of it. Takes the read's entry in `StockClient::exec_coord` out.
    #[inline(always)]
    fn read_end(&mut self, id: u32, o: usize, s: usize, now: u64) -> ReadEnd {
        let coord = if self.local_on() {
            let c = self.coordinator_of(id, o);
            if self.route_on() && id / self.n_ops32 >= 2 {
                if let Some(sc) = self.p.stock.as_mut() {
                    sc.exec_coord.remove(&id);
                }
            }
            c
        } else {
            None
        };
        let local = coord == Some(s as u32) && !self.is_write((id % self.n_ops32) as usize);
        ReadEnd {
            id,
            o,
            s,
            coord,
            local,
            at: now + if local { 0 } else { self.d },
        }
    }

    /// The per-partition shape: a read of a driver request answers the driver when its coordinator has the
    /// key's first answer of that request — the first execution's read or its coordinator retry, whichever
    /// answers first; a later execution's read sent to a node of the plan. (Writes are no driver requests: the
    /// caller leaves them out; the reads of executions past the plan's replicas have a coordinator that is no
    /// replica, not counted.)
    #[inline(always)]
    fn driver_answer(&mut self, end: &ReadEnd) {
        let Some(n) = end.coord else {
            return;
        };
        let k = end.id / self.n_ops32;
        if k <= 1 && !self.drv_done.is_empty() {
            let op = (end.id % self.n_ops32) as usize;
            if self.drv_done.get(op) {
                return;
            }
            self.drv_done.set(op);
        }
        let client = self.wl.client[self.wl.opset_req[end.o] as usize];
        let sc = self.p.stock.as_mut().expect("stock client");
        sc.driver.answered(client, n, end.at);
    }

    /// The selector's per-op feedback (none for a read its coordinator served itself: it sent no message); held
    /// opsets get another chance when the response reaches the client.
    #[inline(always)]
    fn op_feedback(&mut self, end: &ReadEnd, svc: u64, st: Sent, enq: u64) {
        let d = self.d;
        let s = end.s;
        let op = (end.id % self.n_ops32) as usize;
        self.resident[s] -= 1;
        if self.large_true(op) {
            self.large_resident[s] -= 1;
        }
        if !end.local {
            let since_start_ns = end.at - self.read_start(end.id, op, end.o, enq - d);
            let fb = Feedback {
                client: match end.coord {
                    Some(n) if self.route_on() => self.cluster.config.clients + n,
                    _ => st.client,
                },
                server: s as u32,
                at: end.at,
                queue: self.resident[s],
                service_ns: svc,
                // an execution's read of a held opset: sent d before it reached its server (enqueued on arrival)
                response_ns: if st.at == NOT_SENT {
                    end.at + d - enq
                } else {
                    end.at - st.at
                },
                since_start_ns,
                large_resident: self.large_resident[s],
                large_est: !self.rc.sizes.large_est.is_empty() && self.rc.sizes.large_est[op],
            };
            self.p.selector.on_op_response(&fb);
        }
        if !self.p.backlog.is_empty() && end.at != self.last_feedback_retry {
            self.last_feedback_retry = end.at;
            let key = event_key(end.at, self.next_seq());
            self.p.retries.push(Reverse(key));
        }
    }

    /// The first answer of an op that may be answered twice: counted; a speculative client learns the opset's
    /// response time from its last first answer.
    #[inline(always)]
    fn first_answer(&mut self, op: usize, o: usize, r: usize, is_copy: bool, st: Sent, at: u64) {
        let arrived = self.arrived(r);
        self.answered_at.set(op, arrived, at);
        self.copies.wins += (is_copy && !self.is_write(op)) as u64;
        let redundant = self.redundant();
        if self.sq_on() {
            if !self.page_on() {
                self.query_answer(op, r, at);
            }
        } else if let Some(e) = self.p.spec.as_mut().filter(|_| redundant) {
            self.opset_left[o] -= 1;
            if self.opset_left[o] == 0 {
                e.observe_at(self.wl.client[r] as usize, at - st.at, at);
            }
        }
    }

    /// The coordinator section: op `op` of request `r` has its first answer at the client at `at`; when it was its query's last,
    /// the coordinator records the query's latency once per key (the percentile threshold's samples).
    #[inline(always)]
    fn query_answer(&mut self, op: usize, r: usize, at: u64) {
        let sent = self.arrived(r);
        let client = self.wl.client[r] as usize;
        let sc = self.p.stock.as_mut().expect("stock client");
        let keys = if sc.per_key {
            1 // the op's own query (answered: `answered_at`)
        } else {
            let (a, b) = request_ops(self.wl, r);
            let q = sc.queries.of(self.wl, op, r, a);
            sc.queries.left[q] -= 1;
            if sc.queries.left[q] != 0 {
                return;
            }
            sc.queries.done_at[q] = at;
            sc.queries.keys(q, r, b - a)
        };
        if let Some(e) = self.p.spec.as_mut() {
            for _ in 0..keys {
                e.observe_at(client, at - sent, at);
            }
        }
    }

    /// When request `r` arrived at its client (closed loop: when its thread issued it).
    #[inline(always)]
    fn arrived(&self, r: usize) -> u64 {
        if self.closed_on() {
            self.arrival_rt[r]
        } else {
            self.wl.arrival[r]
        }
    }

    /// Request `r` has its last answer (from server `s`, where it ended at `now`; at the coordinator at `at`): its
    /// latency is known; a closed-loop thread thinks, then issues the next request in workload order.
    ///
    /// With a measured client round trip (`client_rtt`), the reported latency is the engine's (after the read
    /// timeout's clamp) less the two constant client hops (none when its last answer was a read its coordinator
    /// served itself), plus the request's drawn round trip; the request is
    /// complete at its client at arrival + that latency (or `now`, when a draw shorter than the hops would put it
    /// earlier), which is when its closed-loop thread starts thinking. With a per-partition cost (`client_key`),
    /// (keys − 1) × it is added to the reported latency (and so to the completion at the client) too, timed out or
    /// not. The coordinator's own figures (its latency samples, the timeout, the selectors' feedback) keep the
    /// engine's times.
    #[inline(always)]
    fn complete_request(&mut self, r: usize, s: usize, now: u64, at: u64) {
        let hops = 2 * (at - now);
        let arrived = self.arrived(r);
        let mut latency = at - arrived;
        if self.drop_on() && latency > self.read_timeout {
            // answered by reads that started in time, but after the deadline: the coordinator timed out
            latency = self.read_timeout;
            self.timeouts.requests += 1;
        }
        // the client's and the coordinator's work on each partition beyond the first (`client_key`)
        let per_key = if self.client_key == 0 {
            0
        } else {
            let (a, b) = request_ops(self.wl, r);
            (b - a).saturating_sub(1) as u64 * self.client_key
        };
        let done = if self.client_rtt.is_empty() {
            latency += per_key;
            at + per_key
        } else {
            latency = latency.saturating_sub(hops) + self.client_rtt[r] + per_key;
            (arrived + latency).max(now)
        };
        self.latency[r] = latency;
        if latency > self.stop_above && r >= self.stop_from {
            self.stop_left -= 1;
        }
        if EXT {
            self.last_done = self.last_done.max(done);
        }
        if self.closed_on() {
            let seq = self.next_seq();
            self.p
                .ready
                .push(Reverse((done + self.think[r], seq, self.thread_of[r])));
        }
        self.p.selector.on_response(self.wl.client[r], s as u32, at);
    }

    /// Server `s` reaches read `id` (op or copy id) of opset `o`, which reached it at `enq`, after its message
    /// expired (sent at `enq` − d, expired a read timeout later): the read is dropped unserved. Its request is
    /// past its deadline: unless answered already, it is answered with a timeout now.
    #[inline(always)]
    fn drop_read(&mut self, s: usize, id: u32, o: usize, enq: u64, now: u64) {
        let op = (id % self.n_ops32) as usize;
        self.outstanding[s] -= 1;
        self.timeouts.dropped_reads += 1;
        let end = self.read_end(id, o, s, now);
        if self.route_on() {
            self.driver_answer(&end);
        }
        let st = if self.sent_on() {
            self.sent_of(o)
        } else {
            Sent::default()
        };
        if self.fb_on() {
            self.op_feedback(&end, 0, st, enq);
        }
        let r = self.wl.opset_req[o] as usize;
        let answered = self.multi() && self.answered_at.answered(op);
        if !answered && !self.timed_out[r] && self.remaining[r] != 0 {
            self.time_out(r, s, now);
        }
    }

    /// Request `r` is answered with a timeout at `now` (its deadline has passed): its latency is the read
    /// timeout; its unanswered queries record a latency past the timeout in the coordinator's histogram, once per
    /// key (the time to `now`: Cassandra records a timed-out read after its wait ends, so its sample is above the
    /// timeout, and a percentile that lands there means no speculation).
    #[inline(always)]
    fn time_out(&mut self, r: usize, s: usize, now: u64) {
        self.timed_out[r] = true;
        self.remaining[r] = 0;
        if self.sq_on() {
            let client = self.wl.client[r] as usize;
            let sent = self.arrived(r);
            let sample = now - sent;
            let sc = self.p.stock.as_mut().expect("stock client");
            if sc.paged {
                // The partition read in flight, from its own send.
                let sample = now - sc.page_at[r];
                if let Some(e) = self.p.spec.as_mut() {
                    e.observe_at(client, sample, now);
                }
            } else if sc.per_key {
                // The keys not answered yet (a coordinator retry makes the engine keep every op's first answer;
                // without one nothing reads a query's end but the driver's executions, from `answered_at`).
                if let Some(e) = self.p.spec.as_mut() {
                    let (a, b) = request_ops(self.wl, r);
                    for op in a..b {
                        if !self.answered_at.answered(op) {
                            e.observe_at(client, sample, now);
                        }
                    }
                }
            } else {
                let (a, b) = request_ops(self.wl, r);
                for q in sc.queries.req_start[r] as usize..sc.queries.req_start[r + 1] as usize {
                    if sc.queries.done_at[q] != u64::MAX {
                        continue;
                    }
                    sc.queries.done_at[q] = now;
                    if let Some(e) = self.p.spec.as_mut() {
                        for _ in 0..sc.queries.keys(q, r, b - a) {
                            e.observe_at(client, sample, now);
                        }
                    }
                }
            }
        }
        // past the deadline: `complete_request` counts the timeout and takes the read timeout as the latency
        self.complete_request(r, s, now, now + self.d);
    }

    /// Once no other event is due at `now`, every dirty server starts ops in its free slots (lowest index first),
    /// in the order the servers became dirty.
    #[inline(always)]
    fn dispatch_after(&mut self, now: u64) {
        let next_arrival = if self.next_req >= self.n_req {
            u64::MAX
        } else if self.closed_on() {
            self.p.ready.peek().map_or(u64::MAX, |k| k.0 .0)
        } else {
            self.wl.arrival[self.next_req]
        };
        let mut next_event = self
            .p
            .at_servers
            .front()
            .map_or(u128::MAX, |e| e.0)
            .min(self.p.timers.peek_key().unwrap_or(u128::MAX));
        if EXT {
            next_event = next_event
                .min(self.p.delay_q.peek().map_or(u128::MAX, |k| k.0 .0))
                .min(self.p.spec_q.peek_key().unwrap_or(u128::MAX));
        }
        let next_t = if next_event == u128::MAX {
            next_arrival
        } else {
            key_time(next_event).min(next_arrival)
        };
        if next_t > now {
            for i in 0..self.p.dirty.len() {
                let s = self.p.dirty[i] as usize;
                self.is_dirty[s] = false;
                self.start_ops(s, now);
            }
            self.p.dirty.clear();
        }
    }

    /// Server `s` starts ops in its free slots while its queue has any.
    #[inline(always)]
    fn start_ops(&mut self, s: usize, now: u64) {
        let n_ops32 = self.n_ops32;
        let slots = self.cluster.config.slots as usize;
        while self.free[s] != 0 {
            let Some(item) = self.p.sched.pick(s, now) else {
                break;
            };
            if self.local_on() {
                self.queued[s] -= 1;
            }
            if self.drop_on() {
                let real = (item.op % n_ops32) as usize;
                let o = item.opset as usize;
                let hop = if self.is_local(item.op, o, s) {
                    0
                } else {
                    self.d
                };
                if !self.is_write(real)
                    && now > self.read_start(item.op, real, o, item.enq - hop) + self.read_timeout
                {
                    self.drop_read(s, item.op, item.opset as usize, item.enq, now);
                    continue;
                }
            }
            let slot = self.free[s].trailing_zeros();
            self.free[s] &= !(1u64 << slot);
            let real = if EXT && item.op >= n_ops32 {
                item.op % n_ops32
            } else {
                item.op
            };
            let dem = item.demand(real as usize, &self.wl.demand);
            let end = match self.p.smodel.as_mut().filter(|_| EXT) {
                Some(m) => m.end(s, now, dem),
                None => now + dem,
            };
            self.slot_svc[s * slots + slot as usize] = end - now;
            if self.fb_on() {
                self.slot_enq[s * slots + slot as usize] = item.enq;
            }
            self.p
                .timers
                .start(s, slot, end, self.seq, item.op, item.opset);
            // What the op's end reads first (it is cold when the op waited long in the queue).
            if self.sent_on() {
                prefetch(self.sent_at.as_ptr().wrapping_add(item.opset as usize));
            }
            prefetch(self.wl.opset_req.as_ptr().wrapping_add(item.opset as usize));
            self.seq += 1;
            if let Some(rec) = self.rec.as_mut().filter(|_| item.op < n_ops32) {
                let i = item.op as usize;
                rec.request[i] = self.wl.opset_req[item.opset as usize];
                rec.opset[i] = item.opset;
                rec.server[i] = s as u32;
                rec.slot[i] = slot;
                rec.start[i] = now;
                rec.end[i] = end;
            }
        }
    }
}
