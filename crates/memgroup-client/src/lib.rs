//! memgroup-client: filled in by a later issue.
