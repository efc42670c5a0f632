//! # memgroup
//!
//! A memcached cluster client: routes keys like the Java, C and Python
//! clients, replicates across server groups like EVCache. This crate
//! re-exports the workspace's crates under short names; depend on a single
//! one of them if that is all you need.
//!
//! - [`proto`]: the text protocol codec (sans-IO).
//! - [`hash`]: hashing strategies and key→server locators.
//! - [`topology`]: server groups, slots, read/write selection, dead hosts.
//! - [`client`]: the async client.
//! - [`proxy`]: the server side of `memgroup proxy` (memcached's protocols
//!   served and forwarded through the client).
//! - [`config`]: `cluster.toml`, the tool's cluster file (feature `config`).
//!
//! ```no_run
//! use memgroup::client::{Client, Error};
//!
//! async fn run() -> Result<(), Error> {
//!     let client = Client::connect("10.0.0.1:11211,10.0.0.2:11211").await?;
//!     client.set("greeting", "hello", 300).await?;
//!     let item = client.get("greeting").await?; // a miss is Ok(None)
//!     assert_eq!(item.map(|i| i.value), Some("hello".into()));
//!     Ok(())
//! }
//! ```
//!
//! The tool, the proxy, the features and the measurements: the
//! repository's README and PERFORMANCE.md.
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's examples, compiled and run as doctests (not part of the API).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use memgroup_client as client;
pub use memgroup_hash as hash;
pub use memgroup_proto as proto;
pub use memgroup_proxy as proxy;
pub use memgroup_topology as topology;

#[cfg(feature = "config")]
pub mod config;
