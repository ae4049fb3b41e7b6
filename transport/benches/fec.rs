//! GF(2^8) multiply-add kernels and the streaming code's encode and decode throughput.
//!
//! `cargo bench -p braid-transport --bench fec`. The kernel group compares, on the same
//! 1200-byte symbols in the same run: reed-solomon-erasure's `galois_8::mul_slice_xor` (a
//! 256-byte row of a full multiplication table per coefficient, the crate's portable path),
//! the portable split-nibble kernel, and the dispatched split-nibble kernel (PSHUFB with
//! AVX2 or SSSE3 where the CPU has it).

use std::hint::black_box;

use braid_transport::fec::{Decoder, Encoder, Limits, gf};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const SYMBOL: usize = 1200;

fn kernels(c: &mut Criterion) {
    let src: Vec<u8> = (0..SYMBOL as u32).map(|i| (i * 31 + 7) as u8).collect();
    let mut dst = vec![0u8; SYMBOL];
    let mut g = c.benchmark_group("gf256_mul_add");
    g.throughput(Throughput::Bytes(SYMBOL as u64));
    g.bench_function("reed-solomon-erasure mul_slice_xor", |b| {
        b.iter(|| reed_solomon_erasure::galois_8::mul_slice_xor(black_box(0x53), &src, &mut dst))
    });
    g.bench_function("split-nibble portable", |b| {
        b.iter(|| gf::kernels::nibbles(&mut dst, black_box(0x53), &src))
    });
    g.bench_function("split-nibble dispatched", |b| {
        b.iter(|| gf::kernels::dispatched(&mut dst, black_box(0x53), &src))
    });
    g.finish();
}

/// Encode: one repair over a window of `w` symbols of SYMBOL bytes. Decode: the receiver
/// holds all but one symbol of each window and recovers it from the repair. Throughput is
/// source bytes covered per second.
fn codec(c: &mut Criterion) {
    let limits = Limits { max_window: 1024, max_symbol: SYMBOL, max_rows: 256 };
    for w in [4u32, 16, 64] {
        let data: Vec<Vec<u8>> =
            (0..w).map(|k| (0..SYMBOL as u32).map(|i| (i ^ (k * 91)) as u8).collect()).collect();
        let mut g = c.benchmark_group(format!("fec_window_{w}"));
        g.throughput(Throughput::Bytes(u64::from(w) * SYMBOL as u64));
        g.bench_function("encode", |b| {
            b.iter_batched(
                || {
                    let mut e = Encoder::new(w, limits);
                    for d in &data {
                        e.push(d, None).unwrap();
                    }
                    e
                },
                |mut e| black_box(e.repair()),
                criterion::BatchSize::SmallInput,
            )
        });
        let mut e = Encoder::new(w, limits);
        for d in &data {
            e.push(d, None).unwrap();
        }
        let repair = e.repair().unwrap();
        g.bench_function("decode one loss", |b| {
            b.iter_batched(
                || {
                    let mut d = Decoder::new(limits);
                    for (i, p) in data.iter().enumerate().skip(1) {
                        d.receive_source(i as u64, p);
                    }
                    d
                },
                |mut d| {
                    d.receive_repair(&repair);
                    black_box(d.poll_recovered())
                },
                criterion::BatchSize::SmallInput,
            )
        });
        g.finish();
    }
}

criterion_group!(benches, kernels, codec);
criterion_main!(benches);
