//! Rust values through serde, against real memcached: each codec round
//! trips in every group with its own flags, and a value read with the
//! wrong codec, stored by another client, or of another shape is a typed
//! error naming the key.

use memgroup::client::{
    ErrorKind, Json, Postcard, SERDE_JSON_FLAGS, SERDE_POSTCARD_FLAGS, WriteWait,
};
use serde::{Deserialize, Serialize};

use crate::support::{raw, two_zones};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct User {
    id: u64,
    name: String,
    tags: Vec<String>,
}

#[tokio::test]
async fn both_codecs_round_trip_with_their_flags_and_refuse_each_other() {
    let (sg1, sg2, client) = two_zones(|b| b.write_wait(WriteWait::AllGroups));
    let ada = User {
        id: 42,
        name: "Ada".into(),
        tags: vec!["math".into()],
    };
    client.set_as("json", &Json(&ada), 100).await.unwrap();
    client.set_as("pc", &Postcard(&ada), 100).await.unwrap();
    for server in [&sg1, &sg2] {
        let (bytes, flags, _) = raw::copy(server.addr(), b"json").unwrap();
        assert_eq!(flags, SERDE_JSON_FLAGS);
        assert_eq!(bytes, br#"{"id":42,"name":"Ada","tags":["math"]}"#);
        let (bytes, flags, _) = raw::copy(server.addr(), b"pc").unwrap();
        assert_eq!(flags, SERDE_POSTCARD_FLAGS);
        assert!(
            bytes.len() < 15,
            "postcard is compact: {} bytes",
            bytes.len()
        );
    }
    let back: Option<Json<User>> = client.get_as("json").await.unwrap();
    assert_eq!(back.map(Json::into_inner).as_ref(), Some(&ada));
    let back: Option<Postcard<User>> = client.get_as("pc").await.unwrap();
    assert_eq!(back.map(Postcard::into_inner).as_ref(), Some(&ada));
    assert_eq!(client.get_as::<Json<User>>("absent").await.unwrap(), None);

    let wrong = client.get_as::<Json<User>>("pc").await.unwrap_err();
    assert_eq!(wrong.kind(), ErrorKind::Type);
    assert!(
        wrong.to_string().contains("\"pc\"") && wrong.to_string().contains("postcard"),
        "{wrong}"
    );
    raw::set(sg1.addr(), b"plain", b"{\"id\":1}");
    let other = client.get_as::<Json<User>>("plain").await.unwrap_err();
    assert_eq!(other.kind(), ErrorKind::Type);
    assert!(other.to_string().contains("\"plain\""), "{other}");
    let shape = client.get_as::<Json<Vec<u8>>>("json").await.unwrap_err();
    assert_eq!(shape.kind(), ErrorKind::Type);
    assert!(shape.to_string().contains("\"json\""), "{shape}");
}
