//! Hashing benches (filled in by the hashing issue).
fn main() {}
