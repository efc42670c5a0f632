//! A won lease's life after the fill: given back when the fill fails or
//! its caller is gone, and the reads and requests leases take.

use memgroup_proto::{Key, MetaFlag, MetaResponse, Request};
use memgroup_topology::Target;

use super::{Found, found};
use crate::client::Client;
use crate::client::trace::Attempt;
use crate::error::Error;
use crate::longkey::LongKey;
use crate::pool::Snapshot;

/// A won lease, given back if the caller's future is dropped before it
/// wrote the value or released the lease (a cancelled request, a panic in
/// the fill): otherwise every caller of the cluster would wait out the
/// lease.
pub(super) struct Held {
    pub(super) client: Client,
    pub(super) wire: Vec<u8>,
    pub(super) lease: MetaResponse,
    pub(super) armed: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (client, wire, lease) = (
                self.client.clone(),
                std::mem::take(&mut self.wire),
                self.lease.clone(),
            );
            runtime.spawn(async move { client.release(&wire, &lease).await });
        }
    }
}

/// A lease reply judged ([`Client::judged`]).
pub(super) struct Judged {
    /// The lease state, the stored item's.
    pub(super) state: Found,
    /// The reply to serve: a long key's value unwrapped.
    pub(super) served: MetaResponse,
    /// The reply as stored: what a win is given back by (judged again
    /// then, as stored).
    pub(super) stored: MetaResponse,
}

impl Client {
    /// Gives a won lease back, if the arbiter's copy is still the one the
    /// lease came with.
    pub(super) async fn release(&self, wire: &[u8], lease: &MetaResponse) {
        let snap = self.snapshot();
        if let Ok(target) = self.arbiter_target(&snap, wire, "leases live there") {
            self.give_back(&snap, target, wire, lease).await;
        }
    }

    /// Gives back a win (`W`) a meta get received from `target`, if the copy
    /// there is still the one it came with: a stub is deleted, a stale value
    /// invalidated again (which hands the win to the next caller); a won
    /// refresh is left to expire. Reads that do not fill (the near cache,
    /// read repair, the consistent read) call it too: any `mg` of a stale
    /// value is handed its server's win, and keeping it would leave nobody
    /// to refill.
    pub(crate) async fn give_back(
        &self,
        snap: &Snapshot,
        target: Target,
        wire: &[u8],
        m: &MetaResponse,
    ) {
        let (true, Some(cas)) = (m.won(), m.flag_u64(b'c')) else {
            return;
        };
        let flags = match found(m) {
            Found::Stub { .. } => vec![MetaFlag::CompareCas(cas)],
            Found::Stale { .. } => {
                // `T0` keeps an item that had no expiry without one.
                let left = m.ttl().map_or(0, |t| t.max(0));
                vec![
                    MetaFlag::Invalidate,
                    MetaFlag::Ttl(u32::try_from(left).unwrap_or(u32::MAX)),
                    MetaFlag::CompareCas(cas),
                ]
            }
            Found::Fresh | Found::RefreshWon => return,
        };
        let request = Request::MetaDelete {
            key: Key::new_raw(wire).expect("validated"),
            flags: &flags,
        };
        let _ = self.exec(snap, target, &request, Attempt::Repair).await;
    }

    /// `mg` of the wire key `wire` in the first local group, unless there
    /// is none or it is the arbiter's; `None` on a miss or another key's
    /// value ([`Client::judged`]).
    pub(super) async fn read_local(
        &self,
        (wire, long): (&[u8], Option<&LongKey>),
        flags: &[MetaFlag],
    ) -> Result<Option<Judged>, Error> {
        let snap = self.snapshot();
        let topology = &snap.topology;
        let Some(&local) = topology.local_groups().first() else {
            return Ok(None);
        };
        if local == topology.arbiter() {
            return Ok(None);
        }
        let Some(target) = self.group_target(&snap, wire, local) else {
            return Ok(None);
        };
        let request = Request::MetaGet {
            key: Key::new_raw(wire).expect("validated"),
            flags,
        };
        Ok(
            match self
                .meta_at(&snap, target, &request, Attempt::First)
                .await?
            {
                Some(m) => self.judged(&snap, target, (wire, long), m).await,
                None => None,
            },
        )
    }

    /// The lease request `request` at the arbiter's server, its reply
    /// judged ([`Client::judged`]): `None` for another key's value.
    pub(super) async fn lease_at_arbiter(
        &self,
        (wire, long): (&[u8], Option<&LongKey>),
        request: &Request<'_>,
    ) -> Result<Option<Judged>, Error> {
        let (snap, target, m) = self.arbiter_meta(wire, request).await?;
        Ok(self.judged(&snap, target, (wire, long), m).await)
    }

    /// A reply read at `target`, judged as stored (a lease stub is empty, an
    /// envelope is not: the lease state is the stored item's) and served
    /// unwrapped for a key in an envelope (`long`); `None` when it holds
    /// another key's value (a digest collision), any win it was handed
    /// given back first, so that key's own callers can refill it.
    async fn judged(
        &self,
        snap: &Snapshot,
        target: Target,
        (wire, long): (&[u8], Option<&LongKey>),
        stored: MetaResponse,
    ) -> Option<Judged> {
        let state = found(&stored);
        let served = match long {
            None => stored.clone(),
            Some(long) => match long.unwrap_meta(stored.clone()) {
                Some(unwrapped) => unwrapped,
                None => {
                    self.give_back(snap, target, wire, &stored).await;
                    return None;
                }
            },
        };
        Some(Judged {
            state,
            served,
            stored,
        })
    }

    /// One meta request at the arbiter's server for the wire key `wire`.
    pub(super) async fn at_arbiter(
        &self,
        wire: &[u8],
        request: &Request<'_>,
    ) -> Result<MetaResponse, Error> {
        Ok(self.arbiter_meta(wire, request).await?.2)
    }

    /// [`Client::at_arbiter`], with the snapshot and the target it went to.
    async fn arbiter_meta(
        &self,
        wire: &[u8],
        request: &Request<'_>,
    ) -> Result<(std::sync::Arc<Snapshot>, Target, MetaResponse), Error> {
        let snap = self.snapshot();
        let target = self.arbiter_target(&snap, wire, "leases live there")?;
        let m = self
            .meta_at(&snap, target, request, Attempt::First)
            .await?
            .ok_or_else(|| crate::client::unexpected(None))?;
        Ok((snap, target, m))
    }
}
