//! Writes in flight per server and key, so a repair never deletes a newer
//! value. A write's part that misses a key's own server ends — and queues
//! its repair — when its timeout fires, which can be after a later write of
//! the key was applied there; deleting then would lose that later,
//! acknowledged value. So every part registers with the key's own server
//! while it runs, an applied one records its write's number (writes are
//! numbered as they start), and a part that missed queues its repair only if
//! no later write was applied there meanwhile. Entries live only while a
//! part of that key is in flight, in 16 shards by key.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

const SHARDS: usize = 16;

/// One shard: per server, per wire key.
type Shard = HashMap<Arc<str>, HashMap<Box<[u8]>, Track>>;

/// The registry, in shards by key.
#[derive(Debug, Default)]
pub(crate) struct Inflight {
    shards: [Mutex<Shard>; SHARDS],
}

#[derive(Debug, Default)]
struct Track {
    /// Parts in flight.
    parts: u32,
    /// The highest write number applied while tracked.
    applied: u64,
}

fn shard(key: &[u8]) -> usize {
    let h = key
        .iter()
        .fold(key.len() as u32, |h, &b| h.rotate_left(5) ^ u32::from(b));
    h as usize % SHARDS
}

impl Inflight {
    /// Registers a part of a write of `key` whose own server is `server`.
    pub(crate) fn begin(self: &Arc<Self>, server: &Arc<str>, key: &[u8]) -> Tracking {
        let mut shard = self.shards[shard(key)].lock();
        let keys = shard.entry(server.clone()).or_default();
        match keys.get_mut(key) {
            Some(track) => track.parts += 1,
            None => {
                keys.insert(
                    key.into(),
                    Track {
                        parts: 1,
                        applied: 0,
                    },
                );
            }
        }
        Tracking {
            inflight: self.clone(),
            server: server.clone(),
            key: key.into(),
            done: false,
        }
    }

    fn end(&self, server: &str, key: &[u8], applied: Option<u64>) -> u64 {
        let mut shard = self.shards[shard(key)].lock();
        let Some(keys) = shard.get_mut(server) else {
            return 0;
        };
        let Some(track) = keys.get_mut(key) else {
            return 0;
        };
        if let Some(number) = applied {
            track.applied = track.applied.max(number);
        }
        let newest = track.applied;
        track.parts -= 1;
        if track.parts == 0 {
            keys.remove(key);
            if keys.is_empty() {
                shard.remove(server);
            }
        }
        newest
    }
}

/// One part's registration; ends when finished or dropped.
#[derive(Debug)]
pub(crate) struct Tracking {
    inflight: Arc<Inflight>,
    server: Arc<str>,
    key: Box<[u8]>,
    done: bool,
}

impl Tracking {
    /// The part ended, applied on the key's own server as write `applied`
    /// (if so): returns the highest write number applied there while it was
    /// in flight.
    pub(crate) fn finish(&mut self, applied: Option<u64>) -> u64 {
        self.done = true;
        self.inflight.end(&self.server, &self.key, applied)
    }
}

impl Drop for Tracking {
    fn drop(&mut self) {
        if !self.done {
            self.inflight.end(&self.server, &self.key, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_that_ends_late_sees_a_later_write_applied_meanwhile() {
        let inflight = Arc::new(Inflight::default());
        let server: Arc<str> = "s:1".into();
        let mut first = inflight.begin(&server, b"k");
        let mut later = inflight.begin(&server, b"k");
        let mut other = inflight.begin(&server, b"other");
        assert_eq!(later.finish(Some(7)), 7);
        // The first part, ending (failed) after the later one was applied.
        assert_eq!(first.finish(None), 7);
        assert_eq!(other.finish(None), 0);
        // Nothing in flight: nothing kept.
        assert!(inflight.shards.iter().all(|s| s.lock().is_empty()));
    }

    #[test]
    fn a_dropped_part_ends_its_registration() {
        let inflight = Arc::new(Inflight::default());
        let server: Arc<str> = "s:1".into();
        let dropped = inflight.begin(&server, b"k");
        drop(dropped);
        assert!(inflight.shards.iter().all(|s| s.lock().is_empty()));
        let mut alone = inflight.begin(&server, b"k");
        assert_eq!(alone.finish(None), 0, "an old registration would carry over");
    }
}
