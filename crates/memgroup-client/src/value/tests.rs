//! Known-answer vectors per format (from the real clients: the spymemcached
//! 2.12.3 jar and python-memcached 1.62 were run to produce them; the Whalin
//! vectors follow its `NativeHandler` source), round trips of every type
//! through every format, and decoding arbitrary input.

use bytes::Bytes;
use proptest::prelude::*;

use super::*;

fn item(value: &[u8], flags: u32) -> Item {
    Item {
        value: Bytes::copy_from_slice(value),
        flags,
        cas: None,
    }
}

fn codec(format: ValueFormat) -> Codec {
    Codec {
        format,
        max_decompressed: DEFAULT_MAX_DECOMPRESSED,
    }
}

fn enc(format: ValueFormat, v: &Value) -> (Vec<u8>, u32) {
    let (b, f) = codec(format).encode(v).unwrap();
    (b.to_vec(), f)
}

fn dec(format: ValueFormat, value: &[u8], flags: u32) -> Result<Value, Error> {
    codec(format).decode(b"k", &item(value, flags))
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// `SerializingTranscoder.encode` in the Debian spymemcached 2.12.3 jar,
/// printed as flags and hex by a small Java program.
#[test]
fn spymemcached_vectors() {
    let spy = ValueFormat::spymemcached();
    let cases: &[(Value, u32, &str)] = &[
        (Value::String("héllo".into()), 0, "68c3a96c6c6f"),
        (Value::Bool(true), 256, "31"),
        (Value::Bool(false), 256, "30"),
        (Value::Int(0), 512, ""),
        (Value::Int(42), 512, "2a"),
        (Value::Int(-1), 512, "ffffffff"),
        (Value::Int(300), 512, "012c"),
        (Value::Long(1_234_567_890_123), 768, "011f71fb04cb"),
        (Value::Long(-1), 768, "ffffffffffffffff"),
        (Value::Date(1_700_000_000_000), 1024, "018bcfe56800"),
        (Value::Byte(7), 1280, "07"),
        (Value::Float(1.5), 1536, "3fc00000"),
        (Value::Double(2.25), 1792, "4002000000000000"),
        (Value::Bytes(Bytes::from_static(&[1, 2, 3])), 2048, "010203"),
    ];
    for (value, flags, bytes) in cases {
        assert_eq!(enc(spy, value), (hex(bytes), *flags), "{value:?}");
        assert_eq!(&dec(spy, &hex(bytes), *flags).unwrap(), value);
    }
    // Strings over the threshold are gzipped, JSON-looking ones are not.
    let big = "a".repeat(20_000);
    let (packed, flags) = enc(spy, &Value::String(big.clone()));
    assert_eq!(flags, 2);
    assert!(packed.len() < 100 && packed.starts_with(&[0x1f, 0x8b]));
    assert_eq!(dec(spy, &packed, 2).unwrap(), Value::String(big.clone()));
    for json in [format!("{{{big}}}"), format!("[{big}]"), "1".repeat(20_000)] {
        assert_eq!(
            enc(spy, &Value::String(json.clone())).1,
            0,
            "not compressed"
        );
    }
    // EVCache: a 120-byte threshold and no JSON rule; byte arrays too.
    let ev = ValueFormat::evcache();
    let s200 = "b".repeat(200);
    assert_eq!(enc(ev, &Value::String(s200.clone())).1, 2);
    assert_eq!(enc(ev, &Value::String(format!("{{{s200}}}"))).1, 2);
    assert_eq!(enc(ev, &Value::Bytes(Bytes::from(s200.clone()))).1, 2050);
    // The jar's gzip of 200 'b's, read back.
    let java_gzip = hex("1f8b08000000000000ff4b4a1a1e0000eae2015dc8000000");
    assert_eq!(dec(ev, &java_gzip, 2).unwrap(), Value::String(s200.clone()));
    assert_eq!(
        dec(ev, &java_gzip, 2050).unwrap(),
        Value::Bytes(Bytes::from(s200))
    );
    // A serialized java.lang.Character (flag 1) stays opaque.
    let ser = dec(spy, &hex("aced0005737200136a617661"), 1).unwrap();
    assert!(matches!(
        ser,
        Value::Serialized {
            kind: Serialization::Java,
            ..
        }
    ));
}

/// python-memcached 1.62's `_val_to_store_info`, run under Python 3.11.
#[test]
fn python_memcached_vectors() {
    let py = ValueFormat::python_memcached();
    let cases: &[(Value, u32, &[u8])] = &[
        (Value::Bool(true), 1, b"I01\n."),
        (Value::Bool(false), 1, b"I00\n."),
        (Value::Double(2.5), 1, b"F2.5\n."),
        (Value::Double(-0.1), 1, b"F-0.1\n."),
        (Value::Long(42), 2, b"42"),
        (Value::String("héllo".into()), 16, "héllo".as_bytes()),
        (
            Value::Bytes(Bytes::from_static(b"\x00\xff")),
            0,
            b"\x00\xff",
        ),
    ];
    for (value, flags, bytes) in cases {
        assert_eq!(enc(py, value), (bytes.to_vec(), *flags), "{value:?}");
        assert_eq!(&dec(py, bytes, *flags).unwrap(), value);
    }
    // Python wrote 1e+300; ints of any size; 'x'*100 with min_compress_len=10.
    assert_eq!(dec(py, b"F1e+300\n.", 1).unwrap(), Value::Double(1e300));
    let big = "1000000000000000000000000000000";
    assert_eq!(
        dec(py, big.as_bytes(), 2).unwrap(),
        Value::BigInt(big.to_string())
    );
    let z = hex("789caba8a03d00004 01b2ee1".replace(' ', "").as_str());
    assert_eq!(dec(py, &z, 24).unwrap(), Value::String("x".repeat(100)));
    let small = py.with_compression_threshold(10);
    let (packed, flags) = enc(small, &Value::String("x".repeat(100)));
    assert_eq!(flags, 24);
    assert_eq!(
        dec(py, &packed, flags).unwrap(),
        Value::String("x".repeat(100))
    );
    // Integers are never compressed; other pickles stay opaque.
    assert_eq!(enc(small, &Value::Long(10i64.pow(18))).1, 2);
    let none = dec(py, b"N.", 1).unwrap();
    assert!(matches!(
        none,
        Value::Serialized {
            kind: Serialization::Pickle,
            ..
        }
    ));
    // Binary protocols: True, and 2.5 as BINFLOAT, in a protocol 4 frame.
    assert_eq!(dec(py, b"\x80\x02\x88.", 1).unwrap(), Value::Bool(true));
    let mut framed = b"\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00G".to_vec();
    framed.extend_from_slice(&2.5f64.to_bits().to_be_bytes());
    framed.push(b'.');
    assert_eq!(dec(py, &framed, 1).unwrap(), Value::Double(2.5));
}

/// The Whalin classic markers (`NativeHandler`), which `Raw` also uses.
#[test]
fn whalin_vectors() {
    for format in [ValueFormat::Raw, ValueFormat::whalin()] {
        let cases: &[(Value, u32, &[u8])] = &[
            (Value::Int(42), 4, &[0, 0, 0, 42]),
            (Value::Short(-1), 256, &[0xff; 4]),
            (Value::Char('A'), 16, &[0, 0, 0, 0x41]),
            (Value::Bool(true), 8192, &[1]),
            (Value::Long(7), 16384, &[0, 0, 0, 0, 0, 0, 0, 7]),
            (Value::String("hé".into()), 32, "hé".as_bytes()),
            (Value::Byte(-56), 1, &[200]),
        ];
        for (value, flags, bytes) in cases {
            assert_eq!(enc(format, value), (bytes.to_vec(), *flags), "{value:?}");
            assert_eq!(&dec(format, bytes, *flags).unwrap(), value);
        }
        assert_eq!(enc(format, &Value::Double(1.5)).1, 512);
        // Flags 0: bytes, which read as text or a number (a counter after decr).
        assert_eq!(
            dec(format, b"9 ", 0).unwrap(),
            Value::Bytes(Bytes::from_static(b"9 "))
        );
        assert_eq!(i64::from_value(dec(format, b"9 ", 0).unwrap()).unwrap(), 9);
        // Java's order: Boolean (8192) is tested before Long (16384).
        assert_eq!(java_type(0x2000 | 0x4000), 0x2000);
        assert!(dec(format, &[0, 1], 4).is_err());
    }
    // Compressed: Raw refuses, Whalin reads.
    let (packed, flags) = enc(ValueFormat::whalin(), &Value::String("z".repeat(40_000)));
    assert_eq!(flags, 32 | 2);
    let err = dec(ValueFormat::Raw, &packed, flags).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Type);
    assert_eq!(
        dec(ValueFormat::whalin(), &packed, flags).unwrap(),
        Value::String("z".repeat(40_000))
    );
}

#[test]
fn corrupt_or_oversized_compression_is_a_typed_error_naming_the_key() {
    let spy = ValueFormat::evcache();
    let err = codec(spy)
        .decode(b"user:42", &item(b"\x1f\x8b garbage", 2))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(err.to_string().contains("user:42"), "{err}");
    let (bomb, flags) = enc(spy, &Value::String("q".repeat(5_000_000)));
    let small = Codec {
        format: spy,
        max_decompressed: 1_000_000,
    };
    let err = small.decode(b"bomb", &item(&bomb, flags)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(err.to_string().contains("1000000"), "{err}");
    // EVCache's zstd option is named, not garbled.
    let err = dec(spy, &[0x28, 0xb5, 0x2f, 0xfd, 1, 2], 2).unwrap_err();
    assert!(err.to_string().contains("zstd"), "{err}");
}

#[test]
fn rust_types_convert_through_values() {
    assert_eq!(i64::from_value(Value::Int(-3)).unwrap(), -3);
    assert_eq!(
        i32::from_value(Value::Long(1 << 40)).unwrap_err().kind(),
        ErrorKind::Type
    );
    assert_eq!(u64::from_value(Value::String("15".into())).unwrap(), 15);
    assert_eq!(u8::from_value(Value::Byte(-1)).unwrap(), 255);
    assert_eq!(
        String::from_value(Value::Bytes(Bytes::from_static(b"x"))).unwrap(),
        "x"
    );
    assert!(bool::from_value(Value::Int(1)).is_err());
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123);
    assert_eq!(t.to_value(), Value::Date(1_700_000_000_123));
    assert_eq!(
        std::time::SystemTime::from_value(Value::Date(1_700_000_000_123)).unwrap(),
        t
    );
    assert_eq!("raw".parse::<ValueFormat>().unwrap(), ValueFormat::Raw);
    assert_eq!("evcache".parse::<ValueFormat>().unwrap().name(), "evcache");
    assert!("json".parse::<ValueFormat>().is_err());
}

fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(|b| Value::Bytes(Bytes::from(b))),
        ".{0,300}".prop_map(Value::String),
        any::<bool>().prop_map(Value::Bool),
        any::<i8>().prop_map(Value::Byte),
        any::<i16>().prop_map(Value::Short),
        any::<i32>().prop_map(Value::Int),
        any::<i64>().prop_map(Value::Long),
        any::<f32>()
            .prop_filter("NaN != NaN", |f| !f.is_nan())
            .prop_map(Value::Float),
        any::<f64>()
            .prop_filter("NaN != NaN", |f| !f.is_nan())
            .prop_map(Value::Double),
        any::<i64>().prop_map(Value::Date),
        any::<char>()
            .prop_filter("one UTF-16 unit", |c| (*c as u32) < 0x10000)
            .prop_map(Value::Char),
    ]
}

/// What a format gives back for `v`: the same value, or for types it folds
/// into another, that type.
fn expected(format: ValueFormat, v: &Value) -> Option<Value> {
    Some(match (format, v) {
        (ValueFormat::Spymemcached { .. }, Value::Char(_) | Value::Short(_)) => return None,
        (ValueFormat::PythonMemcached { .. }, Value::Date(_)) => return None,
        (ValueFormat::PythonMemcached { .. }, Value::Byte(n)) => Value::Long(i64::from(*n)),
        (ValueFormat::PythonMemcached { .. }, Value::Short(n)) => Value::Long(i64::from(*n)),
        (ValueFormat::PythonMemcached { .. }, Value::Int(n)) => Value::Long(i64::from(*n)),
        (ValueFormat::PythonMemcached { .. }, Value::Float(f)) => Value::Double(f64::from(*f)),
        (ValueFormat::PythonMemcached { .. }, Value::Char(c)) => Value::String(c.to_string()),
        _ => v.clone(),
    })
}

proptest! {
    /// Every type round-trips through every format (compressing or not).
    #[test]
    fn every_type_round_trips_through_every_format(v in any_value(), threshold in 0usize..200) {
        for format in [
            ValueFormat::Raw,
            ValueFormat::spymemcached().with_compression_threshold(threshold),
            ValueFormat::evcache().with_compression_threshold(threshold),
            ValueFormat::whalin().with_compression_threshold(threshold),
            ValueFormat::python_memcached().with_compression_threshold(threshold),
        ] {
            let Some(want) = expected(format, &v) else {
                prop_assert!(codec(format).encode(&v).is_err());
                continue;
            };
            let (bytes, flags) = codec(format).encode(&v).unwrap();
            let got = codec(format).decode(b"k", &Item { value: bytes, flags, cas: None });
            // Spymemcached stores strings with flags 0, as bytes do elsewhere.
            prop_assert_eq!(got.unwrap(), want, "{}", format);
        }
    }

    /// Any bytes with any flags decode to a value or a typed error, never a
    /// panic, whatever the format.
    #[test]
    fn arbitrary_items_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200), flags in any::<u32>()) {
        for format in [
            ValueFormat::Raw,
            ValueFormat::spymemcached(),
            ValueFormat::whalin(),
            ValueFormat::python_memcached(),
        ] {
            let small = Codec { format, max_decompressed: 4096 };
            if let Err(e) = small.decode(b"k", &item(&data, flags)) {
                prop_assert!(matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::Type), "{e}");
            }
        }
    }
}

#[test]
fn value_formats_print_the_name_they_parse_from() {
    for name in [
        "raw",
        "spymemcached",
        "evcache",
        "whalin",
        "python-memcached",
    ] {
        let format: ValueFormat = name.parse().unwrap();
        assert_eq!(format.to_string(), name);
    }
}
