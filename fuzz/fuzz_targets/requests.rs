//! Feeds arbitrary bytes, split into arbitrary chunks, to the proxy's
//! request decoder (what any client may send): it must never panic, never
//! loop, and never hold more than its limits allow.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use memgroup_proto::server::{RequestDecoder, ServerLimits};

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(control).max(1);
    let limits = ServerLimits { max_line: 128, max_get_line: 1024, max_value: 512 };
    let mut decoder = RequestDecoder::new(limits);
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
        assert!(buf.len() <= 1024 + 512 + 2 + chunk, "{} bytes held", buf.len());
    }
});
