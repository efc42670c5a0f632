//! Integration tests against real memcached processes (one test binary for the
//! whole workspace, to keep link time down).

// Items of test modules are `pub` for each other, not for users.
#![allow(unreachable_pub)]

mod auth;
mod cli;
mod client;
mod hostile;
mod interop;
mod longkeys;
mod membership;
mod migrate;
mod proto;
mod soak;
mod spans;
mod status;
mod support;
mod tidy;
mod trust;

/// Per-thread heap accounting (`support::heap`): the hostile scripts'
/// memory bounds are measured, not assumed.
#[global_allocator]
static HEAP: support::heap::Counting = support::heap::Counting;
#[cfg(feature = "tls")]
mod tls;
