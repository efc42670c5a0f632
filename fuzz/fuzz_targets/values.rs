//! Decodes arbitrary bytes with arbitrary flags in every value format: a
//! value or a typed error, never a panic, and decompression never past its
//! bound; a decoded value re-encodes without panicking.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use memgroup_client::Item;
use memgroup_client::value::ValueFormat;

fuzz_target!(|data: &[u8]| {
    let Some((flag_bytes, value)) = data.split_at_checked(4) else {
        return;
    };
    let flags = u32::from_le_bytes(flag_bytes.try_into().unwrap());
    let item = Item::new(Bytes::copy_from_slice(value), flags);
    for format in [
        ValueFormat::Raw,
        ValueFormat::spymemcached(),
        ValueFormat::evcache(),
        ValueFormat::whalin(),
        ValueFormat::python_memcached(),
    ] {
        if let Ok(v) = format.decode(b"k", &item, 1 << 16) {
            if let memgroup_client::value::Value::Bytes(b) = &v {
                assert!(b.len() <= (1 << 16).max(value.len()));
            }
            let _ = format.encode(&v);
        }
    }
});
