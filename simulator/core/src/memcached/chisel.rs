//! `chisel`: split elephant requests into chunks over consecutive query threads, merge `B` consecutive mice
//! into one query on one thread (piggybacked while the thread sets the query up).

use super::{DispatchState, Subrequest};
use crate::params::{Domain, ParamSpec, Search};

const fn int_param(
    name: &'static str,
    doc: &'static str,
    default: f64,
    search: Search,
) -> ParamSpec {
    ParamSpec {
        name,
        doc,
        default,
        lo: 1.0,
        hi: u32::MAX as f64,
        domain: Domain::Integer,
        valid: "integer >= 1",
        search,
    }
}

/// Chisel's parameters. Without a split rule and a merge level the Python front takes the analyzer's levels
/// (`kvsim.chisel.grid_search`); the search ranges are the tuner's defaults for a workload whose median /
/// p99 / largest request has 10 / 100 / 100 keys.
pub const CHISEL_PARAMS: &[ParamSpec] = &[
    int_param(
        "split_keys",
        "Chunk size L of a split elephant, keys (default: no split).",
        u32::MAX as f64,
        Search::int_log(1, 100),
    ),
    int_param(
        "split_chunks",
        "Number of balanced chunks of a split elephant (instead of split_keys).",
        1.0,
        Search::Fixed,
    ),
    int_param(
        "merge",
        "Merge level B: consecutive mice merged into one query.",
        1.0,
        Search::int(1, 8),
    ),
    int_param(
        "elephant_threshold",
        "Requests of more keys than this are elephants (split); the others are mice (merged).",
        50.0,
        Search::int_log(10, 100),
    ),
];

/// How an elephant request is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitRule {
    /// Chunk size L: `ceil(K / L)` balanced chunks.
    ChunkKeys(u32),
    /// A fixed number of balanced chunks (at most K).
    Chunks(u32),
}

impl SplitRule {
    /// Number of chunks for a request of `keys` keys.
    pub fn chunks(&self, keys: u32) -> u32 {
        match *self {
            SplitRule::ChunkKeys(l) => keys.div_ceil(l.max(1)),
            SplitRule::Chunks(n) => n.clamp(1, keys.max(1)),
        }
    }
}

/// Chisel's levels: `split` for requests of more than `elephant_threshold` keys, `merge` (B) for the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChiselConfig {
    pub split: SplitRule,
    pub merge: u32,
    pub elephant_threshold: u32,
}

impl Default for ChiselConfig {
    fn default() -> Self {
        Self {
            split: SplitRule::ChunkKeys(u32::MAX),
            merge: 1,
            elephant_threshold: 50,
        }
    }
}

impl ChiselConfig {
    pub const NAME: &'static str = "chisel";

    pub(crate) fn validate(&self) -> Result<(), String> {
        match self.split {
            SplitRule::ChunkKeys(0) => return Err("split_keys (chunk size L) must be >= 1".into()),
            SplitRule::Chunks(0) => return Err("split_chunks must be >= 1".into()),
            _ => {}
        }
        if self.merge == 0 {
            return Err("merge (B) must be >= 1".into());
        }
        Ok(())
    }

    pub fn is_elephant(&self, keys: u32) -> bool {
        keys > self.elephant_threshold
    }

    pub(crate) fn dispatch(
        &self,
        st: &mut DispatchState,
        request: usize,
        keys: u32,
        server: u32,
        out: &mut Vec<Subrequest>,
    ) {
        if self.is_elephant(keys) {
            st.split(request, keys, self.split.chunks(keys), server, out);
        } else if self.merge > 1 {
            st.merge(request, keys, self.merge, server, out);
        } else {
            st.whole(request, keys, server, out);
        }
    }
}
