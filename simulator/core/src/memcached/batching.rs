//! `batching`: the state of practice — all keys of a request in one multiget query, no merging.

use super::{DispatchState, Subrequest};

/// Batching has no parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchingConfig;

impl BatchingConfig {
    pub const NAME: &'static str = "batching";

    pub(crate) fn dispatch(
        &self,
        st: &mut DispatchState,
        request: usize,
        keys: u32,
        server: u32,
        out: &mut Vec<Subrequest>,
    ) {
        st.whole(request, keys, server, out);
    }
}
