//! Keys as they go on the wire: the caller's key through the key transform
//! (prefix, sanitising) and, for a long key, its digest; validated once.
//! Also the size checks of what is stored under them.

use std::borrow::Cow;

use memgroup_proto::{Key, KeyError};
use memgroup_topology::{GroupId, GroupKeys, Keys};

use super::Client;
use crate::error::{Error, ErrorKind};
use crate::item::Item;
use crate::longkey::LongKey;
use crate::pool::Snapshot;

/// An item read under the long key `long`, its value and client flags
/// those inside the envelope ([`LongKey::unwrap`]); `None` when the
/// envelope is another key's or none.
pub(crate) fn unwrap_item(long: &LongKey, mut item: Item) -> Option<Item> {
    (item.value, item.flags) = long.unwrap(&item.value, Some(item.flags))?;
    Some(item)
}

/// A key as it goes on the wire: transformed (sanitized) and validated.
pub(crate) struct WireKey<'k> {
    /// The key in the groups that follow the cluster's key scheme; also
    /// the key's identity in the client's own books (write numbers, the
    /// near cache).
    pub(crate) bytes: Cow<'k, [u8]>,
    /// For a long key stored under a digest: the key its envelope holds.
    pub(crate) long: Option<LongKey>,
    /// The key as validated, when it is the caller's own bytes (the usual
    /// case: no transform, not long), so it is not checked again.
    checked: Option<Key<'k>>,
    /// The groups whose own key scheme stores this key otherwise: each
    /// one's key and envelope. Empty (nothing allocated) when every group
    /// stores it alike.
    others: Others,
}

/// The groups whose own key scheme stores a key otherwise: each one's key
/// and envelope; nothing (not even an empty list) when there are none, the
/// usual case, so a key costs nothing more.
struct Others(Option<Box<[GroupKey]>>);

/// A group's own key and envelope.
type GroupKey = (GroupId, Vec<u8>, Option<LongKey>);

impl Others {
    /// The groups of `own` that store the key otherwise than `cluster` (its
    /// key and envelope there).
    fn besides(mut own: Vec<GroupKey>, cluster: (&[u8], Option<&LongKey>)) -> Others {
        let envelope = |long: Option<&LongKey>| long.map(|l| l.envelope);
        own.retain(|(_, bytes, long)| {
            bytes[..] != *cluster.0 || envelope(long.as_ref()) != envelope(cluster.1)
        });
        Others((!own.is_empty()).then(|| own.into_boxed_slice()))
    }

    fn iter(&self) -> std::slice::Iter<'_, GroupKey> {
        self.0.as_deref().unwrap_or_default().iter()
    }
}

impl WireKey<'_> {
    /// The key in the groups that follow the cluster's scheme.
    #[inline]
    pub(crate) fn key(&self) -> Key<'_> {
        match self.checked {
            Some(key) => key,
            None => Key::new_raw(&self.bytes).expect("validated when made"),
        }
    }

    fn other(&self, group: GroupId) -> Option<&GroupKey> {
        self.others.iter().find(|(g, _, _)| *g == group)
    }

    /// The key in `group`.
    pub(crate) fn key_of(&self, group: GroupId) -> Key<'_> {
        match self.other(group) {
            Some((_, bytes, _)) => Key::new_raw(bytes).expect("validated when made"),
            None => self.key(),
        }
    }

    /// The key's bytes in `group`.
    pub(crate) fn bytes_of(&self, group: GroupId) -> &[u8] {
        self.other(group).map_or(&self.bytes, |(_, bytes, _)| bytes)
    }

    /// The envelope the key's value is in, in `group`.
    pub(crate) fn long_of(&self, group: GroupId) -> Option<&LongKey> {
        match self.other(group) {
            Some((_, _, long)) => long.as_ref(),
            None => self.long.as_ref(),
        }
    }

    /// The groups that store the key otherwise than the cluster's scheme:
    /// each one's key and envelope.
    pub(crate) fn others(&self) -> impl Iterator<Item = (GroupId, &[u8], Option<&LongKey>)> {
        self.others
            .iter()
            .map(|(group, bytes, long)| (*group, &bytes[..], long.as_ref()))
    }

    /// Whether some group stores the key's value in an envelope.
    pub(crate) fn enveloped(&self) -> bool {
        self.long.is_some() || self.others.iter().any(|(_, _, long)| long.is_some())
    }

    /// Whether `group` stores the key as the cluster's scheme does.
    pub(crate) fn follows_cluster(&self, group: GroupId) -> bool {
        self.other(group).is_none()
    }

    /// Whether every group stores the key alike.
    #[inline]
    pub(crate) fn uniform(&self) -> bool {
        self.others.0.is_none()
    }

    /// What target selection routes on.
    #[inline]
    pub(crate) fn keys(&self) -> Keys<'_> {
        if self.uniform() {
            Keys::Same(&self.bytes)
        } else {
            Keys::PerGroup(self)
        }
    }
}

impl GroupKeys for WireKey<'_> {
    fn key(&self, group: GroupId) -> &[u8] {
        self.bytes_of(group)
    }
}

impl Client {
    /// Applies the key transform (the key prefix, sanitising) and validates
    /// the result: invalid keys are refused here, before any byte is
    /// written. A long key, when long keys are on, becomes its digest key
    /// ([`crate::longkey`]); in a group with a key scheme of its own, what
    /// that scheme makes of it.
    pub(crate) fn wire_key<'k>(
        &self,
        snap: &Snapshot,
        key: &'k [u8],
    ) -> Result<WireKey<'k>, Error> {
        let prefix = snap.topology.key_prefix();
        // A byte's place counted in the key as given, not in the prefix.
        let refused = |e| {
            let e = match e {
                KeyError::InvalidByte { byte, position } => KeyError::InvalidByte {
                    byte,
                    position: position.saturating_sub(prefix.len()),
                },
                other => other,
            };
            Error::invalid_key(key, prefix, e)
        };
        // Behind a prefix, an empty key would be the prefix alone.
        if key.is_empty() {
            return Err(refused(KeyError::Empty));
        }
        let bytes = snap.topology.wire_key(GroupId(0), key);
        // This handle's rule: memgroup's strict keys, or the protocol's own.
        fn validate(raw: bool, bytes: &[u8]) -> Result<Key<'_>, KeyError> {
            if raw {
                Key::new_raw(bytes)
            } else {
                Key::new(bytes)
            }
        }
        let raw = self.raw_keys;
        let schemes = &self.inner.key_schemes;
        let valid = |b: &[u8]| validate(raw, b).map(drop).map_err(refused);
        let mut own = (!schemes.uniform()).then(|| self.group_keys(snap, &bytes));
        for (_, bytes, _) in own.iter().flatten() {
            valid(bytes)?;
        }
        let every_group = own.as_ref().map(Vec::len) == Some(snap.topology.groups().len());
        if let Some(mut own) = own.take_if(|_| every_group) {
            // Every group has its own scheme: the first one's key stands
            // for the cluster's (which no group uses, and may not be valid).
            let (_, first, long) = own.remove(0);
            let others = Others::besides(own, (&first, long.as_ref()));
            return Ok(WireKey {
                bytes: Cow::Owned(first),
                long,
                checked: None,
                others,
            });
        }
        let short = schemes.cluster.as_ref().and_then(|s| s.short_key(&bytes));
        let others = match own {
            None => Others(None),
            Some(own) => {
                let cluster = match &short {
                    Some((short, long)) => (&short[..], Some(long)),
                    None => (&bytes[..], None),
                };
                Others::besides(own, cluster)
            }
        };
        if let Some((short, long)) = short {
            validate(raw, &short).map_err(refused)?;
            return Ok(WireKey {
                bytes: Cow::Owned(short),
                long: Some(long),
                checked: None,
                others,
            });
        }
        let checked = match bytes {
            Cow::Borrowed(own) => Some(validate(raw, own).map_err(refused)?),
            Cow::Owned(ref owned) => {
                validate(raw, owned).map_err(refused)?;
                None
            }
        };
        Ok(WireKey {
            bytes,
            long: None,
            checked,
            others,
        })
    }

    /// The key `canonical` (prefixed, sanitized) in each group with a key
    /// scheme of its own.
    fn group_keys(&self, snap: &Snapshot, canonical: &[u8]) -> Vec<GroupKey> {
        let groups = snap.topology.groups();
        self.inner
            .key_schemes
            .groups
            .iter()
            .filter_map(|(name, scheme)| {
                let group = groups.iter().find(|g| g.name() == name)?.id();
                Some(match scheme.as_ref().and_then(|s| s.short_key(canonical)) {
                    Some((short, long)) => (group, short, Some(long)),
                    None => (group, canonical.to_vec(), None),
                })
            })
            .collect()
    }

    /// A long key's `value` (with its client `flags`, stored for `exptime`)
    /// in its envelope, and the flags to store it with; refused like
    /// [`Client::check_value`] when the envelope, what the server stores,
    /// is over the size limit.
    pub(crate) fn enveloped(
        &self,
        long: &LongKey,
        value: &[u8],
        flags: u32,
        exptime: u32,
    ) -> Result<(Vec<u8>, u32), Error> {
        let (envelope, outer) = long.wrap(value, flags, exptime)?;
        self.check_size(envelope.len(), || {
            format!(
                "value of {} bytes is {} in its long key's envelope, over",
                value.len(),
                envelope.len()
            )
        })?;
        Ok((envelope, outer))
    }

    /// Refuses a value over the size limit (`ValueTooLarge`).
    pub(crate) fn check_value(&self, value: &[u8]) -> Result<(), Error> {
        self.check_size(value.len(), || {
            format!("value of {} bytes exceeds", value.len())
        })
    }

    /// Refuses `len` stored bytes over the size limit: the error says
    /// `what` they are, then the limit.
    fn check_size(&self, len: usize, what: impl FnOnce() -> String) -> Result<(), Error> {
        let max = self.inner.max_value_size;
        if len <= max {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::ValueTooLarge,
            format!("{} the {max}-byte limit", what()),
        ))
    }
    /// The key a meta command sends: with [`MetaFlag::Base64Key`] among its
    /// flags the caller's key is raw bytes (any bytes: binary keys), sent and
    /// routed in its base64 form; without it, the key as given. A binary key
    /// is refused behind a [key prefix](crate::ClientBuilder::key_prefix):
    /// memcached decodes the whole key from base64, a prefix in front of the
    /// encoded form included.
    ///
    /// [`MetaFlag::Base64Key`]: memgroup_proto::MetaFlag::Base64Key
    pub(crate) fn meta_key<'k>(
        &self,
        key: &'k [u8],
        flags: &[memgroup_proto::MetaFlag],
    ) -> Result<Cow<'k, [u8]>, Error> {
        if !flags.contains(&memgroup_proto::MetaFlag::Base64Key) {
            return Ok(Cow::Borrowed(key));
        }
        if self.inner.key_schemes.any() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a binary key (b) cannot be shortened (long keys, EVCache's hashed keys): memcached would decode the digest as base64",
            ));
        }
        if !self.snapshot().topology.key_prefix().is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a binary key (b) cannot go behind the key prefix: memcached would decode the prefix as base64 too",
            ));
        }
        let mut encoded = Vec::with_capacity(key.len().div_ceil(3) * 4);
        memgroup_proto::base64_encode(key, &mut encoded);
        Ok(Cow::Owned(encoded))
    }
}
