//! Feeds arbitrary bytes, split into arbitrary chunks, to the metadump
//! decoder: it must never panic, never loop, and never hold more than one
//! line's limit of unterminated bytes.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use memgroup_proto::MetadumpDecoder;

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(control).max(1);
    let mut decoder = MetadumpDecoder::new(256);
    let mut buf = BytesMut::new();
    for piece in input.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(_) => return,
            }
        }
        assert!(buf.len() <= 256);
    }
});
