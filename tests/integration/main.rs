//! Integration tests against real memcached processes (one test binary for the
//! whole workspace, to keep link time down).

// Items of test modules are `pub` for each other, not for users.
#![allow(unreachable_pub)]

mod auth;
mod batch;
mod cli;
mod client;
mod config;
mod discovery;
mod evcache_keys;
mod evcache_keys_groups;
mod evcache_keys_groups_interop;
mod evcache_keys_paths;
mod fill;
mod health;
mod hedge;
mod hostile;
mod interop;
mod longkeys;
mod membership;
mod merge;
mod meta;
mod metrics;
mod migrate;
mod near;
mod proto;
mod proxy;
mod proxy_clients;
mod proxy_hostile;
mod proxy_limits;
mod proxy_login;
mod proxy_reload;
mod proxy_stats;
mod proxy_tls;
mod readrepair;
mod repairs;
mod replicas;
mod serdevalues;
mod soak;
mod spans;
mod support;
mod tidy;
mod trust;
mod twemproxy;
mod writers;

/// Per-thread heap accounting (`memgroup_testkit::alloc`): the hostile
/// scripts' memory bounds are measured, not assumed. A test on a
/// current-thread runtime runs the client (its tasks, its decoding, its
/// buffers) on its own thread, so `Peak` measures what the client holds while
/// the other tests' threads run on.
#[global_allocator]
static HEAP: memgroup_testkit::alloc::Counting = memgroup_testkit::alloc::Counting;
#[cfg(feature = "tls")]
mod tls;
