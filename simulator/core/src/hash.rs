//! MurmurHash3 x64_128 (the hash of Cassandra's Murmur3Partitioner); the token is the first 64-bit half.
//!
//! Cassandra's own implementation (`org.apache.cassandra.utils.MurmurHash.hash3_x64_128`) differs from the
//! reference in one place: it reads the tail bytes (the last `len % 16`) as *signed* Java bytes, so a tail byte
//! ≥ 0x80 is sign-extended before it is shifted in. Text keys are hashed as Cassandra hashes them
//! ([`token_of_bytes`]: non-ASCII UTF-8 tails included), and the partitioner's minimum token −2⁶³ is mapped to
//! 2⁶³ − 1 as `Murmur3Partitioner.getToken` does.

#[inline]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// MurmurHash3_x64_128 of `data` with `seed`; returns (h1, h2).
pub fn murmur3_x64_128(data: &[u8], seed: u64) -> (u64, u64) {
    murmur3(data, seed, false)
}

/// Cassandra's variant of MurmurHash3_x64_128: tail bytes sign-extended (see the module's note).
pub fn cassandra_murmur3(data: &[u8], seed: u64) -> (u64, u64) {
    murmur3(data, seed, true)
}

fn murmur3(data: &[u8], seed: u64, signed_tail: bool) -> (u64, u64) {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let len = data.len();
    let nblocks = len / 16;
    let (mut h1, mut h2) = (seed, seed);
    for i in 0..nblocks {
        let b = &data[i * 16..i * 16 + 16];
        let mut k1 = u64::from_le_bytes(b[0..8].try_into().expect("8 bytes"));
        let mut k2 = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
        h1 = h1
            .rotate_left(27)
            .wrapping_add(h2)
            .wrapping_mul(5)
            .wrapping_add(0x52dc_e729);
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
        h2 = h2
            .rotate_left(31)
            .wrapping_add(h1)
            .wrapping_mul(5)
            .wrapping_add(0x3849_5ab5);
    }
    let tail = &data[nblocks * 16..];
    let (mut k1, mut k2) = (0u64, 0u64);
    for (i, &byte) in tail.iter().enumerate() {
        let b = if signed_tail {
            byte as i8 as i64 as u64
        } else {
            byte as u64
        };
        if i < 8 {
            k1 ^= b << (8 * i);
        } else {
            k2 ^= b << (8 * (i - 8));
        }
    }
    if tail.len() > 8 {
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
    }
    if !tail.is_empty() {
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
    }
    h1 ^= len as u64;
    h2 ^= len as u64;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// Ring token of a key given as bytes: Cassandra's Murmur3Partitioner token of a partition key with these bytes
/// (a text key's UTF-8 bytes), the minimum −2⁶³ mapped to 2⁶³ − 1.
pub fn token_of_bytes(key: &[u8]) -> i64 {
    match cassandra_murmur3(key, 0).0 as i64 {
        i64::MIN => i64::MAX,
        t => t,
    }
}

/// Ring token of an integer key id: the reference MurmurHash3 of its 8 little-endian bytes (an abstract id, not
/// a Cassandra `bigint`, which would be hashed big-endian).
pub fn token_of_u64(key: u64) -> i64 {
    murmur3_x64_128(&key.to_le_bytes(), 0).0 as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        // Reference values of MurmurHash3_x64_128 with seed 0 (same as smhasher / mmh3.hash64).
        assert_eq!(murmur3_x64_128(b"", 0), (0, 0));
        let (h1, _) = murmur3_x64_128(b"hello", 0);
        assert_eq!(h1 as i64, -3758069500696749310);
        let (h1, _) = murmur3_x64_128(b"The quick brown fox jumps over the lazy dog", 0);
        assert_eq!(h1, 0xe34bbc7bbc071b6c);
    }

    #[test]
    fn text_tokens_are_cassandras() {
        // Tokens computed by the DataStax Python driver's `Murmur3Token.hash_fn` (Cassandra's hash, tail bytes
        // signed): equal to the reference where the tail is ASCII, different where it holds bytes ≥ 0x80.
        assert_eq!(token_of_bytes(b"hello"), -3758069500696749310);
        assert_eq!(token_of_bytes(b"k123"), -6637941141377189475);
        assert_eq!(token_of_bytes("é".as_bytes()), 5461403030378599040);
        assert_eq!(token_of_bytes("ключ".as_bytes()), 1182936647932017555);
        let long = format!("{}é", "x".repeat(17));
        assert_eq!(token_of_bytes(long.as_bytes()), -9064404990106899093);
        assert_ne!(
            murmur3_x64_128("é".as_bytes(), 0).0 as i64,
            5461403030378599040
        );
        // a full block of high bytes is read unsigned by both (only the tail differs)
        let block = [0xffu8; 16];
        assert_eq!(cassandra_murmur3(&block, 0), murmur3_x64_128(&block, 0));
    }

    #[test]
    fn integer_ids_keep_the_reference_hash_of_their_le_bytes() {
        for k in [0u64, 1, 200, 1 << 40, u64::MAX] {
            assert_eq!(
                token_of_u64(k),
                murmur3_x64_128(&k.to_le_bytes(), 0).0 as i64
            );
        }
    }
}
