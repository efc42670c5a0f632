//! The repair journal: repairs that outlive the process. A process that
//! exits with repairs pending (a server stalled past its close, a crash)
//! would leave that server's stale copies to be served again once it is
//! back; journaled, they are done by the next process that opens the
//! journal, or by `memgroup repair`.
//!
//! - **One segment per client, no shared lock.** A client appends to a
//!   segment of its own in the journal's directory (`<pid>-<n>.journal`,
//!   mode 0600), holding an exclusive lock on it ([`File::try_lock`]) for
//!   as long as it lives. A segment whose lock can be taken has no living
//!   owner: the client that takes it (at its start, in
//!   [`Journal::claim`]) reads its pending entries into its own queue —
//!   journaling them in its own segment — and removes it. Two claimers
//!   cannot both take the lock.
//! - **OwedRepairs** are lines: `A <may_land> <server> <key> <group>` when a
//!   repair is queued, `D <server> <key>` when it is done. A wire key is a
//!   valid memcached key (1–250 bytes, none a space, a control byte or
//!   DEL; a binary key is its base64 form), so it goes as it is; the group
//!   name goes base64 encoded. Replayed in order, the `A`s not followed by
//!   a `D` of the same server and key are what is pending; a torn last line
//!   (a crash mid-write) is skipped.
//! - **Durability.** Each record is one `write` to the file as the repair
//!   is queued or done, so a process that dies loses nothing the kernel
//!   took; the drain task `fsync`s at most every [`SYNC_EVERY`], the bound
//!   on what a machine crash can lose.
//! - **Compaction.** [`Client::close`](crate::Client::close) rewrites the
//!   segment with only what is still pending (renamed over it, locked
//!   before it is visible), or removes it when nothing is.
//! - **Entries for servers outside the topology** are kept: carried into
//!   the claimer's own segment, not done, not dropped.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

/// The longest a record written waits for an `fsync`.
pub(crate) const SYNC_EVERY: Duration = Duration::from_secs(1);

/// Segments made by this process so far (their names' second number).
static SEGMENTS: AtomicU64 = AtomicU64::new(0);

/// A repair still owed: the copy of `key` on `server` may be stale until
/// it is done ([`Client::owed_repairs`](crate::Client::owed_repairs),
/// [`list_repair_journal`](crate::list_repair_journal)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OwedRepair {
    /// The server (`host:port`).
    pub server: String,
    /// A group it is in.
    pub group: String,
    /// The wire key (after any key prefix; a binary key's base64 form).
    pub key: Vec<u8>,
    /// The missed write may still land (sent, not answered): the repair
    /// confirms a grace period after its first pass.
    pub may_land: bool,
}

/// A journaled repair and where it is ([`list_repair_journal`](crate::list_repair_journal)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JournalEntry {
    /// The segment file it is in.
    pub segment: PathBuf,
    /// Whether a living client holds the segment (it does the repair);
    /// otherwise the next client to open the journal takes it.
    pub held: bool,
    /// The repair.
    pub repair: OwedRepair,
}

/// A client's segment of the journal.
#[derive(Debug)]
pub(crate) struct Journal {
    dir: PathBuf,
    own: Mutex<Segment>,
}

/// The client's own segment: made with its first record.
#[derive(Debug, Default)]
struct Segment {
    /// Its path and the file, open and locked.
    open: Option<(PathBuf, File)>,
    /// OwedRepairs written since the last `fsync`.
    unsynced: bool,
}

impl Journal {
    /// The journal in `dir` (made, mode 0700, if missing); this client's
    /// segment is made when it first records a repair.
    pub(crate) fn open(dir: &Path) -> io::Result<Journal> {
        make_dir(dir)?;
        Ok(Journal {
            dir: dir.to_path_buf(),
            own: Mutex::new(Segment::default()),
        })
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The pending entries of every segment no living client holds, each
    /// segment removed once read (this client journals them in its own).
    pub(crate) fn claim(&self) -> Vec<OwedRepair> {
        let own = self.segment();
        let mut claimed = Vec::new();
        for path in segments(&self.dir) {
            if Some(&path) == own.as_ref() {
                continue;
            }
            let Ok(file) = OpenOptions::new().read(true).write(true).open(&path) else {
                continue;
            };
            // Held by a living client (or being claimed by another).
            if file.try_lock().is_err() {
                continue;
            }
            claimed.extend(pending(io::BufReader::new(&file)));
            let _ = std::fs::remove_file(&path);
        }
        claimed
    }

    /// A repair was queued.
    pub(crate) fn added(&self, record: &OwedRepair) {
        let mut line = Vec::with_capacity(record.key.len() + record.server.len() + 32);
        record.encode(&mut line);
        self.own.lock().append(&self.dir, &line);
    }

    /// A repair was done (or superseded).
    pub(crate) fn done(&self, server: &str, key: &[u8]) {
        let mut line = Vec::with_capacity(key.len() + server.len() + 4);
        line.extend_from_slice(b"D ");
        line.extend_from_slice(server.as_bytes());
        line.push(b' ');
        line.extend_from_slice(key);
        line.push(b'\n');
        self.own.lock().append(&self.dir, &line);
    }

    /// `fsync`s what was written since the last one.
    pub(crate) fn sync(&self) {
        let mut own = self.own.lock();
        if own.unsynced {
            if let Some((_, file)) = &own.open {
                let _ = file.sync_data();
            }
            own.unsynced = false;
        }
    }

    /// Rewrites the segment with only `pending` (removes it when empty):
    /// a new file, locked, written and synced, then the old one removed.
    pub(crate) fn compact(&self, pending: &[OwedRepair]) -> io::Result<()> {
        let mut own = self.own.lock();
        let old = own.open.take();
        own.unsynced = false;
        if !pending.is_empty() {
            own.open = Some(write_segment(&self.dir, pending)?);
        }
        if let Some((path, _)) = old {
            let _ = std::fs::remove_file(path);
        }
        Ok(())
    }

    /// The path of this client's segment, once it has one.
    pub(crate) fn segment(&self) -> Option<PathBuf> {
        self.own.lock().open.as_ref().map(|(path, _)| path.clone())
    }
}

impl OwedRepair {
    /// Its `A` line.
    fn encode(&self, line: &mut Vec<u8>) {
        line.extend_from_slice(if self.may_land { b"A 1 " } else { b"A 0 " });
        line.extend_from_slice(self.server.as_bytes());
        line.push(b' ');
        line.extend_from_slice(&self.key);
        line.push(b' ');
        memgroup_proto::base64_encode(self.group.as_bytes(), line);
        line.push(b'\n');
    }
}

impl Segment {
    fn append(&mut self, dir: &Path, line: &[u8]) {
        if self.open.is_none() {
            match new_segment(dir) {
                Ok(open) => self.open = Some(open),
                // The repair is still queued in memory.
                Err(_) => return,
            }
        }
        if let Some((_, file)) = &mut self.open {
            // One write per record: what the kernel took survives the
            // process. A failure (a full disk) loses the record, not the
            // repair, which is still queued in memory.
            let _ = file.write_all(line);
            self.unsynced = true;
        }
    }
}
/// Every segment in `dir` (a claim in progress too), sorted.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "journal"))
        .collect();
    found.sort();
    found
}

/// Every repair journaled in `dir`, in segments held by a living client or
/// not, without taking any (what `memgroup repair --list` prints).
pub fn list_repair_journal(dir: &Path) -> Vec<JournalEntry> {
    let mut out = Vec::new();
    for path in segments(dir) {
        let Ok(file) = File::open(&path) else {
            continue;
        };
        let held = file.try_lock_shared().is_err();
        for repair in pending(io::BufReader::new(&file)) {
            out.push(JournalEntry {
                segment: path.clone(),
                held,
                repair,
            });
        }
    }
    out
}

/// Drops from the journal in `dir` every repair owed to `server`
/// (`host:port`), in the segments no living client holds: for a server gone
/// for good, whose address another memcached may take later. Returns how
/// many were dropped.
pub fn forget_repairs(dir: &Path, server: &str) -> io::Result<usize> {
    let mut dropped = 0;
    for path in segments(dir) {
        let Ok(file) = OpenOptions::new().read(true).write(true).open(&path) else {
            continue;
        };
        if file.try_lock().is_err() {
            continue;
        }
        let owed = pending(io::BufReader::new(&file));
        let kept: Vec<OwedRepair> = owed
            .iter()
            .filter(|r| r.server != server)
            .cloned()
            .collect();
        if kept.len() == owed.len() {
            continue;
        }
        dropped += owed.len() - kept.len();
        if !kept.is_empty() {
            write_segment(dir, &kept)?;
        }
        std::fs::remove_file(&path)?;
    }
    Ok(dropped)
}

/// The entries added and not done, in the order first added.
fn pending(reader: impl BufRead) -> Vec<OwedRepair> {
    // In the order first added; an index by (server, key), so a journal of
    // many entries folds in one pass.
    let mut entries: Vec<Option<OwedRepair>> = Vec::new();
    let mut at: std::collections::HashMap<(Vec<u8>, Vec<u8>), usize> =
        std::collections::HashMap::new();
    for line in reader.split(b'\n') {
        let Ok(line) = line else { break };
        let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        match fields.as_slice() {
            // A key the protocol cannot carry (a foreign or damaged line)
            // is skipped: the drain sends what it adopts as it is.
            [b"A", landing @ (b"0" | b"1"), server, key, group]
                if memgroup_proto::Key::new_raw(key).is_ok() =>
            {
                let (Ok(server), Some(group)) = (std::str::from_utf8(server), decode(group)) else {
                    continue;
                };
                let may_land = *landing == b"1";
                let id = (server.as_bytes().to_vec(), key.to_vec());
                match at.get(&id).and_then(|&i| entries[i].as_mut()) {
                    Some(entry) => entry.may_land |= may_land,
                    None => {
                        at.insert(id, entries.len());
                        entries.push(Some(OwedRepair {
                            server: server.to_string(),
                            group,
                            key: key.to_vec(),
                            may_land,
                        }));
                    }
                }
            }
            [b"D", server, key] => {
                if let Some(i) = at.remove(&(server.to_vec(), key.to_vec())) {
                    entries[i] = None;
                }
            }
            // A torn or foreign line.
            _ => {}
        }
    }
    entries.into_iter().flatten().collect()
}

/// A new segment holding `records` (locked, synced): a compaction's or a
/// forgetting's rewrite.
fn write_segment(dir: &Path, records: &[OwedRepair]) -> io::Result<(PathBuf, File)> {
    let (path, mut file) = new_segment(dir)?;
    let mut text = Vec::new();
    for record in records {
        record.encode(&mut text);
    }
    file.write_all(&text)?;
    file.sync_data()?;
    Ok((path, file))
}

fn decode(b64: &[u8]) -> Option<String> {
    let bytes = memgroup_proto::base64_decode(b64)?;
    String::from_utf8(bytes).ok()
}

fn make_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// A new segment in `dir`, locked before it gets its visible name (so no
/// other client takes it for a dead one's).
fn new_segment(dir: &Path) -> io::Result<(PathBuf, File)> {
    let n = SEGMENTS.fetch_add(1, Ordering::Relaxed);
    let name = format!("{}-{n}", std::process::id());
    let hidden = dir.join(format!(".{name}.new"));
    let mut options = OpenOptions::new();
    options.create(true).truncate(true).write(true).read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(&hidden)?;
    file.try_lock().map_err(io::Error::other)?;
    let path = dir.join(format!("{name}.journal"));
    std::fs::rename(&hidden, &path)?;
    // Appends go at the end whatever the position (`O_APPEND` semantics by
    // hand: nothing else writes this file).
    Ok((path, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(server: &str, key: &str, may_land: bool) -> OwedRepair {
        OwedRepair {
            server: server.into(),
            group: "z 1".into(),
            key: key.into(),
            may_land,
        }
    }

    fn dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("memgroup-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_living_segment_is_not_claimed_and_a_dead_ones_pending_entries_are() {
        let dir = dir("claim");
        let first = Journal::open(&dir).unwrap();
        first.added(&record("h:1", "a", false));
        first.added(&record("h:1", "b", true));
        first.added(&record("h:2", "a", false));
        first.done("h:1", "a".as_bytes());
        first.added(&record("h:1", "b", false));
        let second = Journal::open(&dir).unwrap();
        assert!(second.claim().is_empty(), "its owner lives");
        // The owner gone without compacting (a crash): its lock is released.
        let segment = first.segment().unwrap();
        drop(first);
        let claimed = second.claim();
        assert_eq!(
            claimed,
            [record("h:1", "b", true), record("h:2", "a", false)]
        );
        assert!(!segment.exists());
        assert!(second.claim().is_empty(), "claimed once");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_gone_servers_repairs_are_forgotten_from_unheld_segments_only() {
        let dir = dir("forget");
        let dead = Journal::open(&dir).unwrap();
        dead.added(&record("h:1", "a", false));
        dead.added(&record("h:2", "b", false));
        drop(dead);
        let living = Journal::open(&dir).unwrap();
        living.added(&record("h:1", "c", false));
        assert_eq!(
            forget_repairs(&dir, "h:1").unwrap(),
            1,
            "the held one stays"
        );
        let left: Vec<OwedRepair> = list_repair_journal(&dir)
            .into_iter()
            .map(|e| e.repair)
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(left.contains(&record("h:2", "b", false)));
        assert!(left.contains(&record("h:1", "c", false)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_compaction_keeps_only_what_is_pending() {
        let dir = dir("compact");
        let journal = Journal::open(&dir).unwrap();
        journal.added(&record("h:1", "k", false));
        journal.own.lock().append(&dir, b"A 1 h:1 torn");
        let listed = list_repair_journal(&dir);
        assert_eq!(listed.len(), 1);
        assert!(listed[0].held, "held by its living owner");
        journal.compact(&[record("h:9", "x", true)]).unwrap();
        let listed: Vec<OwedRepair> = list_repair_journal(&dir)
            .into_iter()
            .map(|e| e.repair)
            .collect();
        assert_eq!(listed, [record("h:9", "x", true)]);
        journal.compact(&[]).unwrap();
        assert!(list_repair_journal(&dir).is_empty());
        assert_eq!(segments(&dir), Vec::<PathBuf>::new());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
