//! Grows a `get` line from arbitrary keys (split on `\n`): whatever it
//! accepts, the line must be byte for byte the encoder's multi-key command
//! for those keys, and stay within its limits.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use memgroup_proto::{GrowingRetrieval, Key, MAX_GROWN_KEYS, MAX_GROWN_LINE, Request};

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let keys: Vec<Key<'_>> = input
        .split(|&b| b == b'\n')
        .filter_map(|k| Key::new(k).ok())
        .collect();
    let Some((&first, rest)) = keys.split_first() else {
        return;
    };
    let cas = control & 1 == 1;
    let mut buf = BytesMut::new();
    let mut get = GrowingRetrieval::start(&mut buf, cas, first);
    let mut taken = vec![first];
    for &key in rest {
        if get.push(&mut buf, key) {
            taken.push(key);
        }
    }
    assert!(taken.len() <= MAX_GROWN_KEYS);
    assert!(buf.len() <= MAX_GROWN_LINE);
    let mut want = BytesMut::new();
    if cas {
        Request::Gets { keys: &taken }.encode(&mut want);
    } else {
        Request::Get { keys: &taken }.encode(&mut want);
    }
    assert_eq!(&buf[..], &want[..]);
});
