//! Round trips (encode → erase → decode) and hostile input.

use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;

use super::*;
use crate::Instant;

fn payloads(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 120) as usize + (i % 3);
            (0..len).map(|j| (x >> (j % 56)) as u8 ^ j as u8).collect()
        })
        .collect()
}

/// Sends `data` through encoder and decoder; `lose_src[i]` / `lose_rep[k]` erase source i /
/// the k-th repair. Then, as a sender idle with unacknowledged data does, adds repairs over
/// the whole window until the decoder holds everything. Returns the decoder and the number of
/// extra repairs needed.
fn round_trip(
    data: &[Vec<u8>],
    tau: u32,
    lose_src: &[bool],
    lose_rep: &[bool],
    ack_lag: Option<usize>,
) -> (Decoder, usize) {
    let limits = Limits { max_window: 1024, max_symbol: 200, max_rows: 1024 };
    let mut enc = Encoder::new(tau, limits);
    let mut dec = Decoder::new(limits);
    let mut reps = 0usize;
    for (i, p) in data.iter().enumerate() {
        let id = enc.push(p, None).unwrap();
        assert_eq!(id, i as u64);
        if !lose_src[i] {
            dec.receive_source(id, p);
        }
        if enc.repair_due() {
            let r = enc.repair().unwrap();
            if !lose_rep.get(reps).copied().unwrap_or(false) {
                assert!(dec.receive_repair(&r));
            }
            reps += 1;
        }
        if let Some(lag) = ack_lag
            && i >= lag
        {
            // Feedback `lag` symbols late: the receiver's holdings slide the window.
            for j in 0..=(i - lag) as u64 {
                if dec.has(j) {
                    enc.acknowledge(j);
                }
            }
        }
    }
    let mut extra = 0;
    let missing = (0..data.len() as u64).filter(|&i| !dec.has(i)).count();
    while (0..data.len() as u64).any(|i| !dec.has(i)) {
        // Random coefficients over GF(2^8): each extra repair is independent of the held
        // equations with probability ≥ 1 − 1/256, so a few spare ones always suffice.
        assert!(extra < missing + 8, "{missing} missing, not decodable after {extra} repairs");
        let r = enc.repair().unwrap();
        assert!(dec.receive_repair(&r));
        extra += 1;
    }
    (dec, extra)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn erased_symbols_are_recovered_exactly_and_released_in_order(
        n in 1usize..160,
        tau in 1u32..9,
        seed in any::<u64>(),
        loss in 0u32..60,
        lag in proptest::option::of(0usize..20),
        pattern in proptest::collection::vec(0u32..100, 400),
    ) {
        let data = payloads(n, seed);
        let lose_src: Vec<bool> = (0..n).map(|i| pattern[i % 400] < loss).collect();
        let lose_rep: Vec<bool> = (0..n).map(|i| pattern[(i * 7 + 3) % 400] < loss).collect();
        let (mut dec, _) = round_trip(&data, tau, &lose_src, &lose_rep, lag);
        let mut recovered = 0;
        while let Some((id, p)) = dec.poll_recovered() {
            prop_assert!(lose_src[id as usize], "symbol {id} recovered though received");
            prop_assert_eq!(&p[..], &data[id as usize][..]);
            recovered += 1;
        }
        prop_assert_eq!(recovered, lose_src.iter().filter(|&&l| l).count());
        for (i, want) in data.iter().enumerate() {
            let (id, p) = dec.pop_in_order().unwrap();
            prop_assert_eq!(id, i as u64);
            prop_assert_eq!(&p[..], &want[..]);
        }
        prop_assert!(dec.pop_in_order().is_none());
        prop_assert_eq!(dec.stats().invalid, 0);
    }

    #[test]
    fn hostile_repairs_and_sources_are_dropped_and_counted_never_a_panic(
        inputs in proptest::collection::vec(
            (any::<bool>(), any::<u64>(), any::<u32>(), any::<u16>(), 0usize..2000),
            1..200),
    ) {
        let limits = Limits { max_window: 64, max_symbol: 300, max_rows: 16 };
        let mut dec = Decoder::new(limits);
        for (is_repair, first, count, seed, len) in inputs {
            // Half the inputs near the origin so that some are accepted and eliminated.
            let first = if first % 2 == 0 { first % 100 } else { first };
            let payload = Bytes::from(vec![(seed & 0xff) as u8; len]);
            let b = dec.stats();
            if is_repair {
                let ok = dec.receive_repair(&Repair { first, count: count % 200, seed, payload });
                let s = dec.stats();
                // Accepted, or dropped and counted (a recovered symbol with an impossible
                // length is counted as invalid too).
                if ok {
                    prop_assert_eq!(s.repairs, b.repairs + 1);
                } else {
                    prop_assert_eq!(s.repairs, b.repairs);
                    prop_assert_eq!(s.invalid + s.stale, b.invalid + b.stale + 1);
                }
            } else {
                let rows = dec.pending_rows() as u64;
                let new = dec.receive_source(first, &payload[..len.min(400)]);
                let s = dec.stats();
                prop_assert_eq!(new, s.sources == b.sources + 1);
                // The source itself, plus any pending row it resolved into a recovered
                // symbol of impossible length (counted invalid).
                prop_assert!(
                    s.sources + s.invalid + s.stale <= b.sources + b.invalid + b.stale + 1 + rows
                );
            }
            prop_assert!(dec.pending_rows() <= limits.max_rows);
            prop_assert!(dec.known.len() <= limits.max_window as usize * HISTORY as usize);
            for r in &dec.rows {
                prop_assert!(r.coefs.len() <= limits.max_window as usize * HISTORY as usize);
                prop_assert!(r.payload.len() <= limits.max_symbol + LEN_PREFIX);
            }
        }
        while let Some((_, p)) = dec.poll_recovered() {
            prop_assert!(p.len() <= limits.max_symbol);
        }
    }
}

#[test]
fn window_limits_and_inconsistent_lengths_are_counted() {
    let limits = Limits { max_window: 8, max_symbol: 10, max_rows: 4 };
    let mut dec = Decoder::new(limits);
    let p = |n| Bytes::from(vec![1u8; n]);
    assert!(!dec.receive_repair(&Repair { first: 0, count: 0, seed: 1, payload: p(4) }));
    assert!(!dec.receive_repair(&Repair { first: 0, count: 9, seed: 1, payload: p(4) }));
    assert!(!dec.receive_repair(&Repair { first: MAX_ID, count: 2, seed: 1, payload: p(4) }));
    assert!(!dec.receive_repair(&Repair { first: 0, count: 2, seed: 1, payload: p(1) }));
    assert!(!dec.receive_repair(&Repair { first: 0, count: 2, seed: 1, payload: p(13) }));
    assert!(!dec.receive_source(0, &[0u8; 11]));
    assert!(!dec.receive_source(MAX_ID + 1, &[0u8; 1]));
    assert_eq!(dec.stats().invalid, 7);
    // A repair whose only unknown decodes to an impossible length prefix (0xffff).
    dec.receive_source(1, &[]);
    let mut w = [0u8; 2];
    coefs::generate(3, &mut w);
    let mut payload = vec![0u8; 12];
    let mut s1 = source_symbol(&[]).unwrap();
    s1.resize(12, 0);
    let mut bogus = vec![0xffu8; 12];
    gf::scale(&mut bogus, w[0]);
    gf::mul_add(&mut payload, 1, &bogus);
    gf::mul_add(&mut payload, w[1], &s1);
    assert!(dec.receive_repair(&Repair { first: 0, count: 2, seed: 3, payload: payload.into() }));
    assert_eq!(dec.stats().invalid, 8);
    assert!(!dec.has(0));
    // Far ahead: the floor follows and old state goes.
    assert!(dec.receive_repair(&Repair { first: 1000, count: 8, seed: 1, payload: p(4) }));
    assert!(!dec.receive_source(2, &[]));
    assert_eq!(dec.stats().stale, 1);
}

#[test]
fn a_repair_overtaken_by_a_window_of_newer_sources_still_decodes() {
    // A repair over a full window of 8 arrives after the 8 source symbols sent after it
    // (e.g. on a faster path): the decoder keeps HISTORY windows, so it is not stale.
    let limits = Limits { max_window: 8, max_symbol: 10, max_rows: 4 };
    let mut enc = Encoder::new(100, limits);
    let mut dec = Decoder::new(limits);
    for i in 0..8u8 {
        enc.push(&[i; 3], None).unwrap();
        if i != 2 {
            dec.receive_source(u64::from(i), &[i; 3]);
        }
    }
    let repair = enc.repair().unwrap();
    assert_eq!((repair.first, repair.count), (0, 8));
    for i in 8..16u8 {
        dec.receive_source(u64::from(i), &[i; 3]);
    }
    assert!(dec.receive_repair(&repair));
    assert_eq!(dec.stats().stale, 0);
    assert_eq!(dec.poll_recovered().map(|(id, p)| (id, p.to_vec())), Some((2, vec![2; 3])));
}

#[test]
fn acknowledgements_and_deadlines_slide_the_encoder_window() {
    let t0 = Instant::from_micros(0);
    let mut enc = Encoder::new(2, Limits::default());
    for i in 0..6u64 {
        let id = enc.push(&[i as u8; 10], Some(t0 + Duration::from_millis(10 * i))).unwrap();
        assert_eq!(id, i);
    }
    assert!(enc.repair_due());
    assert_eq!(enc.window(), Some((0, 6)));
    enc.acknowledge(1);
    assert_eq!(enc.window(), Some((0, 6)), "a hole at the start keeps the window");
    enc.acknowledge(0);
    assert_eq!(enc.window(), Some((2, 4)));
    enc.expire(t0 + Duration::from_millis(35));
    assert_eq!(enc.window(), Some((4, 2)));
    assert_eq!(enc.stats().expired, 2);
    let r = enc.repair().unwrap();
    assert_eq!((r.first, r.count), (4, 2));
    assert!(!enc.repair_due());
    enc.acknowledge_below(6);
    assert_eq!(enc.window(), None);
    assert!(enc.repair().is_none());
    assert!(enc.push(&[0u8; 1501], None).is_err());
}

#[test]
fn a_full_window_pushes_out_its_oldest_symbol() {
    let mut enc = Encoder::new(4, Limits { max_window: 3, ..Limits::default() });
    for _ in 0..5 {
        enc.push(b"x", None).unwrap();
    }
    assert_eq!(enc.window(), Some((2, 3)));
    assert_eq!(enc.stats().expired, 2);
}

#[test]
fn abandoned_symbols_are_skipped_in_order_and_their_equations_dropped() {
    let limits = Limits::default();
    let mut enc = Encoder::new(100, limits);
    let mut dec = Decoder::new(limits);
    for i in 0..4u64 {
        enc.push(&[i as u8; 5], None).unwrap();
        if i != 1 && i != 2 {
            dec.receive_source(i, &[i as u8; 5]);
        }
    }
    // One repair for two losses: nothing decodes.
    dec.receive_repair(&enc.repair().unwrap());
    assert_eq!(dec.pending_rows(), 1);
    assert_eq!(dec.pop_in_order().map(|x| x.0), Some(0));
    assert!(dec.pop_in_order().is_none());
    dec.abandon_below(3);
    assert_eq!(dec.pending_rows(), 0);
    assert_eq!(dec.pop_in_order().map(|x| x.0), Some(3));
}

#[test]
fn one_repair_per_loss_suffices_in_a_typical_stream() {
    // τ = 4, one loss in each group of eight: every loss is repaired without extra repairs.
    let data = payloads(200, 5);
    let lose_src: Vec<bool> = (0..200).map(|i| i % 8 == 3).collect();
    let (dec, extra) = round_trip(&data, 4, &lose_src, &[], Some(6));
    assert_eq!(extra, 0);
    assert_eq!(dec.stats().recovered, 25);
}
