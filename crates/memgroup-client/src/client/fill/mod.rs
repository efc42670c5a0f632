//! Reads that protect the backend: [`Client::get_or_fill`] runs a missing
//! (or stale) value's fill at most once per lease across every caller of
//! the cluster, with memcached's meta-protocol leases.
//!
//! - **Within the process**, concurrent callers for one key share one
//!   flight ([`flight`]): one caller reads and, if need be, fills; the
//!   others get its answer. A burst of a thousand callers sends the
//!   requests of one.
//! - **Across processes and zones**, leases are per server, so per group:
//!   the key is read in the local group first (`mg … v f t c`); on a miss, a
//!   stale value or a lease stub, the lease is asked of the arbiter's server
//!   (`mg … N<lease>`), the one every memgroup client of the cluster agrees
//!   on. The caller it grants (`W`) fills and writes the value to every
//!   group (a plain `set`, which replaces the stub); the others (`Z`) are
//!   served the stale value when there is one, or poll the arbiter with a
//!   backoff (5 ms doubling to 50 ms) until the value is there, for at most
//!   [`Fill::wait`].
//! - **The filled value** is written at the arbiter only over the lease
//!   (`ms … C<cas>`), so a write, delete or invalidation that came after
//!   the lease was granted is never overwritten with older data; then into
//!   the other groups.
//! - **A fill that fails** (or a caller dropped while it holds the lease)
//!   releases it: the stub is deleted, or a stale value invalidated again
//!   (which lets the next caller win), each only if unchanged since
//!   (`md … C<cas>`).
//! - **Stale-while-revalidate**: after [`Client::invalidate`] a value is
//!   stale (`X`) for a while: readers get it while the arbiter's winner
//!   refills. With [`Fill::refresh_before`], a value whose remaining TTL
//!   fell below it is refreshed early by one caller (`R`), the others served
//!   the current value meanwhile.
//!
//! What other clients of a mixed fleet see: a lease stub is an ordinary
//! empty item (flags 0) to a classic `get` — Java or Python clients read an
//! empty value while a fill runs — and a stale value is an ordinary hit.
//! memgroup's own [`Client::get`] and [`Client::get_multi`] read a stub as
//! a miss (a hit of zero bytes is checked with `mg`), and
//! [`Client::get_with_freshness`] also tells a stale value apart.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use memgroup_proto::{Key, MetaFlag, MetaResponse, MetaStatus, Request};

use crate::client::Client;
use crate::error::{Error, ErrorKind};
use crate::item::Item;
use crate::longkey::LongKey;
use crate::options::IfPresent;

pub(crate) mod flight;
mod lease;
mod terms;

pub use terms::{Fill, Filled, Freshness};

use flight::Role;
use lease::Held;

/// What one meta reply says about the key.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// A value to serve as it is.
    Fresh,
    /// A value due for refresh (`R`), which this caller won.
    RefreshWon,
    /// A stale value; `won`: this caller may refill it.
    Stale { won: bool },
    /// A lease stub (a fill in progress, or won by this caller).
    Stub { won: bool },
}

pub(super) fn found(m: &MetaResponse) -> Found {
    if m.is_stub() {
        // Stale or not: an empty item with a win is a fill in progress.
        Found::Stub { won: m.won() }
    } else if m.is_stale() {
        Found::Stale { won: m.won() }
    } else if m.won() {
        Found::RefreshWon
    } else {
        Found::Fresh
    }
}

fn served(m: &MetaResponse, freshness: Freshness) -> Filled {
    Filled {
        item: Item::from_meta(m),
        freshness,
    }
}

/// Whole seconds of `d`, at least 1, as a meta flag's token.
fn secs(d: Duration) -> u32 {
    u32::try_from(d.as_secs().max(1)).unwrap_or(u32::MAX)
}

/// A key's names for a fill: its identity in the client's books (its
/// flight, the near cache), and its key and envelope in the local group
/// and at the arbiter.
struct Keys<'a> {
    identity: &'a [u8],
    local: Option<(&'a [u8], Option<&'a LongKey>)>,
    arbiter: (&'a [u8], Option<&'a LongKey>),
}

impl Client {
    /// Reads `key`, or fills it: the cached value when there is one;
    /// otherwise `fill` runs — at most once per lease across every caller of
    /// every process of the cluster, in every zone — and its value is
    /// written to every group and returned. Callers that did not get the
    /// lease are served a stale value when there is one, or wait for the
    /// filler's value.
    ///
    /// How: concurrent callers in this process share one flight. The key is
    /// read in the local group (`mg … v f t c`); on a miss, a stale value
    /// or a lease stub the lease is asked of the arbiter's server (`mg …
    /// N<lease>`), the one every memgroup client of the cluster agrees on.
    /// The caller it grants (`W`) fills and writes every group; the others
    /// (`Z`) get the stale value, or poll (5 ms doubling to 50 ms) for at
    /// most [`Fill::wait`]. A failed fill gives the lease back, and so does
    /// a caller whose future is dropped while it holds the lease. The value
    /// is written at the arbiter only over the lease (`ms … C<cas>`): a
    /// write, delete or invalidation of the key since the lease was granted
    /// wins, and the filled value is returned without being cached. Callers
    /// sharing a flight share its answer, a failed fill's error included.
    /// Java or
    /// Python clients of a mixed fleet read a lease stub as an empty value
    /// while a fill runs; memgroup's [`Client::get`] reads it as a miss.
    ///
    /// `Err` with [`ErrorKind::Fill`] when this caller's fill failed (its
    /// error is the source), [`ErrorKind::Timeout`] when another caller's
    /// fill did not land within [`Fill::wait`], and the usual errors when
    /// the arbiter's server cannot be reached (the lease lives there, as
    /// conditional writes do). A long key stored under a digest (long keys,
    /// EVCache's hashed keys) is leased under its digest, its value read and
    /// written in its envelope; where the arbiter holds another key's value
    /// under that digest (a collision), the fill's value is returned
    /// uncached.
    ///
    /// ```no_run
    /// # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// let user = client
    ///     .get_or_fill("user:42", 300, || async {
    ///         // The backend is asked once, however many callers miss at once.
    ///         Ok::<_, std::io::Error>(b"{\"name\":\"Ada\"}".to_vec())
    ///     })
    ///     .await?;
    /// println!("{} bytes ({:?})", user.item.value.len(), user.freshness);
    /// # Ok(()) }
    /// ```
    pub async fn get_or_fill<F, Fut, V, E>(
        &self,
        key: impl AsRef<[u8]>,
        fill: impl Into<Fill>,
        f: F,
    ) -> Result<Filled, Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
        V: Into<Bytes>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let key = key.as_ref();
        let fill = fill.into();
        // The key's identity (its flight here, the near cache), and its key
        // and envelope in the local group and at the arbiter (the same but
        // where a group's own key scheme stores it otherwise).
        let (identity, local, arbiter) = {
            let snap = self.snapshot();
            let wire = self.wire_key(&snap, key)?;
            let at = |g| (wire.bytes_of(g).to_vec(), wire.long_of(g).cloned());
            let local = snap.topology.local_groups().first().map(|&g| at(g));
            (wire.bytes.to_vec(), local, at(snap.topology.arbiter()))
        };
        let local = local
            .as_ref()
            .map(|(wire, long)| (&wire[..], long.as_ref()));
        let arbiter = (&arbiter.0[..], arbiter.1.as_ref());
        loop {
            match self.inner.flights.join(&identity) {
                Role::Follower(flight) => {
                    if let Some(answer) = flight::follow(flight).await {
                        return answer.map(|mut shared| {
                            if shared.freshness == Freshness::Filled {
                                shared.freshness = Freshness::Waited;
                            }
                            shared
                        });
                    }
                    // The leader was cancelled: start over.
                }
                Role::Leader(leader) => {
                    let keys = Keys {
                        identity: &identity,
                        local,
                        arbiter,
                    };
                    let answer = self.fly(key, &keys, &fill, f).await;
                    leader.land(&answer);
                    return answer;
                }
            }
        }
    }

    /// The leader's work: the local read, then the lease at the arbiter.
    /// A key stored in an envelope there ([`crate::longkey`]) has its
    /// replies unwrapped, the filled value wrapped.
    async fn fly<F, Fut, V, E>(
        &self,
        key: &[u8],
        keys: &Keys<'_>,
        fill: &Fill,
        f: F,
    ) -> Result<Filled, Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
        V: Into<Bytes>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut flags = vec![
            MetaFlag::ReturnValue,
            MetaFlag::ReturnFlags,
            MetaFlag::ReturnTtl,
            MetaFlag::ReturnCas,
        ];
        if let Some(before) = fill.refresh_before {
            flags.push(MetaFlag::Recache(secs(before)));
        }
        // The local group's copy, unless the local group is the arbiter's
        // (then the lease request reads it): any `mg` of a stale value hands
        // out that server's win, so the local read goes to no other group.
        // A failed local read is no answer: the arbiter decides then.
        let mut in_hand = None;
        // Another key's envelope (a digest collision) or none: no answer.
        let local = match keys.local {
            Some(local) => self.read_local(local, &flags).await,
            None => Ok(None),
        };
        if let Ok(Some(local)) = local {
            match local.state {
                Found::Fresh => return Ok(served(&local.served, Freshness::Cached)),
                Found::Stale { .. } | Found::RefreshWon => in_hand = Some(local.served),
                Found::Stub { .. } => {}
            }
        }
        flags.push(MetaFlag::Vivify(secs(fill.lease)));
        let (wire, long) = keys.arbiter;
        let request = Request::MetaGet {
            key: Key::new_raw(wire).expect("validated"),
            flags: &flags,
        };
        let started = crate::clock::now();
        let (mut backoff, mut waited) = (Duration::from_millis(5), false);
        loop {
            let Some(judged) = self.lease_at_arbiter((wire, long), &request).await? else {
                // The arbiter holds another key's value under this digest:
                // no lease to take, nothing to serve; the fill's value is
                // returned uncached.
                return self.fill_uncached(f).await;
            };
            let lease = judged.served;
            match judged.state {
                Found::Fresh if waited => return Ok(served(&lease, Freshness::Waited)),
                Found::Fresh => return Ok(served(&lease, Freshness::Cached)),
                Found::Stub { won: true } | Found::Stale { won: true } | Found::RefreshWon => {
                    let held = Held {
                        client: self.clone(),
                        wire: wire.to_vec(),
                        // Given back as stored, if the fill fails.
                        lease: judged.stored,
                        armed: true,
                    };
                    return self
                        .run_fill((key, long), keys.identity, fill, f, held)
                        .await;
                }
                Found::Stale { won: false } if fill.stale_ok => {
                    return Ok(served(&lease, Freshness::Stale));
                }
                Found::Stale { won: false } | Found::Stub { won: false } => {
                    if let Some(held) = in_hand.as_ref().filter(|_| fill.stale_ok) {
                        return Ok(served(held, Freshness::Stale));
                    }
                    if crate::clock::now().saturating_duration_since(started) + backoff > fill.wait
                    {
                        return Err(Error::new(
                            ErrorKind::Timeout,
                            format!(
                                "another caller's fill of this key did not land within {:?}",
                                fill.wait
                            ),
                        ));
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(50));
                    waited = true;
                }
            }
        }
    }

    /// This caller holds the lease: fills, then writes the value at the
    /// arbiter only if the lease is still the arbiter's copy (`ms …
    /// C<lease's cas>`: a write, delete or invalidation since then wins, and
    /// the value is returned without being cached), and then into the other
    /// groups; or gives the lease back when the fill fails. `long`: the
    /// key's envelope, for a long key.
    async fn run_fill<F, Fut, V, E>(
        &self,
        (key, long): (&[u8], Option<&LongKey>),
        identity: &[u8],
        fill: &Fill,
        f: F,
        mut held: Held,
    ) -> Result<Filled, Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
        V: Into<Bytes>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let filled = f().await;
        held.armed = false;
        let (wire, lease) = (&held.wire, &held.lease);
        let value: Bytes = match filled {
            Ok(value) => value.into(),
            Err(e) => {
                self.release(wire, lease).await;
                return Err(
                    Error::new(ErrorKind::Fill, "the fill failed; its lease is released")
                        .with_boxed_source(e.into()),
                );
            }
        };
        // What the arbiter stores: the value, or a long key's envelope (its
        // size is what the limit checks).
        let checked = self.check_value(&value).and_then(|()| {
            let exptime = fill.ttl.exptime()?;
            match long {
                Some(long) => {
                    let (envelope, outer) = self.enveloped(long, &value, 0, exptime)?;
                    Ok((Bytes::from(envelope), outer, exptime))
                }
                None => Ok((value.clone(), 0, exptime)),
            }
        });
        let (data, outer, exptime) = match checked {
            Ok(stored) => stored,
            Err(e) => {
                self.release(wire, lease).await;
                return Err(e);
            }
        };
        let stored = self
            .store_filled((wire, identity), (&data, outer), exptime, lease)
            .await;
        if let Err(_refused) = &stored {
            // Refused (too large for the server) or unanswered: the stub
            // goes, unless the value did land (its CAS then differs).
            self.release(wire, lease).await;
        }
        if stored.unwrap_or(false) {
            let snap = self.snapshot();
            let arbiter = snap.topology.arbiter();
            let others: Vec<&str> = snap
                .topology
                .groups()
                .iter()
                .filter(|g| g.id() != arbiter)
                .map(memgroup_topology::Group::name)
                .collect();
            if !others.is_empty() {
                // Best effort: a group that misses it queues its repair.
                let _ = self
                    .add_or_set(key, &value, fill.ttl, &others, IfPresent::Overwrite)
                    .await;
            }
        }
        Ok(Filled {
            item: Item {
                value,
                flags: 0,
                cas: None,
            },
            freshness: Freshness::Filled,
        })
    }

    /// Writes a filled value (`data` with its item flags: a long key's in
    /// its envelope) at the arbiter over its lease: whether it was stored
    /// (the lease still the arbiter's copy), or the server's error.
    async fn store_filled(
        &self,
        (wire, identity): (&[u8], &[u8]),
        (data, outer): (&[u8], u32),
        exptime: u32,
        lease: &MetaResponse,
    ) -> Result<bool, Error> {
        let Some(cas) = lease.flag_u64(b'c') else {
            return Ok(false);
        };
        let flags = [
            MetaFlag::CompareCas(cas),
            MetaFlag::Ttl(exptime),
            MetaFlag::SetFlags(outer),
        ];
        let request = Request::MetaSet {
            key: Key::new_raw(wire).expect("validated"),
            data,
            flags: &flags,
        };
        let stored = self.at_arbiter(wire, &request).await?.status == MetaStatus::Hd;
        if stored && let Some(near) = &self.inner.near {
            near.forget(identity);
        }
        Ok(stored)
    }

    /// The fill's value, not cached: where no lease can be taken.
    async fn fill_uncached<F, Fut, V, E>(&self, f: F) -> Result<Filled, Error>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
        V: Into<Bytes>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        match f().await {
            Ok(value) => Ok(Filled {
                item: Item {
                    value: value.into(),
                    flags: 0,
                    cas: None,
                },
                freshness: Freshness::Filled,
            }),
            Err(e) => {
                Err(Error::new(ErrorKind::Fill, "the fill failed").with_boxed_source(e.into()))
            }
        }
    }
}
