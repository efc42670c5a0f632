//! What a write is: [`WriteOp`], a write minus its key, and [`Job`], a write
//! with its key and value owned, so that its groups' parts can finish after
//! the caller has its answer.

use memgroup_proto::{Key, MetaFlag, Request, SetMode, StoreCommand};
use memgroup_topology::{GroupId, GroupKeys, Keys};

/// A write, minus its key: built into a request once the wire key is known.
#[derive(Debug, Clone, Copy)]
pub(super) enum WriteOp<'a> {
    Store {
        command: StoreCommand,
        data: &'a [u8],
        flags: u32,
        exptime: u32,
    },
    Delete,
    Touch {
        exptime: u32,
    },
    Arith {
        increment: bool,
        delta: u64,
    },
    MetaSet {
        data: &'a [u8],
        flags: &'a [MetaFlag],
    },
    /// `md`: with `I`, marks the value stale instead of deleting it.
    MetaDelete {
        flags: &'a [MetaFlag],
    },
    /// `ma`: always through the arbiter.
    MetaArith {
        flags: &'a [MetaFlag],
    },
}

impl<'a> WriteOp<'a> {
    /// The same op with `data` and `flags` for its value and meta flags
    /// (ops without them are unchanged).
    fn with_value<'b>(&self, data: &'b [u8], flags: &'b [MetaFlag]) -> WriteOp<'b> {
        match *self {
            WriteOp::Store {
                command,
                flags: client_flags,
                exptime,
                ..
            } => WriteOp::Store {
                command,
                data,
                flags: client_flags,
                exptime,
            },
            WriteOp::MetaSet { .. } => WriteOp::MetaSet { data, flags },
            WriteOp::MetaDelete { .. } => WriteOp::MetaDelete { flags },
            WriteOp::MetaArith { .. } => WriteOp::MetaArith { flags },
            WriteOp::Delete => WriteOp::Delete,
            WriteOp::Touch { exptime } => WriteOp::Touch { exptime },
            WriteOp::Arith { increment, delta } => WriteOp::Arith { increment, delta },
        }
    }

    /// Whether a group that missed it is repaired by deleting the key there
    /// ([`crate::client::repair`]): every plain write; not an `add` (a miss
    /// leaves what the add would have kept) nor a conditional write (the
    /// arbiter decides those, and their other groups' deletes repair).
    pub(super) fn repairs_on_miss(&self) -> bool {
        !self.is_conditional()
            && !matches!(
                self,
                WriteOp::Store {
                    command: StoreCommand::Add,
                    ..
                }
            )
    }

    /// Whether, applied on a server, it leaves the newest value there (or
    /// none), so a pending repair that cannot land is no longer needed: a
    /// plain store or a delete, not a touch.
    pub(super) fn supersedes_repair(&self) -> bool {
        matches!(
            self,
            WriteOp::Store {
                command: StoreCommand::Set,
                ..
            } | WriteOp::MetaSet { .. }
                | WriteOp::Delete { .. }
        ) && !self.is_conditional()
    }

    /// The command's name (`add`, `incr`, …).
    pub(super) fn command(&self) -> &'static str {
        self.request(Key::new(b"k").expect("a valid key")).command()
    }

    /// Whether one group must decide it for all (see `arbiter.rs`): the
    /// conditional stores, `incr`/`decr`, and an `ms` with a mode other than
    /// set, a compare-and-swap or an invalidation.
    pub(super) fn is_conditional(&self) -> bool {
        match self {
            WriteOp::Arith { .. }
            | WriteOp::MetaArith { .. }
            | WriteOp::Store {
                command:
                    StoreCommand::Add
                    | StoreCommand::Replace
                    | StoreCommand::Cas(_)
                    | StoreCommand::Append
                    | StoreCommand::Prepend,
                ..
            } => true,
            WriteOp::MetaSet { flags, .. } => flags.iter().any(|f| {
                matches!(
                    f,
                    MetaFlag::CompareCas(_)
                        | MetaFlag::Invalidate
                        | MetaFlag::SetMode(
                            SetMode::Add | SetMode::Append | SetMode::Prepend | SetMode::Replace
                        )
                )
            }),
            WriteOp::MetaDelete { flags } => {
                flags.iter().any(|f| matches!(f, MetaFlag::CompareCas(_)))
            }
            _ => false,
        }
    }

    pub(super) fn request<'k>(&self, key: Key<'k>) -> Request<'k>
    where
        'a: 'k,
    {
        match *self {
            WriteOp::Store {
                command,
                data,
                flags,
                exptime,
            } => Request::Store {
                command,
                key,
                flags,
                exptime,
                data,
                noreply: false,
            },
            WriteOp::Delete => Request::Delete {
                key,
                noreply: false,
            },
            WriteOp::Touch { exptime } => Request::Touch {
                key,
                exptime,
                noreply: false,
            },
            WriteOp::Arith { increment, delta } => Request::Arith {
                key,
                increment,
                delta,
                noreply: false,
            },
            WriteOp::MetaSet { data, flags } => Request::MetaSet { key, data, flags },
            WriteOp::MetaDelete { flags } => Request::MetaDelete { key, flags },
            WriteOp::MetaArith { flags } => Request::MetaArith { key, flags },
        }
    }
}

/// One key's request, owned: the op with its value and meta flags.
struct Sent {
    /// The op, its value and meta flags borrowed from `bytes` and `flags`.
    op: WriteOp<'static>,
    /// The wire key, then the value: one allocation.
    bytes: Vec<u8>,
    /// Where the key ends in `bytes`.
    key_len: usize,
    flags: Vec<MetaFlag>,
}

impl Sent {
    fn new(key: &[u8], op: WriteOp<'_>) -> Sent {
        let (value, flags) = match op {
            WriteOp::Store { data: value, .. } => (value, Vec::new()),
            WriteOp::MetaSet { data: value, flags } => (value, flags.to_vec()),
            WriteOp::MetaDelete { flags } | WriteOp::MetaArith { flags } => {
                (&[][..], flags.to_vec())
            }
            _ => (&[][..], Vec::new()),
        };
        let mut bytes = Vec::with_capacity(key.len() + value.len());
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(value);
        Sent {
            op: op.with_value(&[], &[]),
            bytes,
            key_len: key.len(),
            flags,
        }
    }

    fn key(&self) -> &[u8] {
        &self.bytes[..self.key_len]
    }

    fn op(&self) -> WriteOp<'_> {
        self.op.with_value(&self.bytes[self.key_len..], &self.flags)
    }

    /// A `set` as `ms <key> <len> T<exptime> F<flags> c` (the same item),
    /// an `ms` with `c` added: its reply carries the CAS the copy got.
    fn returning_cas(&mut self) {
        match self.op {
            WriteOp::Store {
                command: StoreCommand::Set,
                flags,
                exptime,
                ..
            } => {
                self.flags = vec![
                    MetaFlag::Ttl(exptime),
                    MetaFlag::SetFlags(flags),
                    MetaFlag::ReturnCas,
                ];
                self.op = WriteOp::MetaSet {
                    data: &[],
                    flags: &[],
                };
            }
            WriteOp::MetaSet { .. } if !self.flags.contains(&MetaFlag::ReturnCas) => {
                self.flags.push(MetaFlag::ReturnCas);
            }
            _ => {}
        }
    }
}

/// A write with its key, owned: its groups' parts may outlive the call.
pub(super) struct Job {
    /// Its number among writes, as they start.
    pub(super) number: u64,
    /// Its key's digest, as its parts register ([`crate::client::repair`]).
    pub(super) digest: u64,
    /// Counted in flight until every part is done (the job dropped).
    pub(super) writing: Option<crate::client::repair::Writing>,
    /// The request of the groups that follow the cluster's key scheme.
    sent: Sent,
    /// The groups whose own key scheme stores the key otherwise: each
    /// one's request, and its key's digest.
    others: Vec<(GroupId, Sent, u64)>,
    /// The command's name (for spans and errors), found once.
    command: &'static str,
    /// Each group's CAS receipt, for the convergence check (`converge.rs`):
    /// set by [`Job::with_receipts`], which also makes a `set` an `ms … c`.
    pub(super) receipts: Option<super::converge::Receipts>,
    /// Whether it landed anywhere, and the repairs waiting on that.
    pub(super) landing: Landing,
}

impl Job {
    /// `op` on `key`.
    pub(super) fn new(key: &[u8], op: WriteOp<'_>) -> Job {
        Job {
            number: 0,
            digest: 0,
            writing: None,
            sent: Sent::new(key, op),
            others: Vec::new(),
            command: op.command(),
            receipts: None,
            landing: Landing::default(),
        }
    }

    /// `group` stores the key as `key`, and is sent `op` on it.
    pub(super) fn in_group(&mut self, group: GroupId, key: &[u8], op: WriteOp<'_>) {
        let digest = crate::client::repair::digest(key);
        self.others.push((group, Sent::new(key, op), digest));
    }

    /// `group`'s own request and key digest, when its scheme stores the key
    /// otherwise (none searched for in the usual case of no such group).
    #[inline]
    fn other(&self, group: GroupId) -> Option<&(GroupId, Sent, u64)> {
        if self.others.is_empty() {
            return None;
        }
        self.others.iter().find(|(g, _, _)| *g == group)
    }

    fn sent(&self, group: GroupId) -> &Sent {
        self.other(group).map_or(&self.sent, |(_, sent, _)| sent)
    }

    /// Whether [`Job::with_receipts`] applies: a plain store that replies
    /// (a `set`, an `ms` in set mode without a condition).
    pub(super) fn can_take_receipts(&self) -> bool {
        match self.sent.op {
            WriteOp::Store {
                command: StoreCommand::Set,
                ..
            } => true,
            WriteOp::MetaSet { .. } => {
                !self.sent.op.is_conditional()
                    && !self
                        .sent
                        .flags
                        .iter()
                        .any(|f| matches!(f, MetaFlag::Quiet | MetaFlag::Base64Key))
            }
            _ => false,
        }
    }

    /// This job keeping each of its `parts` groups' CAS receipt: a `set`
    /// goes as `ms <key> <len> T<exptime> F<flags> c` (the same item), an
    /// `ms` with `c` added.
    pub(super) fn with_receipts(mut self, parts: usize) -> Job {
        self.sent.returning_cas();
        for (_, sent, _) in &mut self.others {
            sent.returning_cas();
        }
        self.receipts = Some(super::converge::Receipts::new(parts));
        self
    }

    /// The command's name (`set`, `add`, `ms`, …).
    pub(super) fn command(&self) -> &'static str {
        self.command
    }

    /// The wire key in the groups that follow the cluster's key scheme:
    /// the key's identity in the client's books.
    pub(super) fn key(&self) -> &[u8] {
        self.sent.key()
    }

    /// The wire key in `group`.
    pub(super) fn key_of(&self, group: GroupId) -> &[u8] {
        self.sent(group).key()
    }

    /// The digest of the key in `group`, as its part registers.
    pub(super) fn digest_of(&self, group: GroupId) -> u64 {
        self.other(group)
            .map_or(self.digest, |&(_, _, digest)| digest)
    }

    /// What target selection routes on.
    pub(super) fn keys(&self) -> Keys<'_> {
        if self.others.is_empty() {
            Keys::Same(self.key())
        } else {
            Keys::PerGroup(self)
        }
    }

    /// The op, borrowing its value and flags from the job (the kind of op
    /// is every group's; the value, the cluster scheme's groups').
    pub(super) fn op(&self) -> WriteOp<'_> {
        self.sent.op()
    }

    /// The request to `group`.
    pub(super) fn request(&self, group: GroupId) -> Request<'_> {
        let sent = self.sent(group);
        sent.op()
            .request(Key::new_raw(sent.key()).expect("validated when made"))
    }
}

impl GroupKeys for Job {
    fn key(&self, group: GroupId) -> &[u8] {
        self.key_of(group)
    }
}

/// Whether a write landed anywhere, and the repairs waiting on the answer.
/// A write that no server took — each group's part passed over for a dead
/// server, unsent, or refused with an error reply — changed no copy, so no
/// group's copy became stale: its misses owe no repair, and a repair would
/// delete whatever copies stand there, the last writes of other processes
/// (a client that wrongly took every server for dead once deleted, through
/// its repairs, an acknowledged write in every group). So a part that
/// surely did not land queues its repair *held* (never due, but superseded
/// by a later write applied there as any other), until a part that reached
/// a server, or may still land, shows the write exists; when the last part
/// ends with none, the held repairs are dropped.
#[derive(Debug, Default)]
pub(super) struct Landing(parking_lot::Mutex<LandingState>);

#[derive(Debug, Default)]
struct LandingState {
    outstanding: usize,
    landed: bool,
    /// The servers (and their groups) whose repair of this write is held.
    held: Vec<(std::sync::Arc<str>, GroupId)>,
}

/// What became of a write's held repairs when a part ended.
pub(super) enum Landed {
    /// Not known yet.
    Open,
    /// It landed: these held repairs are due.
    Somewhere(Vec<(std::sync::Arc<str>, GroupId)>),
    /// No part landed: these held repairs go.
    Nowhere(Vec<(std::sync::Arc<str>, GroupId)>),
}

impl Landing {
    /// The write has `parts` parts (before any ends).
    pub(super) fn expect(&self, parts: usize) {
        self.0.lock().outstanding = parts;
    }

    /// Whether a miss's repair must be held: nothing landed yet.
    pub(super) fn holds(&self) -> bool {
        !self.0.lock().landed
    }

    /// The repair on `server` (of `group`) was queued held.
    pub(super) fn held(&self, server: std::sync::Arc<str>, group: GroupId) {
        self.0.lock().held.push((server, group));
    }

    /// One part ended; `landed` when it reached a server or may still
    /// land.
    pub(super) fn part_ended(&self, landed: bool) -> Landed {
        let mut state = self.0.lock();
        state.outstanding = state.outstanding.saturating_sub(1);
        state.landed |= landed;
        if state.landed {
            Landed::Somewhere(std::mem::take(&mut state.held))
        } else if state.outstanding == 0 {
            Landed::Nowhere(std::mem::take(&mut state.held))
        } else {
            Landed::Open
        }
    }

    /// Parts cut off that may still land: every held repair is due.
    pub(super) fn landed(&self) -> Vec<(std::sync::Arc<str>, GroupId)> {
        let mut state = self.0.lock();
        state.landed = true;
        std::mem::take(&mut state.held)
    }
}
