//! `stock`: what stock Cassandra 5.0 does on a CL ONE read — FIFO request stages per replica, the read sent to
//! the selector's first replica, and the coordinator section ([`CoordinatorConfig`](crate::coordinator::CoordinatorConfig):
//! speculative retry, the driver, the multiget shape) starting from Cassandra's and the driver's defaults
//! ([`CoordinatorConfig::cassandra`](crate::coordinator::CoordinatorConfig::cassandra), `99p`). The policy itself has no
//! parameters: the coordinator's are the section's, which every queue policy but `duplicate` and `speculative`
//! accepts (off by default for them).
use super::fifo::Fifo;

crate::params! {
    pub struct StockConfig for "policy 'stock'" {}
}

/// `fifo`'s scheduler under `stock`'s config (the request stages serve in arrival order).
pub type Stock = Fifo<StockConfig>;
