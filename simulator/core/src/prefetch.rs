//! A software prefetch hint, for data the event loop will need soon but cannot read yet without stalling
//! (with long server queues, an op's records are cold by the time it starts and ends).

/// Asks the CPU to bring the cache line holding `p` closer (into L1); never reads it, and has no effect on
/// targets other than x86-64. `p` may be any address, even dangling: only a hint is issued.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is a hint with no architectural effect: it does not fault, whatever the address, and
    // SSE is part of the x86-64 baseline, so the instruction always exists.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::prefetch;

    #[test]
    fn a_hint_on_any_address_does_not_fault() {
        let v = [7u64; 4];
        prefetch(v.as_ptr().wrapping_add(2));
        prefetch(v.as_ptr().wrapping_add(1 << 40)); // far outside the allocation
        prefetch(std::ptr::null::<u64>());
        assert_eq!(v[2], 7);
    }
}
