//! Writes in flight per server and key, so a repair never deletes a newer
//! value. A write's part that misses a key's own server ends — and queues
//! its repair — when its timeout fires, which can be after a later write of
//! the key was applied there; deleting then would lose that later,
//! acknowledged value. So every part registers with the key's own server
//! while it runs, an applied one records its write's number (writes are
//! numbered as they start), and a part that missed queues its repair only if
//! no later write was applied there meanwhile. Entries live only while a
//! part of that key is in flight, in 16 shards by key, keyed by the
//! server's id in the part's snapshot and a 64-bit digest of the key (no
//! allocation per part; two keys sharing a digest would at worst skip a
//! repair, at odds of about one in 2^64 per pair in flight together; a
//! server whose id changed with a topology change while a part ran is not
//! matched, and a late miss there may still delete a newer value).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use memgroup_topology::ServerId;
use parking_lot::Mutex;

const SHARDS: usize = 16;

/// One shard: by server id and key digest.
type Shard = HashMap<(usize, u64), Track, BuildHasherDefault<Mix>>;

/// Hashes an already well-mixed `(server, digest)` pair cheaply.
#[derive(Default)]
struct Mix(u64);

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// FNV-1a over the key: its digest here.
pub(crate) fn digest(key: &[u8]) -> u64 {
    key.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The registry, in shards by key.
#[derive(Debug, Default)]
pub(crate) struct Inflight {
    shards: [Mutex<Shard>; SHARDS],
}

#[derive(Debug, Default)]
struct Track {
    /// Parts in flight.
    parts: u32,
    /// The highest write number applied while tracked, with the CAS its
    /// copy got (when its reply said).
    applied: u64,
    cas: Option<u64>,
}

fn shard(digest: u64) -> usize {
    (digest >> 59) as usize % SHARDS
}

impl Inflight {
    /// Registers a part of a write of the key of `digest` ([`digest`]) whose
    /// own server is `server`.
    pub(crate) fn begin(self: &Arc<Self>, server: ServerId, digest: u64) -> Tracking {
        let at = (server.0, digest);
        self.shards[shard(at.1)].lock().entry(at).or_default().parts += 1;
        Tracking {
            inflight: self.clone(),
            at,
            done: false,
        }
    }

    /// Whether a part of a write of the key of `digest` is in flight to
    /// `server`.
    pub(crate) fn busy(&self, server: ServerId, digest: u64) -> bool {
        self.shards[shard(digest)]
            .lock()
            .get(&(server.0, digest))
            .is_some_and(|t| t.parts > 0)
    }

    fn end(&self, at: (usize, u64), applied: Option<(u64, Option<u64>)>) -> (u64, Option<u64>) {
        let mut shard = self.shards[shard(at.1)].lock();
        let Some(track) = shard.get_mut(&at) else {
            return (0, None);
        };
        if let Some((number, cas)) = applied
            && number > track.applied
        {
            (track.applied, track.cas) = (number, cas);
        }
        let newest = (track.applied, track.cas);
        track.parts -= 1;
        if track.parts == 0 {
            shard.remove(&at);
        }
        newest
    }
}

/// One part's registration; ends when finished or dropped.
#[derive(Debug)]
pub(crate) struct Tracking {
    inflight: Arc<Inflight>,
    at: (usize, u64),
    done: bool,
}

impl Tracking {
    /// The part ended, applied on the key's own server as write `applied`
    /// (if so, with the CAS its copy got): returns the highest write number
    /// applied there while it was in flight, and that copy's CAS.
    pub(crate) fn finish(&mut self, applied: Option<(u64, Option<u64>)>) -> (u64, Option<u64>) {
        self.done = true;
        self.inflight.end(self.at, applied)
    }
}

impl Drop for Tracking {
    fn drop(&mut self) {
        if !self.done {
            self.inflight.end(self.at, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_that_ends_late_sees_a_later_write_applied_meanwhile() {
        let inflight = Arc::new(Inflight::default());
        let server = ServerId(3);
        let mut first = inflight.begin(server, digest(b"k"));
        let mut later = inflight.begin(server, digest(b"k"));
        let mut other = inflight.begin(server, digest(b"other"));
        let mut elsewhere = inflight.begin(ServerId(4), digest(b"k"));
        assert_eq!(later.finish(Some((7, Some(70)))), (7, Some(70)));
        // The first part, ending (failed) after the later one was applied.
        assert_eq!(first.finish(None), (7, Some(70)));
        assert_eq!(other.finish(None), (0, None));
        assert_eq!(elsewhere.finish(None), (0, None), "another server's copy");
        // Nothing in flight: nothing kept.
        assert!(inflight.shards.iter().all(|s| s.lock().is_empty()));
    }

    #[test]
    fn a_dropped_part_ends_its_registration() {
        let inflight = Arc::new(Inflight::default());
        let dropped = inflight.begin(ServerId(0), digest(b"k"));
        drop(dropped);
        assert!(inflight.shards.iter().all(|s| s.lock().is_empty()));
        let mut alone = inflight.begin(ServerId(0), digest(b"k"));
        assert_eq!(
            alone.finish(None),
            (0, None),
            "an old registration would carry over"
        );
    }
}
