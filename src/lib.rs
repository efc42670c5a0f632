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
//! - [`config`]: `cluster.toml`, the tool's cluster file (feature `config`).
#![deny(missing_docs)]
#![doc = ""]
#![doc = include_str!("../README.md")]

pub use memgroup_client as client;
pub use memgroup_hash as hash;
pub use memgroup_proto as proto;
pub use memgroup_proxy as proxy;
pub use memgroup_topology as topology;

#[cfg(feature = "config")]
pub mod config;
