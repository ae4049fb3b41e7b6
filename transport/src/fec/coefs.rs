//! Coding coefficients regenerated from a repair key, as RFC 8681 §3.6 \[source\] does: a
//! TinyMT32 generator (RFC 8682 \[source\]) seeded with the 16-bit repair key yields one
//! byte per source symbol of the encoding window; zero bytes are drawn again (the RFC's
//! density threshold DT = 15, every coefficient non-zero).

/// TinyMT32 with the parameters RFC 8682 fixes (mat1, mat2, tmat).
struct TinyMt32 {
    status: [u32; 4],
}

const MAT1: u32 = 0x8f70_11ee;
const MAT2: u32 = 0xfc78_ff1f;
const TMAT: u32 = 0x3793_fdff;
const MIN_LOOP: u32 = 8;
const PRE_LOOP: u32 = 8;

impl TinyMt32 {
    fn new(seed: u32) -> TinyMt32 {
        let mut s = [seed, MAT1, MAT2, TMAT];
        for i in 1..MIN_LOOP {
            let prev = s[((i - 1) & 3) as usize];
            s[(i & 3) as usize] ^=
                i.wrapping_add(1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)));
        }
        // Period certification: the all-zero state (in the 127 state bits) is excluded.
        if s[0] & 0x7fff_ffff == 0 && s[1] == 0 && s[2] == 0 && s[3] == 0 {
            s = [u32::from(b'T'), u32::from(b'I'), u32::from(b'N'), u32::from(b'Y')];
        }
        let mut t = TinyMt32 { status: s };
        for _ in 0..PRE_LOOP {
            t.next_state();
        }
        t
    }

    fn next_state(&mut self) {
        let s = &mut self.status;
        let mut y = s[3];
        let mut x = (s[0] & 0x7fff_ffff) ^ s[1] ^ s[2];
        x ^= x << 1;
        y ^= (y >> 1) ^ x;
        s[0] = s[1];
        s[1] = s[2];
        s[2] = x ^ (y << 10);
        s[3] = y;
        if y & 1 != 0 {
            s[1] ^= MAT1;
            s[2] ^= MAT2;
        }
    }

    fn temper(&self) -> u32 {
        let s = &self.status;
        let mut t0 = s[3];
        let t1 = s[0].wrapping_add(s[2] >> 8);
        t0 ^= t1;
        if t1 & 1 != 0 {
            t0 ^= TMAT;
        }
        t0
    }

    fn next_u32(&mut self) -> u32 {
        self.next_state();
        self.temper()
    }
}

/// Fills `out` with the non-zero coefficients of the repair symbol with key `seed`, one per
/// source symbol of its window in order.
pub fn generate(seed: u16, out: &mut [u8]) {
    let mut rng = TinyMt32::new(u32::from(seed));
    for c in out.iter_mut() {
        // A zero byte has probability 1/256; the loop ends with probability 1.
        *c = loop {
            let b = (rng.next_u32() & 0xff) as u8;
            if b != 0 {
                break b;
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tinymt32_matches_the_reference_sequence_for_seed_1() {
        // The first outputs of the reference implementation with seed 1 (RFC 8682 §2.2).
        let mut t = TinyMt32::new(1);
        let got: Vec<u32> = (0..5).map(|_| t.next_u32()).collect();
        assert_eq!(got, [2_545_341_989, 981_918_433, 3_715_302_833, 2_387_538_352, 3_591_001_365]);
    }

    #[test]
    fn coefficients_are_nonzero_and_a_function_of_the_seed() {
        let mut a = [0u8; 64];
        let mut b = [0u8; 64];
        generate(7, &mut a);
        generate(7, &mut b);
        assert_eq!(a, b);
        assert!(a.iter().all(|&c| c != 0));
        generate(8, &mut b);
        assert_ne!(a, b);
        // A shorter window is a prefix of a longer one with the same key.
        let mut c = [0u8; 10];
        generate(7, &mut c);
        assert_eq!(c, a[..10]);
    }
}
