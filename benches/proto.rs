#![allow(missing_docs)] // criterion_group! generates undocumented items

//! Codec throughput: decoding pipelined hits, large values and storage
//! replies; encoding `set` requests. Run with `cargo xtask bench`.

use bytes::{Bytes, BytesMut};
use criterion::{BatchSize, Criterion, Throughput, black_box, criterion_group, criterion_main};
use memgroup::proto::{Decoder, Expect, Key, Request, Response, StoreCommand};

const N: usize = 10_000;

fn small_hits() -> Bytes {
    // 10,000 replies to pipelined single-key gets: 30-byte keys, 100-byte values.
    let mut wire = Vec::new();
    for i in 0..N {
        let key = format!("key:{i:026}");
        wire.extend_from_slice(format!("VALUE {key} 0 100\r\n").as_bytes());
        wire.extend_from_slice(&[b'v'; 100]);
        wire.extend_from_slice(b"\r\nEND\r\n");
    }
    Bytes::from(wire)
}

fn large_values() -> Bytes {
    let mut wire = Vec::new();
    for i in 0..64 {
        wire.extend_from_slice(format!("VALUE big:{i} 0 1048576\r\n").as_bytes());
        wire.extend_from_slice(&vec![b'x'; 1 << 20]);
        wire.extend_from_slice(b"\r\nEND\r\n");
    }
    Bytes::from(wire)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("proto");

    let hits = small_hits();
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("decode 10k small hits", |b| {
        b.iter_batched(
            || BytesMut::from(&hits[..]),
            |mut buf| {
                let mut decoder = Decoder::default();
                for _ in 0..N {
                    black_box(
                        decoder
                            .decode(&mut buf, Expect::values(usize::MAX))
                            .unwrap(),
                    );
                }
            },
            BatchSize::LargeInput,
        );
    });

    let stored = Bytes::from(b"STORED\r\n".repeat(N));
    g.bench_function("decode 10k storage replies", |b| {
        b.iter_batched(
            || BytesMut::from(&stored[..]),
            |mut buf| {
                let mut decoder = Decoder::default();
                for _ in 0..N {
                    let r = decoder.decode(&mut buf, Expect::Single).unwrap();
                    assert_eq!(r, Some(Response::Stored));
                }
            },
            BatchSize::LargeInput,
        );
    });

    let keys: Vec<String> = (0..N).map(|i| format!("key:{i:026}")).collect();
    let value = vec![b'v'; 100];
    let mut out = BytesMut::with_capacity(N * 150);
    g.bench_function("encode 10k set requests", |b| {
        b.iter(|| {
            out.clear();
            for k in &keys {
                Request::Store {
                    command: StoreCommand::Set,
                    key: Key::new(k.as_bytes()).unwrap(),
                    flags: 0,
                    exptime: 0,
                    data: &value,
                    noreply: false,
                }
                .encode(&mut out);
            }
            black_box(&out);
        });
    });

    let large = large_values();
    g.throughput(Throughput::Bytes(64 << 20));
    g.sample_size(20);
    g.bench_function("decode 64 x 1 MiB values", |b| {
        b.iter_batched(
            || BytesMut::from(&large[..]),
            |mut buf| {
                let mut decoder = Decoder::default();
                for _ in 0..64 {
                    black_box(
                        decoder
                            .decode(&mut buf, Expect::values(usize::MAX))
                            .unwrap(),
                    );
                }
            },
            BatchSize::LargeInput,
        );
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
