//! Feeds arbitrary bytes, split into arbitrary chunks, to the reply decoder:
//! it must never panic, never loop and never reserve beyond its limits.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use memgroup_proto::{Decoder, Expect, Limits};

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    // A retrieval of 1 to 8 keys, stats, a quiet batch of 1 to 8
    // commands, a configuration block, or a single reply.
    let expect = match control % 5 {
        0 => Expect::values(usize::from(control >> 5) + 1),
        1 => Expect::Stats,
        2 => Expect::MetaBatch { max_replies: usize::from(control >> 5) + 1 },
        3 => Expect::Config,
        _ => Expect::Single,
    };
    let chunk = usize::from(control / 5).max(1);
    let limits = Limits { max_line: 256, max_value: 4096, max_reply: 1 << 16, max_stats: 1 << 14 };
    let mut decoder = Decoder::new(limits);
    let mut buf = BytesMut::new();
    for piece in input.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buf, expect) {
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(_) => return,
            }
        }
        assert!(buf.capacity() <= input.len() + 256 + 4096 + 64);
    }
});
