//! The reader role's transitions (see the module docs of
//! [`state`](super)): who reads the socket, and what the state keeps for a
//! caller reading its own reply until it looks.

use std::task::Waker;

use memgroup_proto::Response;
use tokio::sync::oneshot;

use super::{ReadRole, Reply, State};
use crate::error::Error;

/// What the state keeps for the caller reading its own reply (its epoch's),
/// until it looks ([`State::watch_reader`]).
#[derive(Debug)]
pub(crate) enum Kept {
    /// The reader task took the role over: the reply comes on this channel.
    Handed(oneshot::Receiver<Result<Response, Error>>),
    /// Its request timed out, or the connection failed.
    Failed(Error),
}

/// What the caller reading its own reply finds when it looks
/// ([`State::watch_reader`]).
#[derive(Debug)]
pub(crate) enum Watch {
    /// It still reads: its reply is not in.
    Reading,
    /// What was kept for it.
    Kept(Kept),
    /// It no longer reads, and nothing was kept for it (not expected: its
    /// reply went elsewhere).
    Gone,
}

impl State {
    /// The caller that took the reader role in `epoch` looks before it waits
    /// for the socket: what was kept for it (its request timed out, the
    /// connection failed, or the reader task took the role over and its
    /// reply comes on a channel), else `waker` is to be woken when it must
    /// look again other than for the socket (see `reader_waker`).
    pub(crate) fn watch_reader(&mut self, epoch: u64, waker: &Waker) -> Watch {
        if let Some(at) = self.kept.iter().position(|(e, _)| *e == epoch) {
            return Watch::Kept(self.kept.swap_remove(at).1);
        }
        if self.read_role != ReadRole::Caller || self.read_epoch != epoch || self.closed.is_some() {
            return Watch::Gone;
        }
        match &self.reader_waker {
            Some(known) if known.will_wake(waker) => {}
            _ => self.reader_waker = Some(waker.clone()),
        }
        Watch::Reading
    }

    /// The reader task takes the role over from the caller reading its own
    /// reply: that reply is to come on a channel, kept for the caller.
    pub(super) fn hand_over_own(&mut self) {
        let own = self.waiters.iter_mut().find_map(|w| match w.reply {
            Some(Reply::Own(epoch)) => Some((w, epoch)),
            _ => None,
        });
        if let Some((waiter, epoch)) = own {
            let (tx, rx) = oneshot::channel();
            waiter.reply = Some(Reply::One(Some(tx)));
            self.kept.push((epoch, Kept::Handed(rx)));
        }
    }

    /// Whether the caller that took the reader role in `epoch` may still read
    /// the socket: it holds the role, or the reader task does (reading for
    /// everyone is then harmless). Not once the role went idle or to a later
    /// caller: the bytes are that caller's.
    pub(crate) fn may_read(&self, epoch: u64) -> bool {
        match self.read_role {
            ReadRole::Idle => false,
            ReadRole::Task => true,
            ReadRole::Caller => self.read_epoch == epoch,
        }
    }

    /// The waker of the caller reading its own reply, taken (the connection
    /// failed: it is to look at its reply channel).
    pub(crate) fn take_reader_waker(&mut self) -> Option<Waker> {
        self.reader_waker.take()
    }

    /// A caller that took the reader role in `epoch` has its reply, or gave
    /// up: returns whether the reader task must be woken to read the replies
    /// still due. Nothing happens if the role has moved on since.
    pub(crate) fn reader_release(&mut self, epoch: u64) -> bool {
        // What was kept for it and not looked at: nobody will.
        self.kept.retain(|(e, _)| *e != epoch);
        if self.read_role != ReadRole::Caller || self.read_epoch != epoch {
            return false;
        }
        self.reader_waker = None;
        if self.waiters.is_empty() || self.closed.is_some() {
            self.read_role = ReadRole::Idle;
            false
        } else {
            self.read_role = ReadRole::Task;
            true
        }
    }

    /// The reader task asks whether to go on reading; when no reply is due it
    /// lets the role go and returns `true`.
    pub(crate) fn reader_task_done(&mut self) -> bool {
        debug_assert_eq!(self.read_role, ReadRole::Task);
        if self.waiters.is_empty() || self.closed.is_some() {
            self.read_role = ReadRole::Idle;
            true
        } else {
            false
        }
    }

    /// Whether nobody reads the socket (no reply is due).
    pub(crate) fn read_idle(&self) -> bool {
        self.read_role == ReadRole::Idle
    }
}
