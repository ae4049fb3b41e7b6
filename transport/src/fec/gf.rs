//! Arithmetic in GF(2^8) with the polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11D, RFC 8681
//! §3.7 \[source\]) and the code's hot loop, `dst ^= c · src` over byte slices.
//!
//! The multiply-add kernel is split-nibble tables: for a coefficient `c`, two 16-entry
//! tables hold `c · x` for the low and the high nibble of `x`, so `c · x = lo[x & 15] ^
//! hi[x >> 4]` (GF(2^8) multiplication is linear over XOR). On x86-64 with AVX2 or SSSE3 the
//! two lookups are one byte shuffle (PSHUFB) each over 32 or 16 bytes at a time; elsewhere
//! the same tables are used byte by byte. The choice against a crate's table kernel was made
//! by measurement (BENCHMARKS.md, `cargo bench -p braid-transport --bench fec`).

/// The reduction polynomial, x^8 + x^4 + x^3 + x^2 + 1.
pub const POLY: u16 = 0x11D;

const fn build_tables() -> ([u8; 512], [u8; 256]) {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    // exp is doubled so that exp[log a + log b] needs no reduction mod 255.
    while i < 512 {
        exp[i] = exp[i - 255];
        i += 1;
    }
    (exp, log)
}

const TABLES: ([u8; 512], [u8; 256]) = build_tables();
static EXP: [u8; 512] = TABLES.0;
static LOG: [u8; 256] = TABLES.1;

/// `a · b` in GF(2^8).
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 { 0 } else { EXP[LOG[a as usize] as usize + LOG[b as usize] as usize] }
}

/// The multiplicative inverse of `a`; `None` for 0.
#[inline]
pub fn inv(a: u8) -> Option<u8> {
    if a == 0 { None } else { Some(EXP[255 - LOG[a as usize] as usize]) }
}

/// The split-nibble tables of `c`: `(c · x for x < 16, c · (x << 4) for x < 16)`.
#[inline]
pub fn nibble_tables(c: u8) -> ([u8; 16], [u8; 16]) {
    let mut lo = [0u8; 16];
    let mut hi = [0u8; 16];
    for i in 0..16u8 {
        lo[i as usize] = mul(c, i);
        hi[i as usize] = mul(c, i << 4);
    }
    (lo, hi)
}

/// `dst[i] ^= c · src[i]` for `i < min(dst.len(), src.len())`.
pub fn mul_add(dst: &mut [u8], c: u8, src: &[u8]) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    match c {
        0 => {}
        1 => dst.iter_mut().zip(src).for_each(|(d, s)| *d ^= s),
        _ => {
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU supports AVX2 (checked just above).
                    unsafe { x86::mul_add_avx2(dst, c, src) };
                    return;
                }
                if std::arch::is_x86_feature_detected!("ssse3") {
                    // SAFETY: the CPU supports SSSE3 (checked just above).
                    unsafe { x86::mul_add_ssse3(dst, c, src) };
                    return;
                }
            }
            mul_add_nibbles(dst, c, src);
        }
    }
}

/// `buf[i] = c · buf[i]`.
pub fn scale(buf: &mut [u8], c: u8) {
    match c {
        1 => {}
        0 => buf.fill(0),
        _ => {
            let (lo, hi) = nibble_tables(c);
            for b in buf {
                *b = lo[(*b & 15) as usize] ^ hi[(*b >> 4) as usize];
            }
        }
    }
}

/// The portable split-nibble kernel, one byte at a time (also the SIMD kernels' tail).
pub fn mul_add_nibbles(dst: &mut [u8], c: u8, src: &[u8]) {
    let (lo, hi) = nibble_tables(c);
    for (d, &s) in dst.iter_mut().zip(src) {
        *d ^= lo[(s & 15) as usize] ^ hi[(s >> 4) as usize];
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn mul_add_avx2(dst: &mut [u8], c: u8, src: &[u8]) {
        let (lo, hi) = super::nibble_tables(c);
        let n = dst.len().min(src.len());
        let blocks = n / 32;
        // SAFETY: every load and store below is of 32 bytes at offset 32·i < n - 31 of
        // slices at least n long; the unaligned variants are used.
        unsafe {
            let lo128 = _mm_loadu_si128(lo.as_ptr().cast());
            let hi128 = _mm_loadu_si128(hi.as_ptr().cast());
            let lo_t = _mm256_broadcastsi128_si256(lo128);
            let hi_t = _mm256_broadcastsi128_si256(hi128);
            let mask = _mm256_set1_epi8(0x0f);
            for i in 0..blocks {
                let sp = src.as_ptr().add(32 * i).cast::<__m256i>();
                let dp = dst.as_mut_ptr().add(32 * i).cast::<__m256i>();
                let s = _mm256_loadu_si256(sp);
                let l = _mm256_and_si256(s, mask);
                let h = _mm256_and_si256(_mm256_srli_epi64(s, 4), mask);
                let p =
                    _mm256_xor_si256(_mm256_shuffle_epi8(lo_t, l), _mm256_shuffle_epi8(hi_t, h));
                let d = _mm256_loadu_si256(dp);
                _mm256_storeu_si256(dp, _mm256_xor_si256(d, p));
            }
        }
        let done = blocks * 32;
        super::mul_add_nibbles(&mut dst[done..n], c, &src[done..n]);
    }

    /// # Safety
    /// The CPU must support SSSE3.
    #[target_feature(enable = "ssse3")]
    pub unsafe fn mul_add_ssse3(dst: &mut [u8], c: u8, src: &[u8]) {
        let (lo, hi) = super::nibble_tables(c);
        let n = dst.len().min(src.len());
        let blocks = n / 16;
        // SAFETY: every load and store below is of 16 bytes at offset 16·i < n - 15 of
        // slices at least n long; the unaligned variants are used.
        unsafe {
            let lo_t = _mm_loadu_si128(lo.as_ptr().cast());
            let hi_t = _mm_loadu_si128(hi.as_ptr().cast());
            let mask = _mm_set1_epi8(0x0f);
            for i in 0..blocks {
                let sp = src.as_ptr().add(16 * i).cast::<__m128i>();
                let dp = dst.as_mut_ptr().add(16 * i).cast::<__m128i>();
                let s = _mm_loadu_si128(sp);
                let l = _mm_and_si128(s, mask);
                let h = _mm_and_si128(_mm_srli_epi64(s, 4), mask);
                let p = _mm_xor_si128(_mm_shuffle_epi8(lo_t, l), _mm_shuffle_epi8(hi_t, h));
                let d = _mm_loadu_si128(dp);
                _mm_storeu_si128(dp, _mm_xor_si128(d, p));
            }
        }
        let done = blocks * 16;
        super::mul_add_nibbles(&mut dst[done..n], c, &src[done..n]);
    }
}

/// The kernels, for the benchmark (the same code [`mul_add`] dispatches to).
#[doc(hidden)]
pub mod kernels {
    /// The portable byte-at-a-time split-nibble kernel.
    pub fn nibbles(dst: &mut [u8], c: u8, src: &[u8]) {
        super::mul_add_nibbles(dst, c, src)
    }

    /// The best kernel this CPU runs (AVX2, SSSE3 or portable).
    pub fn dispatched(dst: &mut [u8], c: u8, src: &[u8]) {
        super::mul_add(dst, c, src)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Carry-less multiplication reduced by POLY, bit by bit: the oracle.
    fn mul_slow(mut a: u8, mut b: u8) -> u8 {
        let mut p = 0u8;
        while b != 0 {
            if b & 1 != 0 {
                p ^= a;
            }
            let carry = a & 0x80 != 0;
            a <<= 1;
            if carry {
                a ^= (POLY & 0xff) as u8;
            }
            b >>= 1;
        }
        p
    }

    #[test]
    fn mul_matches_the_bitwise_oracle_and_inverses_invert() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), mul_slow(a, b), "{a}·{b}");
            }
            if a != 0 {
                assert_eq!(mul(a, inv(a).unwrap()), 1);
            }
        }
        assert_eq!(inv(0), None);
    }

    #[test]
    fn kernels_agree_with_scalar_multiplication_at_every_length() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 37 + 11) as u8).collect();
        for c in [0u8, 1, 2, 0x53, 0xff] {
            for len in [0usize, 1, 15, 16, 17, 31, 32, 33, 64, 100, 300] {
                let base: Vec<u8> = (0..len as u32).map(|i| (i * 7) as u8).collect();
                let want: Vec<u8> = base.iter().zip(&src).map(|(&d, &s)| d ^ mul(c, s)).collect();
                let mut a = base.clone();
                mul_add(&mut a, c, &src[..len]);
                assert_eq!(a, want, "dispatched c={c} len={len}");
                let mut b = base.clone();
                mul_add_nibbles(&mut b, c, &src[..len]);
                assert_eq!(b, want, "nibbles c={c} len={len}");
                let mut s = src[..len].to_vec();
                scale(&mut s, c);
                let ws: Vec<u8> = src[..len].iter().map(|&x| mul(c, x)).collect();
                assert_eq!(s, ws);
            }
        }
    }
}
