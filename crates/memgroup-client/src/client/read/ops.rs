//! The reads' ops: the classic retrievals and the meta get, each its
//! request and how its reply turns into hits.

use memgroup_proto::{Key, MetaFlag, MetaResponse, MetaStatus, Request, Response};

use crate::client::unexpected;
use crate::conn::merge::circular;
use crate::error::Error;
use crate::item::Item;
use crate::longkey::LongKey;

use super::ReadOp;

/// The classic retrieval commands.
#[derive(Debug, Clone, Copy)]
pub(super) enum Retrieve {
    Get,
    Gets,
    Gat(u32),
}

impl ReadOp for Retrieve {
    type Hit = Item;
    const BATCHES: bool = true;

    fn hedges(&self) -> bool {
        matches!(self, Retrieve::Get)
    }

    fn is_hit(&self, reply: &Response, long: Option<&LongKey>) -> bool {
        matches!(reply, Response::Values(v) if v.iter().next().is_some_and(|v| {
            long.is_none_or(|long| long.unwrap(&v.data, Some(v.flags)).is_some())
        }))
    }

    fn unwrap_long(long: &LongKey, item: Item) -> Option<Item> {
        crate::client::wire::unwrap_item(long, item)
    }

    fn request<'a>(&'a self, keys: &'a [Key<'a>]) -> Request<'a> {
        match *self {
            Retrieve::Get => Request::Get { keys },
            Retrieve::Gets => Request::Gets { keys },
            Retrieve::Gat(exptime) => Request::Gat { exptime, keys },
        }
    }

    fn hits(
        &self,
        reply: Response,
        keys: &[Key<'_>],
        mut hit: impl FnMut(usize, Item),
    ) -> Result<(), Error> {
        let Response::Values(values) = reply else {
            return Err(unexpected(Some(&reply)));
        };
        // Values come in request order: scan on from the last match. A value
        // for a key not asked for is dropped.
        let mut from = 0;
        for v in values {
            if let Some(j) = circular(from, keys.len()).find(|&j| keys[j].as_bytes() == v.key) {
                from = j + 1;
                hit(j, Item::from(v));
            }
        }
        Ok(())
    }
}

/// A meta get (`mg`) with its flags; one key per request.
/// A meta get with these flags; `.1`: read repair may follow it (the
/// client's own reads of a value, not a caller's `meta_get`).
pub(super) struct MetaGet<'f>(pub(super) &'f [MetaFlag], pub(super) bool);

impl ReadOp for MetaGet<'_> {
    type Hit = MetaResponse;
    const BATCHES: bool = false;

    fn repairs(&self) -> bool {
        self.1
    }

    /// A meta get that only reads: no lease (`N`, `R`), no touch (`T`),
    /// nothing but flags that ask for the item's fields.
    fn hedges(&self) -> bool {
        self.0.iter().all(|flag| {
            matches!(
                flag,
                MetaFlag::Base64Key
                    | MetaFlag::ReturnCas
                    | MetaFlag::ReturnFlags
                    | MetaFlag::ReturnHit
                    | MetaFlag::ReturnKey
                    | MetaFlag::ReturnLastAccess
                    | MetaFlag::Opaque(_)
                    | MetaFlag::ReturnSize
                    | MetaFlag::ReturnTtl
                    | MetaFlag::NoLruBump
                    | MetaFlag::ReturnValue
            )
        })
    }

    fn resend(&self) -> crate::client::hedge::Resend {
        crate::client::hedge::Resend::Meta(self.0.into())
    }

    fn is_hit(&self, reply: &Response, long: Option<&LongKey>) -> bool {
        matches!(reply, Response::Meta(m) if m.status != MetaStatus::En
            && long.is_none_or(|long| long.unwrap_meta(m.clone()).is_some()))
    }

    /// Without the value (no `v` flag) the envelope cannot be checked: the
    /// reply is returned as it is.
    fn unwrap_long(long: &LongKey, meta: MetaResponse) -> Option<MetaResponse> {
        long.unwrap_meta(meta)
    }

    fn request<'a>(&'a self, keys: &'a [Key<'a>]) -> Request<'a> {
        Request::MetaGet {
            key: keys[0],
            flags: self.0,
        }
    }

    fn hits(
        &self,
        reply: Response,
        _keys: &[Key<'_>],
        mut hit: impl FnMut(usize, MetaResponse),
    ) -> Result<(), Error> {
        match reply {
            Response::Meta(m) if m.status == MetaStatus::En => Ok(()),
            Response::Meta(m) => {
                hit(0, m);
                Ok(())
            }
            other => Err(unexpected(Some(&other))),
        }
    }
}
