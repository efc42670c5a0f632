//! The load: many tasks of reads, multi-key reads, sets, deletes and
//! counter increments. Each value key has one writer task, so its last
//! acknowledged write is well defined; the counters are shared by every
//! task, so several increment one at once.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use memgroup::client::{Client, Error};
use memgroup::proto::StoreCommand;
use parking_lot::Mutex;

use crate::measure::{Latency, Rng};
use crate::{COUNTERS, KEYS_PER_TASK, TASKS};

/// Operations done and what came of them.
#[derive(Default)]
pub(crate) struct Counts {
    pub(crate) gets: AtomicU64,
    pub(crate) multi: AtomicU64,
    pub(crate) sets: AtomicU64,
    pub(crate) deletes: AtomicU64,
    pub(crate) incrs: AtomicU64,
    pub(crate) acked: AtomicU64,
    pub(crate) misdelivered: AtomicU64,
    pub(crate) errors: Mutex<HashMap<&'static str, u64>>,
    /// Acknowledged `incr`s per counter: when the call started and the
    /// value it returned, only those no later-started one returned more
    /// than (all a check needs, and bounded by the restarts).
    pub(crate) counted: [Mutex<Vec<(Instant, u64)>>; COUNTERS],
}

impl Counts {
    fn error(&self, kind: &'static str) {
        *self.errors.lock().entry(kind).or_default() += 1;
    }
}

/// Where a task's load goes: memgroup's client (straight to the cluster,
/// or to the proxy as to one memcached), or text-protocol connections to
/// the proxy. Each call's result: what the load needs of it, or the kind of
/// error.
pub(crate) enum Front {
    Client(Client),
    Text(crate::text::Conns),
}

type Kind = &'static str;

fn kind(e: &Error) -> Kind {
    e.kind().name()
}

impl Front {
    async fn get(&mut self, k: &str) -> Result<Option<Vec<u8>>, Kind> {
        match self {
            Front::Client(c) => c
                .get(k)
                .await
                .map(|i| i.map(|i| i.value.to_vec()))
                .map_err(|e| kind(&e)),
            Front::Text(t) => t.get(k).await,
        }
    }

    /// The hits, and the kind of the first key's error (keys no group
    /// answered, once a call).
    async fn get_multi(
        &mut self,
        ks: &[String],
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, Option<Kind>), Kind> {
        match self {
            Front::Client(c) => {
                let found = c.get_multi(ks).await.map_err(|e| kind(&e))?;
                let hits = found
                    .hits()
                    .map(|(k, i)| (k.to_vec(), i.value.to_vec()))
                    .collect();
                Ok((hits, found.errors().next().map(|(_, e)| kind(e))))
            }
            Front::Text(t) => Ok((t.get_multi(ks).await?, None)),
        }
    }

    /// Whether the set was acknowledged (its policy met).
    async fn set(&mut self, k: &str, v: &[u8]) -> Result<bool, Kind> {
        match self {
            Front::Client(c) => c
                .set(k, v, 0)
                .await
                .map(|o| o.applied())
                .map_err(|e| kind(&e)),
            Front::Text(t) => t.store(StoreCommand::Set, k, v).await,
        }
    }

    /// Whether the key is absent everywhere (applied or not found in every
    /// group).
    async fn delete(&mut self, k: &str) -> Result<bool, Kind> {
        match self {
            Front::Client(c) => c
                .delete(k)
                .await
                .map(|o| o.groups.iter().all(|g| g.result.is_ok()))
                .map_err(|e| kind(&e)),
            Front::Text(t) => t.delete(k).await,
        }
    }

    async fn incr(&mut self, k: &str) -> Result<Option<u64>, Kind> {
        match self {
            Front::Client(c) => c.incr(k, 1).await.map_err(|e| kind(&e)),
            Front::Text(t) => t.incr(k).await,
        }
    }

    async fn add(&mut self, k: &str, v: &[u8]) -> Result<(), Kind> {
        match self {
            Front::Client(c) => c.add(k, v, 0).await.map(drop).map_err(|e| kind(&e)),
            Front::Text(t) => t.store(StoreCommand::Add, k, v).await.map(drop),
        }
    }
}

pub(crate) fn key(task: usize, i: u64) -> String {
    format!("soak:{task}:{i}")
}

pub(crate) fn counter_key(j: usize) -> String {
    format!("soak:counter:{j}")
}

pub(crate) fn value(key: &str, version: u64) -> Vec<u8> {
    let mut v = format!("{key}|{version}|").into_bytes();
    v.resize(v.len() + 64 + (version as usize % 200), b'x');
    v
}

/// The key and version a value carries.
pub(crate) fn parse(value: &[u8]) -> Option<(&str, u64)> {
    let text = std::str::from_utf8(value).ok()?;
    let mut parts = text.splitn(3, '|');
    let key = parts.next()?;
    let version = parts.next()?.parse().ok()?;
    Some((key, version))
}

/// The last acknowledged write of a key.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Acked {
    /// `maybe_deleted`: a later delete or set was not acknowledged, but a
    /// server may still have applied it (a timed-out request is not an
    /// unsent one: a stalled server processes it when it resumes). A set's
    /// repair then deletes the copies it missed, this one's included:
    /// newest or nothing, and the newest may be lost with its zone.
    Set {
        version: u64,
        at: Instant,
        maybe_deleted: bool,
    },
    Deleted {
        version: u64,
        at: Instant,
    },
}

impl Acked {
    pub(crate) fn version_at(&self) -> (u64, Instant) {
        match *self {
            Acked::Set { version, at, .. } | Acked::Deleted { version, at } => (version, at),
        }
    }
}

/// Where a task records how long each operation took.
pub(crate) struct Timing {
    pub(crate) faulting: Arc<AtomicBool>,
    pub(crate) calm: Arc<Latency>,
    pub(crate) stormy: Arc<Latency>,
}

/// Task `t`'s load until `stop`: returns its keys' last acknowledged writes.
pub(crate) async fn task(
    t: usize,
    mut client: Front,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    timing: Timing,
) -> HashMap<u64, Acked> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1));
    let mut versions = vec![0u64; KEYS_PER_TASK as usize];
    let mut acked: HashMap<u64, Acked> = HashMap::new();
    while !stop.load(Relaxed) {
        let started = Instant::now();
        let roll = rng.below(100);
        // Reads may ask any task's keys; writes only this task's.
        let other = rng.below(TASKS as u64) as usize;
        let i = rng.below(KEYS_PER_TASK);
        match roll {
            0..50 => {
                counts.gets.fetch_add(1, Relaxed);
                let k = key(other, i);
                match client.get(&k).await {
                    Ok(Some(value)) => {
                        if parse(&value).map(|(key, _)| key) != Some(k.as_str()) {
                            counts.misdelivered.fetch_add(1, Relaxed);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => counts.error(e),
                }
            }
            50..60 => {
                counts.multi.fetch_add(1, Relaxed);
                let keys: Vec<String> = (0..10)
                    .map(|j| key(other, (i + j * 37) % KEYS_PER_TASK))
                    .collect();
                match client.get_multi(&keys).await {
                    Ok((hits, error)) => {
                        for (k, value) in hits {
                            if parse(&value).map(|(key, _)| key.as_bytes()) != Some(&k[..]) {
                                counts.misdelivered.fetch_add(1, Relaxed);
                            }
                        }
                        // Keys no group answered count as errors, once each call.
                        if let Some(e) = error {
                            counts.error(e);
                        }
                    }
                    Err(e) => counts.error(e),
                }
            }
            60..88 => {
                counts.sets.fetch_add(1, Relaxed);
                let k = key(t, i);
                let slot = &mut versions[i as usize];
                *slot += 1;
                let version = *slot;
                match client.set(&k, &value(&k, version)).await {
                    Ok(true) => {
                        counts.acked.fetch_add(1, Relaxed);
                        acked.insert(
                            i,
                            Acked::Set {
                                version,
                                at: Instant::now(),
                                maybe_deleted: false,
                            },
                        );
                    }
                    failed => {
                        if let Err(e) = failed {
                            counts.error(e);
                        }
                        if let Some(Acked::Set { maybe_deleted, .. }) = acked.get_mut(&i) {
                            *maybe_deleted = true;
                        }
                    }
                }
            }
            88..92 => {
                counts.incrs.fetch_add(1, Relaxed);
                let j = rng.below(COUNTERS as u64) as usize;
                let k = counter_key(j);
                match client.incr(&k).await {
                    Ok(Some(n)) => {
                        let mut acks = counts.counted[j].lock();
                        if !acks.iter().any(|&(s, m)| s >= started && m >= n) {
                            acks.retain(|&(s, m)| !(s <= started && m <= n));
                            acks.push((started, n));
                        }
                    }
                    // Absent: create it (`add`: one creator wins).
                    Ok(None) => {
                        if let Err(e) = client.add(&k, b"0").await {
                            counts.error(e);
                        }
                    }
                    Err(e) => counts.error(e),
                }
            }
            _ => {
                counts.deletes.fetch_add(1, Relaxed);
                let k = key(t, i);
                let slot = &mut versions[i as usize];
                *slot += 1;
                let version = *slot;
                match client.delete(&k).await {
                    // Applied or not found: either way absent everywhere.
                    Ok(true) => {
                        counts.acked.fetch_add(1, Relaxed);
                        acked.insert(
                            i,
                            Acked::Deleted {
                                version,
                                at: Instant::now(),
                            },
                        );
                    }
                    failed => {
                        if let Err(e) = failed {
                            counts.error(e);
                        }
                        if let Some(Acked::Set { maybe_deleted, .. }) = acked.get_mut(&i) {
                            *maybe_deleted = true;
                        }
                    }
                }
            }
        }
        let took = started.elapsed();
        if timing.faulting.load(Relaxed) {
            &timing.stormy
        } else {
            &timing.calm
        }
        .record(took);
    }
    acked
}
