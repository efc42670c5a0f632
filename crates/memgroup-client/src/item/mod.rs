//! What operations hand back: items read, per-group write outcomes, server
//! statistics. Plain data, no behaviour beyond summaries.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use memgroup_topology::GroupId;

use crate::error::Error;

mod distinct;
mod multiget;

pub(crate) use distinct::Distinct;
pub use multiget::MultiGet;

/// A value read from memcached: the bytes and the 32-bit client flags stored
/// with them (and the CAS unique, for `gets`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Item {
    /// The value.
    pub value: Bytes,
    /// The client flags (see [`crate::value`] for the conventions of typed values).
    pub flags: u32,
    /// The CAS unique, when it was asked for ([`Client::gets`](crate::Client::gets)).
    pub cas: Option<u64>,
}

impl From<memgroup_proto::Value> for Item {
    fn from(v: memgroup_proto::Value) -> Item {
        Item {
            value: v.data,
            flags: v.flags,
            cas: v.cas,
        }
    }
}

impl Item {
    /// An item of `value` with client `flags` and no CAS unique: what a
    /// value format decodes ([`ValueFormat::decode`](crate::value::ValueFormat::decode)),
    /// for values that come from elsewhere (a test, another store).
    pub fn new(value: Bytes, flags: u32) -> Item {
        Item {
            value,
            flags,
            cas: None,
        }
    }

    /// The value as text, when it is UTF-8 (no copy). For values another
    /// client stored in its own format, decode them instead
    /// ([`Client::get_as`](crate::Client::get_as) and [`crate::value`]).
    ///
    /// ```
    /// # use memgroup_client::Item;
    /// let item = Item::new("héllo".into(), 0);
    /// assert_eq!(item.as_str(), Ok("héllo"));
    /// assert!(Item::new(vec![0xff].into(), 0).as_str().is_err());
    /// ```
    pub fn as_str(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(&self.value)
    }

    /// The item a meta reply carries: its value, client flags (`f`) and
    /// CAS unique (`c`), when returned.
    pub(crate) fn from_meta(m: &memgroup_proto::MetaResponse) -> Item {
        Item {
            value: m.value.clone().unwrap_or_default(),
            flags: u32::try_from(m.flag_u64(b'f').unwrap_or(0)).unwrap_or(0),
            cas: m.flag_u64(b'c'),
        }
    }
}

/// What happened in one server group during a replicated write.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GroupOutcome {
    /// The group, as numbered by the client's [`Topology`](memgroup_topology::Topology)
    /// at the time of the write.
    pub id: GroupId,
    /// The group's name (shared with the client's topology: no copy per
    /// write).
    pub group: Arc<str>,
    /// The server written to (`host:port`), when one was selected.
    pub server: Option<Arc<str>>,
    /// `Ok(true)` stored (or deleted/touched), `Ok(false)` the server refused
    /// by the command's condition (`NOT_STORED`, `NOT_FOUND`, `EXISTS`),
    /// `Err` the write did not happen.
    pub result: Result<bool, Error>,
    /// A conditional write's other group (`add`, `replace`, `cas`,
    /// `append`, `prepend`, `incr`, `decr`, and the meta set and arithmetic
    /// in those modes: the arbiter group decides them):
    /// it did not take the write but had its copy deleted, so it holds the
    /// arbiter's value or nothing. Its `result` is that delete's, with a copy
    /// already absent counted as `Ok(true)`.
    pub cleared: bool,
    /// The server's reply, when it answered (`STORED`, `NOT_STORED`,
    /// `EXISTS`, a meta reply with the return flags asked for, …): what a
    /// proxy relays. `None` for a write that failed, or whose replies were
    /// not kept (a batch).
    pub reply: Option<memgroup_proto::Response>,
}

/// What became of a write in one group ([`GroupOutcome::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupState {
    /// The server applied it (or, for a conditional write's other group,
    /// its copy was cleared).
    Applied,
    /// The server refused it by its condition (`NOT_STORED`, `NOT_FOUND`,
    /// `EXISTS`, or a meta `NS`/`NF`/`EX`): nothing changed there.
    Refused,
    /// Known not applied: it was never sent (the server marked dead, no
    /// connection) or the server answered with an error. A repair is
    /// queued where repairs are on.
    Missed,
    /// Sent and not answered (timed out, cut off): it may have been
    /// applied, or may still be (a stalled server applies what is in its
    /// socket when it resumes). A repair is queued where repairs are on.
    Unknown,
}

impl GroupOutcome {
    /// Whether the group applied the write itself (not only cleared its
    /// copy for a conditional write).
    fn took_it(&self) -> bool {
        !self.cleared && matches!(self.result, Ok(true))
    }

    /// What became of the write here: applied, refused by its condition,
    /// missed, or unknown (see [`GroupState`]).
    pub fn state(&self) -> GroupState {
        match &self.result {
            Ok(true) => GroupState::Applied,
            Ok(false) => GroupState::Refused,
            Err(e) if e.may_have_applied() => GroupState::Unknown,
            Err(_) => GroupState::Missed,
        }
    }
}

/// The groups of a write still in flight when its call returned, filled
/// in as they answer (shared with the task that finishes them).
#[derive(Default)]
pub(crate) struct Settling {
    /// Their outcomes so far, and how many are still to come.
    answers: parking_lot::Mutex<(Vec<GroupOutcome>, usize)>,
    done: tokio::sync::Notify,
}

impl std::fmt::Debug for Settling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let answers = self.answers.lock();
        f.debug_struct("Settling")
            .field("answered", &answers.0.len())
            .field("to_come", &answers.1)
            .finish()
    }
}

impl Settling {
    /// Waits for `pending` groups.
    pub(crate) fn new(pending: usize) -> Settling {
        Settling {
            answers: parking_lot::Mutex::new((Vec::with_capacity(pending), pending)),
            done: tokio::sync::Notify::new(),
        }
    }

    /// One pending group answered (or failed).
    pub(crate) fn answered(&self, group: GroupOutcome) {
        let mut answers = self.answers.lock();
        answers.0.push(group);
        answers.1 = answers.1.saturating_sub(1);
        if answers.1 == 0 {
            self.done.notify_waiters();
        }
    }

    /// The task finishing them ended (its runtime shut down) with groups
    /// still to come: nobody will fill them in.
    pub(crate) fn abandoned(&self) {
        let mut answers = self.answers.lock();
        answers.1 = 0;
        self.done.notify_waiters();
    }

    /// The answers once every pending group is in.
    async fn wait(&self) -> Vec<GroupOutcome> {
        loop {
            let done = self.done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            {
                let answers = self.answers.lock();
                if answers.1 == 0 {
                    return answers.0.clone();
                }
            }
            done.await;
        }
    }
}

/// The result of a write to several server groups: `Ok` from a write means
/// its write policy was met, not that every copy was written; ask
/// [`is_complete`](WriteOutcome::is_complete) for that.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct WriteOutcome {
    /// One entry per group that answered or failed (read-write and
    /// write-only), in the topology's order whatever order they answered
    /// in (a targeted write: the order its groups were named in; a
    /// conditional write: the arbiter first).
    pub groups: Vec<GroupOutcome>,
    /// Groups whose write was still in flight when the call returned (its
    /// policy already met, under [`WriteWait::Policy`](crate::WriteWait::Policy)):
    /// their outcome is not known here; [`WriteOutcome::settled`] waits
    /// for it.
    pub pending: Vec<Arc<str>>,
    /// Where the pending groups' outcomes arrive.
    settling: Option<Arc<Settling>>,
}

impl WriteOutcome {
    /// An outcome of these groups, none pending.
    pub fn new(groups: Vec<GroupOutcome>) -> WriteOutcome {
        WriteOutcome {
            groups,
            pending: Vec::new(),
            settling: None,
        }
    }

    /// This outcome, its pending groups' outcomes arriving in `settling`.
    pub(crate) fn settling_in(mut self, settling: Arc<Settling>) -> Self {
        self.settling = Some(settling);
        self
    }

    /// The settled outcome: this one with its pending groups' outcomes
    /// (each answered, failed or timed out: bounded by the client's
    /// timeout), in the order of [`WriteOutcome::groups`]. Immediate when
    /// nothing is pending.
    ///
    /// ```no_run
    /// # async fn demo(client: memgroup_client::Client) -> Result<(), memgroup_client::Error> {
    /// let outcome = client.set("k", "v", 0).await?.settled().await;
    /// assert!(outcome.pending.is_empty());
    /// if !outcome.is_complete() {
    ///     eprintln!("a group missed it: {:?}", outcome.failed().collect::<Vec<_>>());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn settled(mut self) -> WriteOutcome {
        let Some(settling) = self.settling.take() else {
            return self;
        };
        let mut late = settling.wait().await;
        // A group the finishing task never reported (its runtime shut
        // down) stays pending.
        self.pending
            .retain(|name| !late.iter().any(|g| &g.group == name));
        self.groups.append(&mut late);
        self.groups.sort_by_key(|g| g.id.0);
        self
    }

    /// For a delete or touch: when some group held the key, a group that
    /// had no copy (after a conditional write only the arbiter holds it)
    /// had nothing to do, so its `Ok(false)` counts as applied too.
    pub(crate) fn absent_is_done(&mut self) {
        if self.groups.iter().any(|g| matches!(g.result, Ok(true))) {
            for group in &mut self.groups {
                if matches!(group.result, Ok(false)) {
                    group.result = Ok(true);
                }
            }
        }
    }

    /// Whether every targeted group applied the write: none failed, none
    /// refused it by its condition, none still pending.
    pub fn is_complete(&self) -> bool {
        self.pending.is_empty()
            && !self.groups.is_empty()
            && self.groups.iter().all(|g| matches!(g.result, Ok(true)))
    }

    /// Whether the write reached some groups but not all of them: applied
    /// in some, missed or unknown in another (what the tool reports with
    /// exit code 3). A group still pending is neither: ask the
    /// [`settled`](WriteOutcome::settled) outcome.
    pub fn is_partial(&self) -> bool {
        let applied = self.groups.iter().any(GroupOutcome::took_it);
        let missed = self.groups.iter().any(|g| g.result.is_err());
        applied && missed
    }

    /// The names of the groups where the write ended in `state`
    /// ([`GroupOutcome::state`]): `in_state(GroupState::Unknown)` for those
    /// sent and not answered, `in_state(GroupState::Applied)` for those
    /// that took it.
    pub fn in_state(&self, state: GroupState) -> impl Iterator<Item = &str> {
        self.groups
            .iter()
            .filter(move |g| g.state() == state)
            .map(|g| &*g.group)
    }

    /// Whether every group that answered applied the write (e.g. `add` found
    /// no existing key anywhere). A group only cleared for a conditional
    /// write ([`GroupOutcome::cleared`]) does not count as applying it.
    pub fn applied(&self) -> bool {
        self.groups.iter().any(GroupOutcome::took_it)
            && self.groups.iter().all(|g| !matches!(g.result, Ok(false)))
    }

    /// The groups where the write failed, with the reason.
    pub fn failed(&self) -> impl Iterator<Item = (&str, &Error)> {
        self.groups
            .iter()
            .filter_map(|g| g.result.as_ref().err().map(|e| (&*g.group, e)))
    }
}

/// Statistics of one server, from `stats`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerStats {
    /// The group the server belongs to (the first, if several).
    pub group: String,
    /// `host:port`.
    pub server: String,
    /// The `STAT` name/value pairs, or why they could not be read.
    pub stats: Result<HashMap<String, String>, Error>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn group(name: &str, result: Result<bool, Error>, cleared: bool) -> GroupOutcome {
        GroupOutcome {
            id: GroupId(0),
            group: name.into(),
            server: None,
            result,
            cleared,
            reply: None,
        }
    }

    fn failed() -> Result<bool, Error> {
        Err(Error::new(ErrorKind::Timeout, "timed out"))
    }

    /// A conditional write's cleared groups bring the others in line but
    /// never count as applying it: refused at the arbiter, nothing was
    /// applied however the clearing went.
    #[test]
    fn cleared_groups_do_not_count_as_applying_a_conditional_write() {
        let refused = WriteOutcome::new(vec![
            group("sg1", Ok(false), false),
            group("sg2", Ok(true), true),
            group("sg3", failed(), true),
        ]);
        assert!(!refused.applied());
        assert!(!refused.is_partial());
        assert!(!refused.is_complete());
        // Applied at the arbiter, one copy not cleared: partly done.
        let applied = WriteOutcome::new(vec![
            group("sg1", Ok(true), false),
            group("sg2", Ok(true), true),
            group("sg3", failed(), true),
        ]);
        assert!(applied.applied());
        assert!(applied.is_partial());
        assert!(!applied.is_complete());
        let everywhere = WriteOutcome::new(vec![
            group("sg1", Ok(true), false),
            group("sg2", Ok(true), true),
        ]);
        assert!(everywhere.applied() && everywhere.is_complete() && !everywhere.is_partial());
    }

    /// A group still pending is neither applied nor missed; one that
    /// failed after its request was handed over is unknown, not missed.
    #[test]
    fn pending_is_not_partial_and_a_cut_off_write_is_unknown() {
        let mut pending = WriteOutcome::new(vec![group("sg1", Ok(true), false)]);
        pending.pending = vec!["sg2".into()];
        assert!(!pending.is_partial() && !pending.is_complete());
        let cut_off = Err(Error::new(ErrorKind::ServerDead, "marked down").handed());
        let unknown = WriteOutcome::new(vec![
            group("sg1", Ok(true), false),
            group("sg2", cut_off, false),
            group("sg3", failed(), false),
            group("sg4", Ok(false), false),
        ]);
        let states: Vec<GroupState> = unknown.groups.iter().map(GroupOutcome::state).collect();
        assert_eq!(
            states,
            [
                GroupState::Applied,
                GroupState::Unknown,
                GroupState::Missed,
                GroupState::Refused
            ]
        );
        assert!(unknown.is_partial());
        assert_eq!(
            unknown.in_state(GroupState::Unknown).collect::<Vec<_>>(),
            ["sg2"]
        );
    }
}
