//! The builder's replication and read settings: when a replicated write
//! returns, repairs of copies a write missed, read repair, the near cache,
//! hedged reads and the read queue bound.

use std::time::Duration;

use super::ClientBuilder;
use crate::client::Hedge;
use crate::options::WriteWait;
#[cfg(doc)]
use crate::{Client, Event};

impl ClientBuilder {
    /// When a write replicated to several groups returns: by default once
    /// its write policy is decided ([`WriteWait::Policy`]), so a stalled
    /// group does not hold callers whose policy is already met.
    pub fn write_wait(mut self, wait: WriteWait) -> Self {
        self.write_wait = wait;
        self
    }

    /// Whether concurrent writers of a key end in agreement (on by
    /// default; it matters only with several groups). A `set` or plain
    /// `ms` then goes as `ms … c`, keeping the CAS each group stored, and
    /// once every group answered a check in the background reads the
    /// arbiter's CAS (`mg k c`) and each other group's, deleting by CAS
    /// (`md k C<cas>`) the copies that lost at the arbiter: after writers of
    /// the same keys stop, every group holds the arbiter's value or nothing.
    /// It costs the servers one `mg` per group and write (the caller waits
    /// for none of it). Turn it off for servers without meta commands
    /// (memcached before 1.6): writes then go as classic `set`, and two
    /// writers racing on a key can leave the groups holding different
    /// values until it is written again or expires.
    pub fn converge(mut self, on: bool) -> Self {
        self.converge = on;
        self
    }

    /// The repair queue's capacity (default 10,000; 0 turns repairs off): a
    /// write that missed a key's own server in some group queues a repair
    /// of the key there, retried until the server answers, which deletes
    /// the copy there by its CAS unless it is this client's own later write,
    /// so the group holds the newest value or nothing. In memory: [`Client::close`] drains it. A full queue
    /// drops its oldest entry ([`Event::RepairsDropped`]).
    pub fn repair_queue(mut self, capacity: usize) -> Self {
        self.repair_queue = capacity;
        self
    }

    /// Repairs that outlive the process (off by default): a journal in the
    /// directory `dir` (made, mode 0700, if missing; segments mode 0600).
    /// Each repair is recorded as it is queued and as it is done;
    /// [`Client::close`] leaves in it only what it could not drain. The
    /// next client that opens the journal — any process, any cluster that
    /// has the server — takes the repairs a dead client left (a segment no
    /// living client holds) and does them in the background; those of
    /// servers outside its topology are kept. A process that dies loses no
    /// record the kernel took; a machine crash, at most the last second.
    /// A directory that cannot be used (no such place, read-only) leaves the
    /// client without a journal: [`Client::repair_journal`] says which.
    /// The tool's default is `$XDG_STATE_HOME/memgroup/repairs` (or
    /// `~/.local/state/memgroup/repairs`).
    pub fn repair_journal(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.repair_journal = Some(dir.into());
        self
    }

    /// How long after a repair's first delete is answered a second one
    /// confirms it (default 1 s): a write that timed out on a stalled server
    /// may still be applied from its old socket when the server resumes.
    pub fn repair_grace(mut self, grace: Duration) -> Self {
        self.repair_grace = grace;
        self
    }

    /// Read repair (off by default): after a read that missed in some
    /// groups and hit in a later one, the hit's value is `add`ed, with its
    /// flags and remaining TTL, into the groups that answered with a miss.
    /// It runs on a task of its own (the read returns at once) and costs one
    /// `mg` of the copy (for its TTL) plus one `add` per group that missed;
    /// counted in [`Health::read_repairs`](crate::Health::read_repairs).
    /// Never from or into a copy awaiting a repair. A write of the key that
    /// starts in this client meanwhile cancels it, or has the copies it made
    /// deleted again; a write from another process at that moment can leave
    /// a group holding the value read just before that write (memcached
    /// has no conditional write across servers), until it expires or the
    /// key is written again.
    pub fn read_repair(mut self, on: bool) -> Self {
        self.read_repair = on;
        self
    }

    /// The near cache (off by default): hot keys — hit before and read
    /// within [`NearCache::hot_within`](crate::NearCache::hot_within), as
    /// memcached reports them — kept in process for a short TTL; single-key
    /// `get`s become meta gets. See [`NearCache`](crate::NearCache) for what
    /// it costs.
    pub fn near_cache(mut self, near: crate::client::NearCache) -> Self {
        self.near_cache = Some(near);
        self
    }

    /// Hedged reads (default [`Hedge::default`]: after 5 ms, for at most
    /// 10 % of reads; [`Hedge::off`]): a single-key `get` whose server is
    /// slow asks the key's next group too and takes the first hit. With one
    /// group there is nowhere to hedge to.
    pub fn hedge(mut self, hedge: Hedge) -> Self {
        self.hedge = hedge;
        self
    }

    /// The read queue bound (default 256; 0 turns it off): a server with
    /// this many requests outstanding is passed over by reads, which fall
    /// back to the next group at once (EVCache's `max.read.queue.length`).
    /// Keep it above the requests a healthy server has in flight under
    /// your load, or reads fall back needlessly.
    pub fn max_read_queue(mut self, n: usize) -> Self {
        self.max_read_queue = n;
        self
    }
}
