//! Integration tests against real memcached processes (one test binary for the
//! whole workspace, to keep link time down).

// Items of test modules are `pub` for each other, not for users.
#![allow(unreachable_pub)]

mod proto;
// The fault-injection half of the harness (stop/resume/restart) serves the client tests.
#[allow(dead_code)]
mod support;
