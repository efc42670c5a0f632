//! # memgroup-client: the async memcached cluster client
//!
//! A tokio client for memcached fleets shared with Java, Python and C
//! services, with EVCache-style replication across server groups.
//!
//! - **Routing** comes from [`memgroup_hash`]: pick the hashing strategy the
//!   rest of the fleet uses (Whalin native/old-compat/new-compat/consistent,
//!   ketama) and every key lands on the server the other clients pick.
//! - **Server groups** come from [`memgroup_topology`]: reads go to the group
//!   in the caller's zone and fall back to others on a miss or an error;
//!   writes go to exactly one connection in every group, and the write policy
//!   decides success; [`Client::add_or_set`] warms chosen groups with exactly
//!   one write per key per group, whatever the pool size.
//! - **Connections** are pipelined: many requests in flight on one TCP
//!   connection, replies paired in order, concurrent writes coalesced, with a
//!   cap on requests in flight. Dropping a call's future or timing it out
//!   never desynchronises a connection: its reply is read and discarded.
//!   `pool_size` connections per server, opened lazily.
//! - **Failures** are typed ([`Error`] with `is_timeout()`, `is_connection()`,
//!   …): a dead server is backed off (1 s, doubling to 10 min) and skipped;
//!   with failover on, its keys move to the server the Java client would pick.
//!   Invalid keys and oversized values are refused before a byte is sent.
//!   A miss is `Ok(None)`, never an error.
//!
//! ```no_run
//! use memgroup_client::Client;
//!
//! # async fn demo() -> Result<(), memgroup_client::Error> {
//! // One group of servers, default (ketama) hashing, connections opened now.
//! let client = Client::connect("127.0.0.1:11211,127.0.0.1:11212").await?;
//! client.set("greeting", "hello", 60).await?;
//! let item = client.get("greeting").await?.expect("just stored");
//! assert_eq!(&item.value[..], b"hello");
//!
//! // Many keys: one `get k1 k2 …` per server, sent concurrently.
//! let items = client.get_multi(&["greeting", "missing"]).await?;
//! assert_eq!(items.len(), 1);
//! # Ok(()) }
//! ```
//!
//! Two zones, each a full copy, reading locally:
//!
//! ```no_run
//! use memgroup_client::Client;
//! use memgroup_hash::HashStrategy;
//! use memgroup_topology::WritePolicy;
//!
//! # async fn demo() -> Result<(), memgroup_client::Error> {
//! let client = Client::builder()
//!     .evcache_groups("us-east-1a=10.0.0.1:11211,10.0.0.2:11211;us-east-1b=10.0.1.1:11211,10.0.1.2:11211")?
//!     .zone("us-east-1a")
//!     .hash(HashStrategy::Ketama)
//!     .pool_size(4)
//!     .write_policy(WritePolicy::Quorum)
//!     .build()?;
//! let outcome = client.set("user:42", "Ada", 300).await?;
//! for (group, error) in outcome.failed() {
//!     eprintln!("{group} missed the write: {error}");
//! }
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

mod admin;
mod auth;
mod builder;
mod client;
mod conn;
pub mod crawler;
mod error;
mod events;
mod item;
mod join;
pub mod longkey;
mod merge;
pub mod migrate;
mod pool;
mod read;
mod state;
mod stats;
#[cfg(feature = "tls")]
mod tls;
mod trace;
mod transport;
mod typed;
pub mod value;
mod watch;
mod write;

pub use admin::Probe;
pub use auth::Credentials;
pub use builder::{ClientBuilder, ClientUrl};
pub use client::Client;
pub use error::{Error, ErrorKind};
pub use events::Event;
pub use item::{GroupOutcome, Item, ServerStats, WriteOutcome};
pub use longkey::{KeyDigest, LongKeys};
pub use memgroup_proto::{MetaFlag, MetaResponse, MetaStatus};
pub use migrate::MigrationStatus;
pub use stats::{Counters, GroupStatus, ServerState, ServerStatus, Status};
#[cfg(feature = "tls")]
pub use tls::TlsConfig;
pub use watch::Watcher;

/// `Client` is shared across tasks: checked at compile time.
const _: () = {
    const fn shared<T: Clone + Send + Sync + 'static>() {}
    shared::<Client>();
};
