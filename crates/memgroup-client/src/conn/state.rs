//! The state of one pipelined connection, without I/O: what is queued, who
//! writes it, which caller each reply belongs to.
//!
//! The driver ([`conn`](crate::conn)) holds a [`State`] under a mutex and
//! calls one transition per event; each returns what the driver must do next
//! ([`Next`]). No transition touches a socket, a task or a clock, so the unit
//! tests and the property test below drive it through any interleaving.
//!
//! **The writer role.** Exactly one party at a time may write to the socket:
//! nobody ([`Role::Idle`]), a caller writing its own request at once without
//! blocking ([`Role::Caller`]), or the writer task ([`Role::Writer`]), woken
//! to send a batch. The role moves only through these transitions:
//!
//! | event | from | to | driver does |
//! |---|---|---|---|
//! | [`queue`](State::queue), little in flight | Idle | Caller | `try_write` the chunk, then [`caller_wrote`](State::caller_wrote) |
//! | `queue`, little in flight, others answered since the last write | Idle | Writer | wake the writer task (it yields once: they queue first) |
//! | `queue`, under load | Idle | Writer | wake the writer task |
//! | `queue`, role taken or batches full | any | same | nothing: the holder or a reply sends it |
//! | `caller_wrote`, all taken, more queued meanwhile, few callers in flight | Caller | Caller | `try_write` that too |
//! | `caller_wrote`, rest left (or owed by the transport) or more to send | Caller | Writer | wake the writer task |
//! | `caller_wrote`, nothing more | Caller | Idle | nothing |
//! | [`writer_take`](State::writer_take), nothing it may send | Writer | Idle | the task sleeps |
//! | [`reply`](State::reply) ends a batch, more to send | Idle | Writer | wake the writer task |
//!
//! **The reader role.** Someone reads the socket while replies are due: a
//! caller ([`ReadRole::Caller`]) or the reader task ([`ReadRole::Task`]). A
//! caller whose request finds no reply due (a lone caller, the connection
//! idle) takes the role and reads its own reply: no task switch between the
//! reply and its caller, no channel (its read hands the reply over,
//! [`Reply::Own`]), and no timer of its own (the connection's timer wakes it
//! through the waker it leaves, and keeps its timeout for it,
//! [`watch_reader`](State::watch_reader)). As soon as a second caller
//! waits, the reader task takes the role over, the first caller's reply is
//! given a channel, kept for it, and it is woken to wait there as the others
//! do (reads are serialised by the driver, so a read it had begun is safe): a caller's
//! future that is polled once and then left unpolled never holds up other
//! callers' replies. A caller that has its reply, or gives
//! up, hands the role to the reader task if other replies are still due
//! ([`reader_release`](State::reader_release)), else lets it go; a release
//! by a caller that no longer holds the role (an older epoch) does nothing.
//! The reader task reads while replies are due and lets the role go when none
//! are ([`reader_task_done`](State::reader_task_done)).
//!
//! **Invariants** (checked after every step of the property test):
//! 1. `batches` is the number of waiters with `ends_batch` set: written
//!    batches whose last reply has not arrived.
//! 2. A non-empty `front` (bytes of a started write the socket did not take),
//!    or `owed` (bytes the transport took but the socket did not: TLS
//!    records), means the writer task holds the role and owes them to the
//!    socket.
//! 3. Nothing queued is left with nobody to write it: with the role idle and
//!    the connection open, `out` is empty or `batches` is at its maximum, and
//!    then a batch's last reply, which will come, hands the role over.
//! 4. `open`, when set, is the `get`/`gets` line at the very end of `out`, and
//!    the newest waiter is its waiter; it is dropped as soon as anything else
//!    is queued or `out` is taken for writing.
//! 5. Waiters are in request order, so the oldest waiter owns the next reply.
//!    A caller that gives up leaves its waiter in place and its reply is read
//!    and dropped: the stream never desynchronises.
//! 6. Once closed, nothing is queued or sent, and every waiter was failed once.
//! 7. Replies due have a reader: with waiters and the connection open, the
//!    reader role is held.
//! 8. The bytes of written batches unanswered stay within the bound (TLS),
//!    but for a single request larger than it, sent alone.
//! 9. The timer wakes by the earliest deadline of the waiters still
//!    waiting (`armed` is at or before it); a waiter past its deadline has
//!    its callers told so ([`State::expire`]) and stays, its reply dropped.
//!    A merged line's deadline is at most [`JOIN_DEADLINE_SLACK`] past its
//!    first caller's, however many join.
//! 10. `callers` counts the callers of the waiters (a merged `get` each of
//!     its callers), answered or timed out, and stays within the cap: a place
//!     is freed only when its reply is read (or the connection fails).
//!     It is added to `busy` as it changes, for readers without the lock.
//! 11. A reply read for a caller reading its own ([`Reply::Own`]) is read by
//!     that caller: with the reader task, it has a channel. Whatever is kept
//!     for such a caller is gone once it lets the role go.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Waker;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use memgroup_proto::{Expect, GrowingRetrieval, Key, Request, Response};
use tokio::sync::oneshot;

use crate::conn::merge::{Merged, ReplyTx};
use crate::error::Error;
pub(crate) use reader::{Kept, Watch};

/// Up to this many callers in flight on a connection (this one included), a
/// caller writes its request at once even behind unanswered writes, and a
/// caller whose write the socket took whole also writes what others queued
/// meanwhile: so few requests would rarely share a batch, and handing the
/// write to the writer task costs a scheduler round trip (measured on
/// loopback: 4 closed-loop callers went from ~81k to ~61k gets/s when every
/// such write was handed over; writing on what queued meanwhile took them
/// from 0.70 to 0.46 context switches per request and 10.6 to 9.1 µs of CPU;
/// 16 and more gain from batching).
pub(crate) const DIRECT_WRITE_CALLERS: usize = 4;

/// At most this many chunks a caller holding the writer role writes for
/// others after its own (see [`DIRECT_WRITE_CALLERS`]): requests without a
/// reply take no place, so a flood of them keeps the caller count low, and
/// without a bound one caller could go on writing everyone's requests
/// without returning to its own.
pub(crate) const CALLER_EXTRA_WRITES: usize = 16;

/// A caller about to write its request at once (few callers in flight)
/// hands the write to the writer task instead when at least this many
/// callers, itself included, were answered since the last write: they are
/// likely to queue again at once, the writer task yields once before it
/// takes the batch, and one `write` of their requests (a merged `get`)
/// costs the client and the server about what one request costs. A lone
/// caller is never held back, and no caller's future holds the role across
/// an `await` (one left unpolled would hold up everyone's writes).
pub(crate) const GATHER_ANSWERED: usize = 2;

/// A single-key retrieval joins the open `get` only if its deadline is at
/// most this much later than the line's first caller's (the line then times
/// out at the latest of its callers' deadlines): a caller of the same timeout
/// joins within microseconds, and every caller's timeout is then at most
/// this late, within the timer's own millisecond granularity. One of
/// another timeout gets a line of its own.
pub(crate) const JOIN_DEADLINE_SLACK: Duration = Duration::from_millis(1);

/// Who may write to the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Nobody: the next `queue` (or a batch's last reply) takes the role.
    Idle,
    /// A caller is writing a chunk without blocking.
    Caller,
    /// The writer task: woken, about to run, or writing.
    Writer,
}

/// Who reads the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadRole {
    /// Nobody: no reply is due.
    Idle,
    /// A caller reads, until its own reply is in.
    Caller,
    /// The reader task reads, until no reply is due.
    Task,
}

/// What [`State::queue`] decided.
#[derive(Debug)]
pub(crate) struct Queued {
    /// Where the reply arrives: `None` for requests without one, and for
    /// the caller that reads its own (`reads`).
    pub(crate) receiver: Option<oneshot::Receiver<Result<Response, Error>>>,
    /// Who writes the request.
    pub(crate) next: Next,
    /// The caller took the reader role (this epoch of it): it reads until
    /// its reply is in — its own read hands it over ([`Reply::Own`]), or the
    /// state keeps it ([`State::watch_reader`]) — then calls
    /// [`State::reader_release`] with the epoch.
    pub(crate) reads: Option<u64>,
    /// The reader task must be woken: it took the role over from a lone
    /// caller now that a second one waits.
    pub(crate) wake_reader: bool,
    /// The timer must be woken: this request's deadline is the earliest now
    /// (see [`State::armed`]).
    pub(crate) wake_timer: bool,
    /// The caller that was reading its own reply must stop (the reader task
    /// took the role over): wake it, and it waits for its reply as the
    /// others do.
    pub(crate) wake_caller: Option<Waker>,
    /// Bytes the request added to the output.
    pub(crate) encoded: usize,
}

/// What the driver must do after a transition.
#[derive(Debug)]
pub(crate) enum Next {
    /// Nothing: whoever holds the role, or a coming reply, sends what was queued.
    Nothing,
    /// This caller now holds the role: write the chunk without blocking, then
    /// report what is left with [`State::caller_wrote`].
    Write(BytesMut),
    /// The writer task now holds the role: wake it.
    WakeWriter,
}

/// Where a reply goes.
#[derive(Debug)]
pub(crate) enum Reply {
    /// The caller that took the reader role in this epoch and reads its own
    /// reply: the read that decodes it hands it over, no channel between
    /// (one is made only if the reader task takes the role over, see
    /// [`State::queue`]). Read by anyone else, its caller gave up: dropped.
    Own(u64),
    /// One caller (`None` once told it timed out).
    One(Option<ReplyTx>),
    /// Several callers' `get`s merged into one command.
    Merged(Box<Merged>),
}

impl Reply {
    /// The callers it answers: each holds a place on the connection until
    /// the reply arrives, answered or not.
    fn callers(&self) -> usize {
        match self {
            Reply::Own(_) | Reply::One(_) => 1,
            Reply::Merged(merged) => merged.callers(),
        }
    }

    /// Tells every caller still waiting that its request timed out; their
    /// places stay held until the reply arrives. (A caller reading its own
    /// is told through the state: [`State::expire`].)
    fn time_out(&mut self, error: &Error) {
        match self {
            Reply::Own(_) => {}
            Reply::One(tx) => {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(Err(error.clone()));
                }
            }
            Reply::Merged(merged) => merged.time_out(error),
        }
    }

    /// Hands `reply` over; a caller that gave up is skipped (as is a
    /// caller reading its own: its read takes the reply instead).
    pub(crate) fn deliver(self, reply: Result<Response, Error>) {
        match self {
            Reply::Own(_) => {}
            Reply::One(tx) => {
                if let Some(tx) = tx {
                    let _ = tx.send(reply);
                }
            }
            Reply::Merged(merged) => merged.deliver(reply),
        }
    }
}

#[derive(Debug)]
struct Waiter {
    expect: Expect,
    /// While the request is still in `out`: where it ends there.
    end: usize,
    /// The last request of a batch written with one `write`.
    ends_batch: bool,
    /// For the last request of a batch: the batch's size in bytes.
    batch_bytes: usize,
    /// `None` only for a moment while a caller joins a merged `get`.
    reply: Option<Reply>,
    /// When its callers stop waiting (a merged `get`: its last joiner's).
    deadline: Instant,
    /// Its first caller's deadline: a caller joins a merged `get` only
    /// within [`JOIN_DEADLINE_SLACK`] of it, so no caller's timeout comes
    /// later than that however many join.
    first_deadline: Instant,
    /// Its callers were told it timed out ([`State::expire`]); its reply is
    /// still read, and dropped.
    timed_out: bool,
}

/// The state of one connection; see the module docs.
#[derive(Debug)]
pub(crate) struct State {
    /// Bytes of a started write the socket did not take; they go before `out`.
    front: BytesMut,
    /// Encoded requests not yet handed to the socket.
    out: BytesMut,
    /// An empty buffer whose chunk was written whole, kept to become the
    /// next `out`: a request costs no allocation for its bytes.
    spare: BytesMut,
    /// The transport holds bytes of a caller's write the socket did not take
    /// (TLS records inside rustls): the writer task owes them to the socket.
    owed: bool,
    role: Role,
    read_role: ReadRole,
    /// Counts the times a caller took the reader role, so a caller's release
    /// acts only on its own tenure.
    read_epoch: u64,
    /// Written batches whose last reply has not arrived.
    batches: usize,
    /// Requests queued or written, oldest first, awaiting replies.
    waiters: VecDeque<Waiter>,
    /// How many of the newest waiters' requests are still in `out`.
    unwritten: usize,
    /// Bytes of written batches whose last reply has not arrived.
    unanswered: usize,
    /// The most `unanswered` may grow to by starting a batch (a request
    /// larger than this goes alone, when nothing is unanswered).
    max_unanswered: usize,
    /// Set once the connection failed; every later call fails with it.
    closed: Option<Error>,
    /// The `get`/`gets` at the end of `out` that single-key retrievals may join.
    open: Option<GrowingRetrieval>,
    /// Written batches allowed without their last reply before requests wait.
    max_batches: usize,
    /// Whether queued single-key retrievals join into one command.
    merge_gets: bool,
    /// The earliest deadline of the waiters not yet timed out when last
    /// computed (it may have passed for a waiter answered since): when the
    /// timer wakes. `None` while no waiter has a deadline to watch.
    armed: Option<Instant>,
    /// The waker of the caller holding the reader role, while it waits for
    /// the socket ([`State::watch_reader`]): woken when the role moves to the
    /// reader task, when a request times out (it may be this caller's: it
    /// has no timer of its own) and when the connection fails.
    reader_waker: Option<Waker>,
    /// What is kept for callers that read their own reply, by epoch, until
    /// they look ([`Kept`]): at most one while callers are polled.
    kept: Vec<(u64, Kept)>,
    /// Chunks the caller holding the writer role wrote after its own, for
    /// others who queued meanwhile: at most [`CALLER_EXTRA_WRITES`].
    caller_writes: usize,
    /// Callers answered since a batch was last taken for writing (see
    /// [`GATHER_ANSWERED`]).
    answered: usize,
    /// Callers holding a place (see [`State::callers`]): at most
    /// `max_callers`, beyond which callers wait for one.
    callers: usize,
    /// Where each change of `callers` is added too, for readers without
    /// the lock (the pool, preferring an idle connection): the connection's
    /// own count, or its slot's, shared by every connection the slot holds
    /// in turn ([`State::with_busy`]).
    busy: Arc<AtomicUsize>,
    max_callers: usize,
    /// Callers waiting for a place.
    room_waiting: usize,
    /// Of those, how many the driver is to wake (places freed since it last
    /// asked).
    room_wakes: usize,
}

impl State {
    pub(crate) fn new(max_batches: usize, merge_gets: bool) -> State {
        State {
            front: BytesMut::new(),
            out: BytesMut::new(),
            spare: BytesMut::new(),
            owed: false,
            role: Role::Idle,
            read_role: ReadRole::Idle,
            read_epoch: 0,
            batches: 0,
            waiters: VecDeque::new(),
            unwritten: 0,
            unanswered: 0,
            max_unanswered: usize::MAX,
            closed: None,
            open: None,
            max_batches: max_batches.max(1),
            merge_gets,
            armed: None,
            reader_waker: None,
            kept: Vec::new(),
            caller_writes: 0,
            answered: 0,
            callers: 0,
            busy: Arc::default(),
            max_callers: usize::MAX,
            room_waiting: 0,
            room_wakes: 0,
        }
    }

    /// Adds the changes of [`State::callers`] to `busy` too (from a state
    /// with no callers yet): a slot's count, summing the callers of every
    /// connection it has held, so that one closed with requests still on
    /// it is counted until they are answered or failed. Read without the
    /// lock, it may lag a change another thread is making, which is enough
    /// for choosing an idle connection.
    pub(crate) fn with_busy(mut self, busy: Arc<AtomicUsize>) -> State {
        debug_assert_eq!(self.callers, 0, "set before any request");
        self.busy = busy;
        self
    }

    /// Caps the callers in flight (see [`State::queue`]): beyond, a caller
    /// waits for a reply to free a place, so queues stay bounded.
    pub(crate) fn with_max_callers(mut self, callers: usize) -> State {
        self.max_callers = callers.max(1);
        self
    }

    /// Bounds the bytes of written requests still unanswered (see
    /// [`State::take_out`]).
    pub(crate) fn with_max_unanswered_bytes(mut self, bytes: usize) -> State {
        self.max_unanswered = bytes.max(1);
        self
    }

    /// Requests written and awaiting their reply, and requests queued.
    pub(crate) fn load(&self) -> (usize, usize) {
        (self.waiters.len() - self.unwritten, self.unwritten)
    }

    /// Why the connection closed, once it has.
    pub(crate) fn closed(&self) -> Option<&Error> {
        self.closed.as_ref()
    }

    /// What the oldest waiter expects: how to decode the next reply.
    pub(crate) fn expect(&self) -> Option<Expect> {
        self.waiters.front().map(|w| w.expect)
    }

    /// Queues `request` (joining it to the open `get` when it can) and decides
    /// who sends it and who reads its reply. `in_flight` counts the callers
    /// holding a place, this one included ([`State::callers`] + 1). `None`
    /// when every place is taken: the caller is counted as waiting for one
    /// (until [`State::leave_room_queue`]) and tries again once a reply frees
    /// one ([`State::take_room_wakes`]).
    pub(crate) fn queue(
        &mut self,
        request: &Request<'_>,
        in_flight: usize,
        deadline: Instant,
    ) -> Result<Option<Queued>, Error> {
        if let Some(error) = &self.closed {
            return Err(error.clone());
        }
        // Requests without a reply take no place, and so never wait for one.
        let replied = request.expect().is_some();
        if replied && self.callers >= self.max_callers {
            self.room_waiting += 1;
            return Ok(None);
        }
        let before = self.out.len();
        let (mut receiver, mut reads, mut wake_reader, mut wake_caller) = (None, None, false, None);
        match request.expect() {
            None => {
                request.encode(&mut self.out);
                self.open = None;
            }
            Some(expect) => {
                self.callers += 1;
                self.busy.fetch_add(1, Ordering::Relaxed);
                let single = match request {
                    Request::Get { keys: [key] } if self.merge_gets => Some((false, *key)),
                    Request::Gets { keys: [key] } if self.merge_gets => Some((true, *key)),
                    _ => None,
                };
                let reply = match self.read_role {
                    // No reply is due (no waiter, so no open line): this
                    // caller reads its own, handed over by its read.
                    ReadRole::Idle => {
                        self.read_epoch += 1;
                        self.read_role = ReadRole::Caller;
                        reads = Some(self.read_epoch);
                        Some(Reply::Own(self.read_epoch))
                    }
                    // A second caller waits: the reader task takes the role
                    // over, and the first caller waits on a channel too.
                    ReadRole::Caller | ReadRole::Task => {
                        if self.read_role == ReadRole::Caller {
                            self.hand_over_own();
                            self.read_role = ReadRole::Task;
                            wake_reader = true;
                            wake_caller = self.reader_waker.take();
                        }
                        let (tx, rx) = oneshot::channel();
                        receiver = Some(rx);
                        match single {
                            Some((cas, key)) => self.join_open(cas, key, tx, deadline),
                            None => Some(tx),
                        }
                        .map(|tx| Reply::One(Some(tx)))
                    }
                };
                // Not joined to the open line: a request (and line) of its own.
                if let Some(reply) = reply {
                    self.open = match single {
                        Some((cas, key)) => Some(GrowingRetrieval::start(&mut self.out, cas, key)),
                        None => {
                            request.encode(&mut self.out);
                            None
                        }
                    };
                    self.waiters.push_back(Waiter {
                        expect,
                        end: self.out.len(),
                        ends_batch: false,
                        batch_bytes: 0,
                        reply: Some(reply),
                        deadline,
                        first_deadline: deadline,
                        timed_out: false,
                    });
                    self.unwritten += 1;
                }
            }
        }
        let encoded = self.out.len() - before;
        let wake_timer = replied && self.arm(deadline);
        // Places left and callers waiting for one (wake-ups coalesce: two
        // places freed before the waiters listened wake one): pass it on.
        if self.room_waiting > self.room_wakes && self.callers < self.max_callers {
            self.room_wakes += 1;
        }
        Ok(Some(Queued {
            receiver,
            next: self.next_write(in_flight),
            reads,
            wake_reader,
            wake_timer,
            wake_caller,
            encoded,
        }))
    }

    /// Callers holding a place: a request queued or awaiting its reply (a
    /// merged `get` counting each of its callers), answered or timed out.
    pub(crate) fn callers(&self) -> usize {
        self.callers
    }

    /// A caller told to wait for a place ([`State::queue`] gave `None`) stops
    /// waiting: it tries again, gave up, or timed out.
    pub(crate) fn leave_room_queue(&mut self) {
        self.room_waiting = self.room_waiting.saturating_sub(1);
    }

    /// How many callers waiting for a place to wake (one each), for the places
    /// replies freed since last asked.
    pub(crate) fn take_room_wakes(&mut self) -> usize {
        std::mem::take(&mut self.room_wakes)
    }

    /// Watches `deadline` too: returns whether the timer must be woken (it
    /// is earlier than what the timer sleeps until, or the timer sleeps with
    /// nothing to watch).
    fn arm(&mut self, deadline: Instant) -> bool {
        match self.armed {
            Some(at) if at <= deadline => false,
            _ => {
                self.armed = Some(deadline);
                true
            }
        }
    }

    /// When the timer is to wake ([`State::expire`] then), if at all.
    pub(crate) fn armed(&self) -> Option<Instant> {
        self.armed
    }

    /// The timer woke at `now`: every waiter whose deadline has passed has
    /// its callers told `error` (a timeout), and stays in the queue, so its
    /// reply is still read and dropped and the stream stays in step; its
    /// places are freed with that reply. Then the timer is
    /// set for the earliest deadline left, if any. Returns the waker of the
    /// caller reading its own reply when a request timed out (it may be
    /// that caller's: it learns it from its reply channel once woken).
    pub(crate) fn expire(&mut self, now: Instant, error: &Error) -> Option<Waker> {
        let mut next: Option<Instant> = None;
        let mut told = false;
        for waiter in &mut self.waiters {
            let Some(reply) = waiter.reply.as_mut() else {
                continue;
            };
            if waiter.timed_out {
                continue;
            }
            if waiter.deadline <= now {
                match reply {
                    // Its caller is told when it looks (if still reading:
                    // else it gave up), and the reply is dropped.
                    Reply::Own(epoch) => {
                        let epoch = *epoch;
                        *reply = Reply::One(None);
                        if self.read_role == ReadRole::Caller && self.read_epoch == epoch {
                            self.kept.push((epoch, Kept::Failed(error.clone())));
                        }
                    }
                    reply => reply.time_out(error),
                }
                waiter.timed_out = true;
                told = true;
            } else {
                next = Some(next.map_or(waiter.deadline, |n| n.min(waiter.deadline)));
            }
        }
        self.armed = next;
        if told { self.reader_waker.take() } else { None }
    }

    /// Joins a single-key retrieval to the open `get`/`gets`, or hands the
    /// reply sender back when it cannot.
    fn join_open(
        &mut self,
        cas: bool,
        key: Key<'_>,
        tx: ReplyTx,
        deadline: Instant,
    ) -> Option<ReplyTx> {
        let (Some(open), Some(waiter)) = (self.open.as_mut(), self.waiters.back_mut()) else {
            return Some(tx);
        };
        let first = waiter.first_deadline;
        let in_time = first <= deadline
            && first
                .checked_add(JOIN_DEADLINE_SLACK)
                .is_none_or(|latest| deadline <= latest);
        if open.is_cas() != cas || waiter.timed_out || !in_time {
            return Some(tx);
        }
        let bytes = key.as_bytes();
        // Looked up once: the same lookup adds the caller below.
        let (on_line, lookup) = match &waiter.reply {
            // (A caller reading its own is handed a channel before anyone
            // joins: this one gave up.)
            Some(Reply::Own(_)) => return Some(tx),
            Some(Reply::One(..)) => (open.first_key(&self.out) == bytes, None),
            Some(Reply::Merged(merged)) => {
                let lookup = merged.lookup(bytes);
                (lookup.found(), Some(lookup))
            }
            None => return Some(tx),
        };
        if !on_line && !open.push(&mut self.out, key) {
            return Some(tx);
        }
        let mut merged = match waiter.reply.take() {
            Some(Reply::One(Some(first))) => {
                Box::new(Merged::new(open.first_key(&self.out), first))
            }
            Some(Reply::One(None)) => unreachable!("a waiter timed out is not joined"),
            Some(Reply::Own(_)) => unreachable!("refused above"),
            Some(Reply::Merged(merged)) => merged,
            None => unreachable!("checked above"),
        };
        match lookup {
            Some(lookup) => merged.add_looked_up(bytes, lookup, tx),
            None => merged.add(bytes, tx),
        };
        waiter.reply = Some(Reply::Merged(merged));
        waiter.deadline = waiter.deadline.max(deadline);
        waiter.end = self.out.len();
        // The reply may hold one item per key now on the line.
        waiter.expect = Expect::values(open.keys());
        None
    }

    /// Who writes what was just queued (see the module docs' table).
    fn next_write(&mut self, in_flight: usize) -> Next {
        if self.role != Role::Idle {
            return Next::Nothing;
        }
        let Some(cut) = self.cut() else {
            return Next::Nothing;
        };
        // Callers answered together queue again together: the writer task
        // sends what they queue in one batch, rather than the first alone.
        let gather = self.answered >= GATHER_ANSWERED;
        if !gather && (self.batches == 0 || in_flight <= DIRECT_WRITE_CALLERS) {
            self.role = Role::Caller;
            self.caller_writes = 0;
            Next::Write(self.take_out(cut))
        } else {
            self.role = Role::Writer;
            Next::WakeWriter
        }
    }

    /// Whether the writer task has something it may send now.
    fn can_send(&self) -> bool {
        self.owed || !self.front.is_empty() || self.cut().is_some()
    }

    /// How many bytes of `out` the next batch may take, if any: all of it
    /// within the budget of unanswered bytes, else up to the end of the last
    /// request that fits; a request larger than the whole budget goes alone
    /// once nothing is unanswered.
    fn cut(&self) -> Option<usize> {
        if self.out.is_empty() || self.batches >= self.max_batches {
            return None;
        }
        let budget = self.max_unanswered.saturating_sub(self.unanswered);
        if self.out.len() <= budget {
            return Some(self.out.len());
        }
        let unwritten = self.waiters.range(self.waiters.len() - self.unwritten..);
        let fits = unwritten.clone().take_while(|w| w.end <= budget).last();
        if let Some(waiter) = fits {
            return Some(waiter.end);
        }
        if self.unanswered == 0 {
            return Some(unwritten.map(|w| w.end).next().unwrap_or(self.out.len()));
        }
        None
    }

    /// Takes the next batch, the first `cut` bytes of `out` (as
    /// [`State::cut`] said), and marks its last request.
    fn take_out(&mut self, cut: usize) -> BytesMut {
        // All of `out` (the usual case) goes as it is, and the spare takes
        // its place.
        let chunk = if cut == self.out.len() {
            std::mem::replace(&mut self.out, std::mem::take(&mut self.spare))
        } else {
            self.out.split_to(cut)
        };
        // The open `get` line's position moves (or it went out): merging
        // starts afresh.
        self.open = None;
        self.answered = 0;
        let first = self.waiters.len() - self.unwritten;
        let mut last_written = None;
        for (i, waiter) in self.waiters.range_mut(first..).enumerate() {
            if waiter.end <= cut {
                last_written = Some(first + i);
            } else {
                waiter.end -= cut;
            }
        }
        if let Some(last) = last_written {
            self.unwritten = self.waiters.len() - last - 1;
            let waiter = &mut self.waiters[last];
            waiter.ends_batch = true;
            waiter.batch_bytes = cut;
            self.batches += 1;
            self.unanswered += cut;
        }
        chunk
    }

    /// A caller holding the role wrote what it could of its chunk; `rest` is
    /// what the transport did not take, and `owed` says whether it holds
    /// bytes the socket did not take (TLS records): either way the writer
    /// task then takes the role and sends them.
    pub(crate) fn caller_wrote(&mut self, rest: BytesMut, owed: bool) -> Next {
        debug_assert_eq!(self.role, Role::Caller);
        if self.closed.is_some() {
            self.role = Role::Idle;
            return Next::Nothing;
        }
        self.owed = owed;
        if rest.is_empty() {
            self.recycle(rest);
        } else {
            self.front = rest;
        }
        // The socket took it all and few callers are in flight: what they
        // queued meanwhile goes out with this caller's next write, without
        // a turn of the writer task.
        if self.front.is_empty()
            && !owed
            && self.callers <= DIRECT_WRITE_CALLERS
            && self.caller_writes < CALLER_EXTRA_WRITES
            && let Some(cut) = self.cut()
        {
            self.caller_writes += 1;
            return Next::Write(self.take_out(cut));
        }
        if self.can_send() {
            self.role = Role::Writer;
            Next::WakeWriter
        } else {
            self.role = Role::Idle;
            Next::Nothing
        }
    }

    /// The writer task's turn: moves everything it may send into `into` and
    /// returns `true`, or gives the role up and returns `false`.
    pub(crate) fn writer_take(&mut self, into: &mut BytesMut) -> bool {
        debug_assert_eq!(self.role, Role::Writer);
        if self.closed.is_some() || !self.can_send() {
            self.role = Role::Idle;
            return false;
        }
        // Its send flushes what the transport holds before anything else.
        self.owed = false;
        // The writer's last chunk, all sent, is the next spare. The front
        // finishes a batch already counted; `out` starts a new one only
        // while the caps allow.
        let sent = std::mem::replace(into, std::mem::take(&mut self.front));
        self.recycle(sent);
        if let Some(cut) = self.cut() {
            let batch = self.take_out(cut);
            if into.is_empty() {
                let empty = std::mem::replace(into, batch);
                self.recycle(empty);
            } else {
                into.extend_from_slice(&batch);
            }
        }
        true
    }

    /// Keeps `buf`, written whole, as the spare for the next `out`, unless
    /// the spare is already as large, or `buf` is too large to hold on to
    /// (a large value's buffer is let go).
    fn recycle(&mut self, mut buf: BytesMut) {
        /// The largest buffer kept for reuse.
        const MAX_SPARE: usize = 64 * 1024;
        buf.clear();
        // Written bytes were advanced past: take their room back (no copy,
        // no allocation; `false` only when there was none to take).
        let _ = buf.try_reclaim(buf.capacity() + 1);
        if buf.capacity() > self.spare.capacity() && buf.capacity() <= MAX_SPARE {
            self.spare = buf;
        }
    }

    /// The reply to the oldest waiter was decoded: returns where it goes and
    /// what to do (a batch's last reply may let queued requests go out).
    pub(crate) fn reply(&mut self) -> (Option<Reply>, Next) {
        let Some(waiter) = self.waiters.pop_front() else {
            return (None, Next::Nothing);
        };
        let mut next = Next::Nothing;
        let freed = waiter.reply.as_ref().map_or(0, Reply::callers);
        self.callers -= freed;
        self.busy.fetch_sub(freed, Ordering::Relaxed);
        self.answered += freed;
        // Callers waiting for a place: one woken per place freed.
        self.room_wakes += freed.min(self.room_waiting.saturating_sub(self.room_wakes));
        if self.waiters.len() < self.unwritten {
            // A "reply" to a request not yet written (a hostile server
            // answering what it never got): the count must stay in range.
            self.unwritten = self.waiters.len();
        }
        if waiter.ends_batch {
            self.batches = self
                .batches
                .checked_sub(1)
                .expect("a batch's last reply arrives once");
            self.unanswered -= waiter.batch_bytes;
            if self.role == Role::Idle && self.closed.is_none() && self.can_send() {
                self.role = Role::Writer;
                next = Next::WakeWriter;
            }
        }
        (waiter.reply, next)
    }

    /// Closes the connection with `error`: returns every waiter's reply sink,
    /// to be failed (outside the lock); the caller reading its own reply
    /// finds the error kept for it ([`State::watch_reader`]). Later calls
    /// fail with the first error.
    pub(crate) fn fail(&mut self, error: &Error) -> Vec<Reply> {
        if self.closed.is_none() {
            self.closed = Some(error.clone());
        }
        self.batches = 0;
        self.unwritten = 0;
        self.unanswered = 0;
        self.owed = false;
        self.armed = None;
        self.open = None;
        self.front = BytesMut::new();
        self.out = BytesMut::new();
        // Every place is free; the driver wakes those waiting for one, who
        // find the connection closed.
        self.busy.fetch_sub(self.callers, Ordering::Relaxed);
        self.callers = 0;
        self.room_wakes = 0;
        let reading = (self.read_role == ReadRole::Caller).then_some(self.read_epoch);
        let mut replies = Vec::with_capacity(self.waiters.len());
        for reply in self.waiters.drain(..).filter_map(|w| w.reply) {
            match reply {
                // Told when it looks, if still reading.
                Reply::Own(epoch) if reading == Some(epoch) => {
                    self.kept.push((epoch, Kept::Failed(error.clone())));
                }
                Reply::Own(_) => {}
                reply => replies.push(reply),
            }
        }
        replies
    }

    /// Panics unless the module docs' invariants hold (those of the state
    /// alone: 1–4, 8, 9 and 10).
    #[cfg(test)]
    fn check(&self) {
        let ends = self.waiters.iter().filter(|w| w.ends_batch).count();
        assert_eq!(self.batches, ends, "invariant 1: batches counted");
        let callers: usize = self
            .waiters
            .iter()
            .map(|w| w.reply.as_ref().map_or(0, Reply::callers))
            .sum();
        assert_eq!(self.callers, callers, "invariant 10: places counted");
        assert_eq!(
            self.busy.load(Ordering::Relaxed),
            self.callers,
            "invariant 10: places mirrored"
        );
        assert!(
            self.callers <= self.max_callers,
            "invariant 10: within the cap"
        );
        let bytes: usize = self.waiters.iter().map(|w| w.batch_bytes).sum();
        assert_eq!(
            self.unanswered, bytes,
            "invariant 8: unanswered bytes counted"
        );
        let alone = self.batches == 1;
        assert!(
            self.unanswered <= self.max_unanswered || alone,
            "invariant 8: within the bound of unanswered bytes, or one request alone"
        );
        assert!(self.unwritten <= self.waiters.len());
        for waiter in self.waiters.range(self.waiters.len() - self.unwritten..) {
            assert!(!waiter.ends_batch && waiter.end <= self.out.len());
        }
        if !self.front.is_empty() || self.owed {
            assert_eq!(self.role, Role::Writer, "invariant 2: front has a writer");
        }
        if self.role == Role::Idle && self.closed.is_none() {
            assert!(!self.can_send(), "invariant 3: queued output has a writer");
        }
        if !self.waiters.is_empty() && self.closed.is_none() {
            assert_ne!(self.read_role, ReadRole::Idle, "invariant 7: a reader");
        }
        for w in &self.waiters {
            assert!(
                w.first_deadline <= w.deadline
                    && w.deadline - w.first_deadline <= JOIN_DEADLINE_SLACK,
                "invariant 9: a merged line's callers time out within the slack"
            );
        }
        let earliest = self
            .waiters
            .iter()
            .filter(|w| w.reply.is_some() && !w.timed_out)
            .map(|w| w.deadline)
            .min();
        if let (Some(earliest), false) = (earliest, self.closed.is_some()) {
            assert!(
                self.armed.is_some_and(|at| at <= earliest),
                "invariant 9: the timer wakes by the earliest deadline"
            );
        }
        if let Some(open) = &self.open {
            assert!(self.out.ends_with(b"\r\n"), "invariant 4");
            assert!(!open.first_key(&self.out).is_empty(), "invariant 4");
            assert_eq!(
                self.waiters.back().map(|w| w.expect),
                Some(Expect::values(open.keys()))
            );
        }
    }
}

mod reader;

#[cfg(test)]
mod tests;
