//! Bloom filter of the keys whose value exceeds THR_L (Héron §IV-A, TailX §3.3).
//!
//! Keys are represented by their 64-bit ring token (Murmur3 of the key, as the coordinator computes it anyway);
//! the k bit positions come from Kirsch–Mitzenmacher double hashing of two SplitMix64 mixes of the token.
//! Sized for `n` keys and a target false-positive rate: m = ⌈−n ln p / (ln 2)²⌉ bits, k = round(m/n · ln 2).
//! Filters of equal shape OR-merge (what coordinators do with the replicas' filters).
use crate::error::{check_range, SimError};

/// Target false-positive rate used by default: a tenth of Héron's 0.1 % bound, so that the rate measured on a
/// few thousand small keys stays below the bound too (19.2 bits and 13 hashes per large key).
pub const DEFAULT_FP_TARGET: f64 = 0.0001;

#[derive(Debug, Clone, PartialEq)]
pub struct Bloom {
    bits: Vec<u64>,
    m: u64,
    k: u32,
}

#[inline]
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Bloom {
    /// An empty filter sized for `n` keys at false-positive rate `fp`.
    pub fn with_capacity(n: usize, fp: f64) -> Result<Bloom, SimError> {
        check_range(
            "bloom_fp",
            fp,
            1e-9,
            0.5,
            "(0, 0.5] (target false-positive rate)",
        )?;
        let n = n.max(1) as f64;
        let ln2 = std::f64::consts::LN_2;
        let m = ((-n * fp.ln()) / (ln2 * ln2)).ceil().max(64.0) as u64;
        let k = ((m as f64 / n) * ln2).round().clamp(1.0, 32.0) as u32;
        Ok(Bloom {
            bits: vec![0; m.div_ceil(64) as usize],
            m,
            k,
        })
    }

    /// Bits and hash functions.
    pub fn shape(&self) -> (u64, u32) {
        (self.m, self.k)
    }

    #[inline]
    fn positions(&self, token: i64) -> impl Iterator<Item = u64> + '_ {
        let h1 = mix(token as u64);
        let h2 = mix(h1 ^ 0x5851_F42D_4C95_7F2D) | 1;
        (0..self.k as u64).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % self.m)
    }

    pub fn insert(&mut self, token: i64) {
        let pos: Vec<u64> = self.positions(token).collect();
        for p in pos {
            self.bits[(p / 64) as usize] |= 1u64 << (p % 64);
        }
    }

    #[inline]
    pub fn contains(&self, token: i64) -> bool {
        self.positions(token)
            .all(|p| self.bits[(p / 64) as usize] & (1u64 << (p % 64)) != 0)
    }

    /// OR-merge of a filter of the same shape.
    pub fn merge(&mut self, other: &Bloom) -> Result<(), SimError> {
        if (self.m, self.k) != (other.m, other.k) {
            return Err(SimError::BadInput(
                "Bloom filters of different shapes cannot be merged".into(),
            ));
        }
        for (a, b) in self.bits.iter_mut().zip(&other.bits) {
            *a |= *b;
        }
        Ok(())
    }

    /// Fraction of `tokens` (keys known NOT to be in the set) that the filter reports present.
    pub fn false_positive_rate(&self, negatives: &[i64]) -> f64 {
        if negatives.is_empty() {
            return 0.0;
        }
        negatives.iter().filter(|&&t| self.contains(t)).count() as f64 / negatives.len() as f64
    }
}

/// The large-key filter of a dataset: distinct `(token, value size)` pairs → the OR-merge of one filter per
/// replica group's owner (here: one per `parts` shard of the keys, as replicas build them), each sized for the
/// whole large set. Returns the filter and its measured false-positive rate over the small keys.
pub fn build_large_filter(
    tokens: &[i64],
    sizes: &[f64],
    thr_l_bytes: f64,
    fp: f64,
    parts: usize,
) -> Result<(Bloom, f64), SimError> {
    if tokens.len() != sizes.len() {
        return Err(SimError::BadInput(format!(
            "{} value sizes for {} keys",
            sizes.len(),
            tokens.len()
        )));
    }
    let mut large: Vec<i64> = Vec::new();
    let mut small: Vec<i64> = Vec::new();
    for (&t, &s) in tokens.iter().zip(sizes) {
        if s > thr_l_bytes {
            large.push(t);
        } else {
            small.push(t);
        }
    }
    large.sort_unstable();
    large.dedup();
    small.sort_unstable();
    small.dedup();
    // A key whose value was replaced by a large one counts as large (filters are append-only).
    small.retain(|t| large.binary_search(t).is_err());
    let parts = parts.max(1);
    let mut merged = Bloom::with_capacity(large.len(), fp)?;
    for p in 0..parts {
        let mut f = Bloom::with_capacity(large.len(), fp)?;
        for &t in large
            .iter()
            .filter(|&&t| (t as u64 % parts as u64) as usize == p)
        {
            f.insert(t);
        }
        merged.merge(&f)?;
    }
    let measured = merged.false_positive_rate(&small);
    Ok((merged, measured))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::token_of_u64;

    #[test]
    fn no_false_negatives_and_fp_below_target() {
        let tokens: Vec<i64> = (0..40_000u64).map(token_of_u64).collect();
        let sizes: Vec<f64> = (0..40_000u64)
            .map(|i| if i % 10 == 0 { 524_288.0 } else { 1024.0 })
            .collect();
        let (f, fp) = build_large_filter(&tokens, &sizes, 262_144.0, DEFAULT_FP_TARGET, 5).unwrap();
        for i in (0..40_000u64).step_by(10) {
            assert!(f.contains(token_of_u64(i)));
        }
        assert!(fp < 0.001, "fp {fp}");
        // 4000 keys at p = 1e-4: m = ⌈4000 · ln(10⁴) / ln²2⌉ = 76_681 bits, k = round(19.17 · ln 2) = 13.
        assert_eq!(f.shape(), (76_681, 13));
    }

    #[test]
    fn merge_is_union_and_shape_checked() {
        let mut a = Bloom::with_capacity(10, 0.01).unwrap();
        let mut b = Bloom::with_capacity(10, 0.01).unwrap();
        a.insert(1);
        b.insert(2);
        a.merge(&b).unwrap();
        assert!(a.contains(1) && a.contains(2));
        let c = Bloom::with_capacity(1000, 0.01).unwrap();
        assert!(a.merge(&c).is_err());
    }
}
