//! memgroup-topology: filled in by a later issue.
