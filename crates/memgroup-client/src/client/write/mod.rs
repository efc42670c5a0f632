//! Writes: replication to exactly one connection of every (or every targeted)
//! server group, concurrently, judged by the write policy.
//!
//! The topology picks one target per group; the pool size chooses which
//! connection, never how many requests. Each group's part keeps its
//! [`GroupId`] and its reply, so the policy is evaluated on ids and `incr`
//! reads its number from the reply itself.

mod arbiter;
mod batch;
mod converge;
mod missed;
mod op;
mod policy;
mod replicate;
mod rest;

pub use batch::MultiWrite;

use op::WriteOp;

use memgroup_proto::{MetaFlag, Response, StoreCommand};

use crate::client::Client;
use crate::error::Error;
use crate::item::WriteOutcome;
use crate::options::{Expiry, IfPresent, WriteOptions};

impl Client {
    /// A write to every group, or for a conditional one through the arbiter.
    async fn write(&self, key: &[u8], op: WriteOp<'_>) -> Result<WriteOutcome, Error> {
        let written = if op.is_conditional() {
            self.conditional(key, op).await
        } else {
            self.replicate(key, None, op).await
        };
        let mut outcome = written.map(|(outcome, _)| outcome)?;
        if matches!(
            op,
            WriteOp::Delete { .. } | WriteOp::Touch { .. } | WriteOp::MetaDelete { .. }
        ) {
            outcome.absent_is_done();
        }
        Ok(outcome)
    }

    /// Migration's backfill: `add` into every group, each keeping a newer
    /// copy it holds (a fill, not a conditional write for the arbiter).
    pub(crate) async fn backfill(
        &self,
        key: &[u8],
        value: &[u8],
        options: WriteOptions,
    ) -> Result<WriteOutcome, Error> {
        let op = self.store_op(StoreCommand::Add, value, options)?;
        self.replicate(key, None, op)
            .await
            .map(|(outcome, _)| outcome)
    }

    pub(crate) async fn store(
        &self,
        command: StoreCommand,
        key: &[u8],
        value: &[u8],
        options: WriteOptions,
    ) -> Result<WriteOutcome, Error> {
        let op = self.store_op(command, value, options)?;
        self.write(key, op).await
    }

    /// A store of `value` with `options`, checked before anything is
    /// queued: the value's size, and the expiry's conversion to `exptime`.
    fn store_op<'a>(
        &self,
        command: StoreCommand,
        value: &'a [u8],
        options: WriteOptions,
    ) -> Result<WriteOp<'a>, Error> {
        self.check_value(value)?;
        Ok(WriteOp::Store {
            command,
            data: value,
            flags: options.flags,
            exptime: options.expiry.exptime()?,
        })
    }

    /// Stores a value in every server group (`set`). `options` is an
    /// [`Expiry`] (a number of seconds, a [`Duration`](std::time::Duration),
    /// a [`SystemTime`](std::time::SystemTime)) or [`WriteOptions`] with
    /// client flags too.
    ///
    /// With several groups, what it guarantees (by default,
    /// [`ClientBuilder::converge`](crate::ClientBuilder::converge) on): once
    /// the writers of a key stop, every group holds the arbiter's value of
    /// it or nothing, whichever memgroup clients wrote it and in whatever
    /// order their writes reached the groups (it goes as `ms … c`, and a
    /// background check deletes by CAS the copies that lost at the
    /// arbiter); a group that missed it is repaired once it answers, never
    /// over a later write of this client. Writers outside memgroup are not
    /// covered.
    ///
    /// ```no_run
    /// # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// use std::time::Duration;
    /// use memgroup_client::WriteOptions;
    ///
    /// client.set("user:42", "Ada", 300).await?;
    /// let options = WriteOptions::new().expiry(Duration::from_secs(40 * 86_400)).flags(1);
    /// let outcome = client.set("user:43", "Grace", options).await?;
    /// if outcome.is_partial() {
    ///     eprintln!("a group missed it: {:?}", outcome.failed().collect::<Vec<_>>());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn set(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: impl Into<WriteOptions>,
    ) -> Result<WriteOutcome, Error> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.store(StoreCommand::Set, key, value, options.into())
            .await
    }

    /// Stores only where the key is absent (`add`); see [`WriteOutcome::applied`].
    ///
    /// Like every conditional write (`replace`, `cas`, `append`, `prepend`,
    /// `incr`, `decr`), with several groups it is decided by one group every
    /// memgroup client agrees on, the arbiter ([`ClientBuilder::arbiter`](crate::ClientBuilder::arbiter);
    /// by default the first read-write group by name), and once it applied
    /// the write the other groups' copies are deleted: two clients racing
    /// `add` from two zones cannot both win, and no replica keeps an older
    /// value (a reader there falls back to the arbiter's copy). Refused by
    /// its condition, it changes no group. Sent to the arbiter and not
    /// answered, it fails with [`ErrorKind::OutcomeUnknown`](crate::ErrorKind::OutcomeUnknown)
    /// (it may have been applied; no second arbiter is asked).
    pub async fn add(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: impl Into<WriteOptions>,
    ) -> Result<WriteOutcome, Error> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.store(StoreCommand::Add, key, value, options.into())
            .await
    }

    /// Stores only where the key is present (`replace`).
    pub async fn replace(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: impl Into<WriteOptions>,
    ) -> Result<WriteOutcome, Error> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.store(StoreCommand::Replace, key, value, options.into())
            .await
    }

    /// Appends to the existing value (`append`); the item keeps its flags
    /// and expiry.
    pub async fn append(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<WriteOutcome, Error> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.store(StoreCommand::Append, key, value, WriteOptions::new())
            .await
    }

    /// Prepends to the existing value (`prepend`); the item keeps its flags
    /// and expiry.
    pub async fn prepend(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<WriteOutcome, Error> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.store(StoreCommand::Prepend, key, value, WriteOptions::new())
            .await
    }

    /// Stores only if the item still has the CAS unique `cas` from
    /// [`Client::gets`]. CAS uniques are per server: with several groups the
    /// arbiter decides (`gets` reads its copy), and the other groups' copies
    /// are deleted, so no group keeps an older value.
    pub async fn cas(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        cas: u64,
        options: impl Into<WriteOptions>,
    ) -> Result<WriteOutcome, Error> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.store(StoreCommand::Cas(cas), key, value, options.into())
            .await
    }

    /// Deletes a key from every group (applied when some group held it; one
    /// without a copy has nothing to delete). In migration mode also from the old
    /// placement (concurrently), so it cannot come back from there; a failure
    /// there fails the delete.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<WriteOutcome, Error> {
        let key = key.as_ref();
        match self.migration() {
            None => self.delete_here(key).await,
            Some(migration) => {
                let (new, old) =
                    tokio::join!(self.delete_here(key), migration.old.delete_here(key));
                old?;
                new
            }
        }
    }

    /// Deletes a key from this client's own groups only.
    pub(crate) async fn delete_here(&self, key: &[u8]) -> Result<WriteOutcome, Error> {
        self.write(key, WriteOp::Delete).await
    }

    /// Sets a new expiration time in every group that holds the key (applied
    /// when some group held it: a group without a copy has nothing to
    /// extend).
    pub async fn touch(
        &self,
        key: impl AsRef<[u8]>,
        expiry: impl Into<Expiry>,
    ) -> Result<WriteOutcome, Error> {
        let exptime = expiry.into().exptime()?;
        self.write(key.as_ref(), WriteOp::Touch { exptime }).await
    }

    /// Increments a counter: the arbiter group applies it and its value is
    /// returned (`None` when the arbiter has no such key); the other groups'
    /// copies are deleted, so no zone keeps a count that differs (see
    /// [`Client::add`] for how conditional writes replicate).
    pub async fn incr(&self, key: impl AsRef<[u8]>, delta: u64) -> Result<Option<u64>, Error> {
        self.arith(key.as_ref(), true, delta).await
    }

    /// Decrements a counter (stopping at 0), as [`Client::incr`] increments
    /// one: the arbiter's new value; the other groups' copies deleted.
    pub async fn decr(&self, key: impl AsRef<[u8]>, delta: u64) -> Result<Option<u64>, Error> {
        self.arith(key.as_ref(), false, delta).await
    }

    async fn arith(&self, key: &[u8], increment: bool, delta: u64) -> Result<Option<u64>, Error> {
        let (_, replies) = self
            .conditional(key, WriteOp::Arith { increment, delta })
            .await?;
        Ok(replies.into_iter().find_map(|r| match r {
            Some(Response::Number(n)) => Some(n),
            _ => None,
        }))
    }

    /// A meta set (`ms`) with the given flags, in every group.
    ///
    /// With [`MetaFlag::Base64Key`] the key may be any bytes (a binary key):
    /// memgroup sends it base64 encoded, as for every meta command, and
    /// memcached stores it under the decoded bytes. memgroup routes it by
    /// its base64 form, so read and write a binary key through the meta
    /// commands with the flag: a classic command of the same raw bytes may
    /// go to another server. (Key sanitizing, where on, applies to the
    /// base64 form too.)
    pub async fn meta_set(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        flags: &[MetaFlag],
    ) -> Result<WriteOutcome, Error> {
        let value = value.as_ref();
        self.check_value(value)?;
        crate::client::refuse_quiet(flags, "meta_set")?;
        let key = self.meta_key(key.as_ref(), flags)?;
        self.write(&key, WriteOp::MetaSet { data: value, flags })
            .await
    }

    /// A meta delete (`md`) with the given flags, in every group like
    /// [`Client::delete`] (with `C<cas>`, through the arbiter). With
    /// [`MetaFlag::Invalidate`] the value is marked stale rather than
    /// deleted: see [`Client::invalidate`].
    pub async fn meta_delete(
        &self,
        key: impl AsRef<[u8]>,
        flags: &[MetaFlag],
    ) -> Result<WriteOutcome, Error> {
        crate::client::refuse_quiet(flags, "meta_delete")?;
        let key = self.meta_key(key.as_ref(), flags)?;
        self.write(&key, WriteOp::MetaDelete { flags }).await
    }

    /// Marks a key's value stale in every group (`md <key> I T<secs>`)
    /// instead of deleting it: for `stale_for` more, readers of
    /// [`Client::get_or_fill`] are served the stale value while exactly one
    /// caller of the cluster refills it (the one the arbiter grants). A
    /// plain [`Client::get`] still returns the stale value as a hit.
    pub async fn invalidate(
        &self,
        key: impl AsRef<[u8]>,
        stale_for: impl Into<Expiry>,
    ) -> Result<WriteOutcome, Error> {
        let flags = [
            MetaFlag::Invalidate,
            MetaFlag::Ttl(stale_for.into().exptime()?),
        ];
        self.write(key.as_ref(), WriteOp::MetaDelete { flags: &flags })
            .await
    }

    /// A meta arithmetic command (`ma`) with the given flags (mode
    /// [`MetaFlag::ArithMode`], delta `D`, auto-create `N` with initial
    /// value `J`, return flags `v`, `t`, `c`), decided by the arbiter like
    /// [`Client::incr`]; the other groups' copies are deleted. `Ok(None)`
    /// when the counter is absent (`NF`); otherwise the arbiter's reply.
    pub async fn meta_arith(
        &self,
        key: impl AsRef<[u8]>,
        flags: &[MetaFlag],
    ) -> Result<Option<memgroup_proto::MetaResponse>, Error> {
        crate::client::refuse_quiet(flags, "meta_arith")?;
        let key = self.meta_key(key.as_ref(), flags)?;
        let (_, replies) = self.conditional(&key, WriteOp::MetaArith { flags }).await?;
        match replies.into_iter().flatten().next() {
            Some(Response::Meta(m)) if m.status == memgroup_proto::MetaStatus::Nf => Ok(None),
            Some(Response::Meta(m)) => Ok(Some(m)),
            other => Err(crate::client::unexpected(other.as_ref())),
        }
    }

    /// The cache warmer's write (EVCache `addOrSet`): writes the key into the
    /// named groups only — `add` with [`IfPresent::Keep`] (a copy already
    /// there stays), `set` with [`IfPresent::Overwrite`]. Exactly one write
    /// per key per target group, whatever the pool size.
    pub async fn add_or_set(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: impl Into<WriteOptions>,
        target_groups: &[&str],
        if_present: IfPresent,
    ) -> Result<WriteOutcome, Error> {
        let command = match if_present {
            IfPresent::Overwrite => StoreCommand::Set,
            IfPresent::Keep => StoreCommand::Add,
        };
        let op = self.store_op(command, value.as_ref(), options.into())?;
        let (outcome, _) = self
            .replicate(key.as_ref(), Some(target_groups), op)
            .await?;
        Ok(outcome)
    }
}
