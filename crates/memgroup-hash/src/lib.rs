//! memgroup-hash: key hashing strategies and key-to-server locators (filled in by the hashing issue).
