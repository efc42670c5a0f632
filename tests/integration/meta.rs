//! The typed meta API: binary keys sent base64 encoded, replies read as
//! typed fields, replicated like the classic commands. Real memcached.

use memgroup::client::{Client, MetaFlag, MetaTtl, SetMode};

use crate::support::{Memcached, raw, two_zones};

/// A client of one server alone: reads that copy and no other.
fn only(server: &Memcached) -> Client {
    Client::builder()
        .servers(&server.addr_string())
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_binary_key_round_trips_in_every_group_and_reads_back_typed() {
    let (sg1, sg2, client) = two_zones(|b| b.write_wait(memgroup::client::WriteWait::AllGroups));
    let key: &[u8] = b"\x00bin\r\n key\xff";
    let outcome = client
        .meta_set(
            key,
            "v",
            &[
                MetaFlag::Base64Key,
                MetaFlag::SetFlags(7),
                MetaFlag::Ttl(100),
            ],
        )
        .await
        .unwrap();
    assert!(outcome.is_complete(), "{outcome:?}");
    // Each group holds the copy under the binary key itself.
    let read = [
        MetaFlag::Base64Key,
        MetaFlag::ReturnKey,
        MetaFlag::ReturnValue,
        MetaFlag::ReturnFlags,
        MetaFlag::ReturnTtl,
        MetaFlag::ReturnCas,
    ];
    for server in [&sg1, &sg2] {
        assert_eq!(raw::stat(server.addr(), "curr_items"), 1);
        let reply = only(server).meta_get(key, &read).await.unwrap().unwrap();
        let fields = reply.fields();
        assert_eq!(reply.value.as_deref(), Some(&b"v"[..]));
        assert_eq!(fields.key.as_deref(), Some(key), "the key comes back raw");
        assert!(fields.base64_key);
        assert_eq!(fields.client_flags, Some(7));
        assert!(
            matches!(fields.ttl, Some(MetaTtl::Seconds(98..=100))),
            "{fields:?}"
        );
        assert!(fields.cas.is_some() && !fields.won && !fields.stale);
    }
    // A classic get of the encoded text is another key.
    let mut text = Vec::new();
    memgroup::proto::base64_encode(key, &mut text);
    assert_eq!(raw::get(sg1.addr(), &text), None);
    // Arithmetic and delete take the flag too.
    let counter = [
        MetaFlag::Base64Key,
        MetaFlag::Vivify(0),
        MetaFlag::Initial(5),
        MetaFlag::ReturnValue,
    ];
    let reply = client
        .meta_arith(b"\x01ctr", &counter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reply.value.as_deref(), Some(&b"5"[..]));
    client
        .meta_delete(key, &[MetaFlag::Base64Key])
        .await
        .unwrap();
    for server in [&sg1, &sg2] {
        assert!(only(server).meta_get(key, &read).await.unwrap().is_none());
    }
}

#[tokio::test]
async fn a_vivified_miss_reads_as_won_then_sent() {
    let server = Memcached::spawn();
    let client = only(&server);
    let lease = [
        MetaFlag::Vivify(30),
        MetaFlag::ReturnValue,
        MetaFlag::ReturnTtl,
    ];
    let first = client
        .meta_get("hot", &lease)
        .await
        .unwrap()
        .unwrap()
        .fields();
    let second = client
        .meta_get("hot", &lease)
        .await
        .unwrap()
        .unwrap()
        .fields();
    assert!(first.won && !first.win_sent, "{first:?}");
    assert!(second.win_sent && !second.won, "{second:?}");
    // Add mode over the stub fails: the stub is an item.
    let add = [MetaFlag::SetMode(SetMode::Add)];
    let outcome = client.meta_set("hot", "x", &add).await.unwrap();
    assert!(!outcome.is_complete(), "{outcome:?}");
}

#[tokio::test]
async fn a_lease_asked_from_two_zones_is_won_once() {
    let (sg1, sg2) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", sg1.addr_string(), sg2.addr_string());
    let zone = |z: &str| {
        Client::builder()
            .evcache_groups(&groups)
            .zone(z)
            .build()
            .unwrap()
    };
    let lease = [MetaFlag::Vivify(30), MetaFlag::ReturnValue];
    for key in ["k1", "k2", "k3", "k4"] {
        let one = zone("sg1").meta_get(key, &lease).await.unwrap().unwrap();
        let two = zone("sg2").meta_get(key, &lease).await.unwrap().unwrap();
        assert!(
            one.won() && two.win_sent() && !two.won(),
            "{key}: {one:?} {two:?}"
        );
    }
    // One stub per key, all at the arbiters: four in all.
    let stubs = raw::stat(sg1.addr(), "curr_items") + raw::stat(sg2.addr(), "curr_items");
    assert_eq!(stubs, 4);
}
