//! The envelope against the bytes Java writes, and against garbage.

use super::*;

fn envelope(key: &str, value: &[u8]) -> Envelope {
    Envelope {
        key: key.into(),
        value: value.to_vec(),
        flags: 0,
        ttl: 3600,
        create_time: 1_700_000_000_000,
    }
}

#[test]
fn the_stream_is_byte_for_byte_what_java_writes() {
    // ObjectOutputStream's bytes for EVCacheValue("myKey", "hello world",
    // 0, 3600, 1700000000000), laid out by the serialization grammar.
    let expected = "aced000573720025636f6d2e6e6574666c69782e657663616368652e706f6f6c2e45564361636865\
56616c75652c2a7385e07411c00200054a000a63726561746554696d6549000566\
6c6167734a000374746c4c00036b65797400124c6a6176612f6c616e672f53747269\
6e673b5b000576616c75657400025b4278700000018bcfe5680000000000000000\
0000000e107400056d794b6579757200025b42acf317f8060854e0020000787000\
00000b68656c6c6f20776f726c64";
    let bytes = encode(&envelope("myKey", b"hello world"));
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, expected);
    assert_eq!(bytes.len(), 187);
    assert_eq!(decode(&bytes), Some(envelope("myKey", b"hello world")));
}

#[test]
fn keys_round_trip_in_modified_utf8() {
    for key in [
        "",
        "nul\0in",
        "é",
        "日本",
        "😀 outside the BMP",
        &"x".repeat(70_000),
    ] {
        let e = envelope(key, b"v");
        assert_eq!(decode(&encode(&e)).as_ref(), Some(&e), "{key:.20}");
    }
    assert_eq!(modified_utf8("\0"), [0xC0, 0x80]);
    assert_eq!(modified_utf8("😀"), [0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80]);
}

#[test]
fn the_binary_form_reads_and_garbage_does_not() {
    // EVCache's own test payload: EVCacheValue("k", [0x76], 1, 60, 42).
    let binary = [
        0x0C, 0x00, 0, 0, 0, 1, b'k', 0, 0, 0, 1, 0x76, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 60, 0, 0,
        0, 0, 0, 0, 0, 42, 0xFF,
    ];
    let read = decode(&binary).unwrap();
    assert_eq!(
        (
            read.key.as_str(),
            &read.value[..],
            read.flags,
            read.ttl,
            read.create_time
        ),
        ("k", &[0x76u8][..], 1, 60, 42)
    );
    let java = encode(&envelope("k", b"v"));
    for cut in 0..java.len() {
        assert_eq!(decode(&java[..cut]), None, "cut at {cut}");
    }
    let mut other = java.clone();
    other[20] ^= 1; // the class name
    assert_eq!(decode(&other), None);
    assert_eq!(decode(b"plain value"), None);
    assert_eq!(decode(&binary[..20]), None);
}

#[test]
fn a_back_reference_to_a_string_reads() {
    // The key the same String object as the class name "[B" already
    // written: Java writes a reference to handle 0x7E0002.
    let mut bytes = encode(&envelope("[B", b"v"));
    let at = bytes
        .windows(5)
        .position(|w| w == [TC_STRING, 0, 2, b'[', b'B'])
        .unwrap();
    let key_at = bytes[at + 5..]
        .windows(5)
        .position(|w| w == [TC_STRING, 0, 2, b'[', b'B'])
        .unwrap()
        + at
        + 5;
    bytes.splice(key_at..key_at + 5, [TC_REFERENCE, 0x00, 0x7E, 0x00, 0x02]);
    let read = decode(&bytes).unwrap();
    assert_eq!(read.key, "[B");
}

proptest::proptest! {
    /// Any key and value round trip; any bytes, and any envelope cut
    /// or with one byte changed, decode to something or to nothing,
    /// never a panic, and never to a value longer than what was read.
    #[test]
    fn envelopes_round_trip_and_garbage_never_panics(
        key in "\\PC{0,40}",
        value in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
        flags in proptest::num::u32::ANY,
        garbage in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
        at in proptest::num::usize::ANY,
        byte in proptest::num::u8::ANY,
    ) {
        let e = Envelope { key, value, flags, ttl: 7, create_time: 9 };
        let bytes = encode(&e);
        proptest::prop_assert_eq!(decode(&bytes), Some(e));
        let _ = decode(&garbage);
        let mut java = b"\xac\xed\x00\x05".to_vec();
        java.extend_from_slice(&garbage);
        let _ = decode(&java);
        let mut binary = vec![BINARY_MAGIC, 0];
        binary.extend_from_slice(&garbage);
        let _ = decode(&binary);
        let mut changed = bytes.clone();
        let i = at % changed.len();
        changed[i] = byte;
        if let Some(read) = decode(&changed) {
            proptest::prop_assert!(read.value.len() <= changed.len());
        }
        let _ = decode(&bytes[..i]);
    }
}
