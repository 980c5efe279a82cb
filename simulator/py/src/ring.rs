//! Binding of an explicit token ring (`kvsim_core::ring`): `Ring` places the replicas once (validating the ring:
//! errors are `RingError`, naming the part at fault), and `Cluster(..., ring=...)` replays on it.
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use kvsim_core::ring::{Placement, Ring, RingNode, Strategy};

use crate::buffers::{bytes_of, vec_of};
use crate::errors::{to_py, RingError};

/// An explicit ring, its replicas placed on construction (`RingError` when it is invalid). Node i is in datacenter
/// `dcs[i]`, rack `racks[i]` and owns `tokens[i]`; exactly one of `replication_factor` (SimpleStrategy) or
/// `replication` ([(dc, RF), ...]: NetworkTopologyStrategy).
#[pyclass(module = "kvsim._kvsim", name = "Ring", frozen)]
pub struct PyRing {
    pub(crate) placement: Arc<Placement>,
}

#[pymethods]
impl PyRing {
    /// Node `i` is in datacenter `dcs[i]`, rack `racks[i]` and owns `tokens[i]`; the strategy is SimpleStrategy
    /// with `replication_factor`, or NetworkTopologyStrategy with `replication` [(dc, RF), ...] (exactly one).
    #[new]
    #[pyo3(signature = (dcs, racks, tokens, local_dc, *, replication_factor=None, replication=None))]
    fn new(
        py: Python<'_>,
        dcs: Vec<String>,
        racks: Vec<String>,
        tokens: Vec<Vec<i64>>,
        local_dc: String,
        replication_factor: Option<u32>,
        replication: Option<Vec<(String, u32)>>,
    ) -> PyResult<Self> {
        if dcs.len() != racks.len() || dcs.len() != tokens.len() {
            return Err(RingError::new_err(format!(
                "bad ring: 'nodes': {} datacenters, {} racks and {} token lists",
                dcs.len(),
                racks.len(),
                tokens.len()
            )));
        }
        let strategy = match (replication_factor, replication) {
            (Some(rf), None) => Strategy::Simple {
                replication_factor: rf,
            },
            (None, Some(r)) => Strategy::NetworkTopology { replication: r },
            _ => return Err(RingError::new_err(
                "bad ring: 'strategy': give exactly one of replication_factor (SimpleStrategy) or \
                     replication (NetworkTopologyStrategy)",
            )),
        };
        let ring = Ring {
            nodes: dcs
                .into_iter()
                .zip(racks)
                .zip(tokens)
                .map(|((dc, rack), tokens)| RingNode { dc, rack, tokens })
                .collect(),
            strategy,
            local_dc,
        };
        let placement = py.detach(|| ring.place()).map_err(to_py)?;
        Ok(PyRing {
            placement: Arc::new(placement),
        })
    }

    /// Number of token ranges (= ring tokens).
    #[getter]
    fn ranges(&self) -> usize {
        self.placement.ranges()
    }

    /// Replicas per range, every datacenter.
    #[getter]
    fn width(&self) -> usize {
        self.placement.width
    }

    /// The local datacenter's RF.
    #[getter]
    fn local_rf(&self) -> usize {
        self.placement.local_rf
    }

    /// The ring's tokens (int64, ascending) as bytes.
    fn tokens<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes_of(py, &self.placement.tokens)
    }

    /// The node owning each token (uint32) as bytes.
    fn owners<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes_of(py, &self.placement.owners)
    }

    /// ranges × width node indices (uint32), Cassandra's replica order, as bytes.
    fn replica_table<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes_of(py, &self.placement.replicas)
    }

    /// The node of each simulated server (uint32: the local datacenter's nodes in node order) as bytes.
    fn servers<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        bytes_of(py, &self.placement.servers)
    }

    /// The range (uint32) of each key token (int64 array) as bytes.
    fn ranges_of<'py>(
        &self,
        py: Python<'py>,
        tokens: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let t: Vec<i64> = vec_of(py, tokens, "tokens")?;
        let r: Vec<u32> = t
            .iter()
            .map(|&x| self.placement.range_of(x) as u32)
            .collect();
        Ok(bytes_of(py, &r))
    }
}
