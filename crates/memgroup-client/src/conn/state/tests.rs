//! The connection state machine, driven without sockets: unit tests of each
//! transition and a property test over random interleavings of callers, the
//! writer task, the socket, the server and the reader.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use memgroup_proto::{Key, Request, Response, StoreCommand, Value, Values};
use proptest::prelude::*;
use tokio::sync::oneshot;

use super::*;
use crate::error::ErrorKind;

type Rx = oneshot::Receiver<Result<Response, Error>>;

/// A deadline no unit test reaches.
fn far() -> std::time::Instant {
    crate::clock::now() + std::time::Duration::from_secs(3600)
}

fn get(key: &[u8]) -> Vec<u8> {
    key.to_vec()
}

/// The caller's write went out whole: what the state says to do next.
fn wrote_all(state: &mut State) -> Next {
    state.caller_wrote(BytesMut::new(), false)
}

/// `set n 0 0 1 noreply` with value `x`: a request without a reply.
fn quiet_set() -> Request<'static> {
    Request::Store {
        command: StoreCommand::Set,
        key: Key::new(b"n").unwrap(),
        flags: 0,
        exptime: 0,
        data: b"x",
        noreply: true,
    }
}

/// Queues `get <key>` and returns the receiver and what to do.
fn queue_get(state: &mut State, key: &[u8], in_flight: usize) -> (Rx, Next) {
    let keys = [Key::new(key).unwrap()];
    let queued = state
        .queue(&Request::Get { keys: &keys }, in_flight, far())
        .unwrap()
        .expect("a place");
    (queued.receiver.unwrap(), queued.next)
}

fn values(keys: &[&[u8]]) -> Response {
    let mut v = Values::new();
    for k in keys {
        v.push(Value {
            key: Bytes::copy_from_slice(k),
            flags: 0,
            cas: None,
            data: Bytes::copy_from_slice(k),
        });
    }
    Response::Values(v)
}

#[test]
fn an_idle_connection_lets_the_caller_write_at_once() {
    let mut state = State::new(4, true);
    let (_rx, next) = queue_get(&mut state, b"a", 1);
    let Next::Write(chunk) = next else {
        panic!("{next:?}")
    };
    assert_eq!(&chunk[..], b"get a\r\n");
    assert_eq!(state.role, Role::Caller);
    state.check();
    // Everything went out: the role is free again.
    assert!(matches!(wrote_all(&mut state), Next::Nothing));
    assert_eq!(state.role, Role::Idle);
    state.check();
    // With nothing unanswered, the caller writes however many callers are
    // counted in flight: no task switch while the connection is quiet.
    let mut state = State::new(4, true);
    let (_rx, next) = queue_get(&mut state, b"b", 100);
    assert!(matches!(next, Next::Write(_)), "{next:?}");
    assert_eq!(state.role, Role::Caller);
}

#[test]
fn queued_gets_merge_while_the_role_is_held() {
    let mut state = State::new(4, true);
    let (rx_a, _) = queue_get(&mut state, b"a", 1);
    // The caller holds the role: the next gets queue and merge.
    let (rx_b, next) = queue_get(&mut state, b"b", 2);
    assert!(matches!(next, Next::Nothing));
    let (rx_b2, _) = queue_get(&mut state, b"b", 3);
    let (rx_c, _) = queue_get(&mut state, b"c", 4);
    state.check();
    assert_eq!(&state.out[..], b"get b c\r\n", "b asked twice, sent once");
    // The caller's write is done, and few callers are in flight: what
    // queued meanwhile is its to write too (no turn of the writer task).
    let Next::Write(chunk) = wrote_all(&mut state) else {
        panic!("the caller writes on");
    };
    assert_eq!(&chunk[..], b"get b c\r\n");
    assert_eq!((state.batches, state.role), (2, Role::Caller));
    state.check();
    assert!(matches!(wrote_all(&mut state), Next::Nothing));
    assert_eq!(state.role, Role::Idle);
    // Replies in order: `get a`, then the merged `get b c`.
    let (reply, _) = state.reply();
    reply.unwrap().deliver(Ok(values(&[b"a"])));
    let (reply, _) = state.reply();
    reply.unwrap().deliver(Ok(values(&[b"c", b"b"])));
    state.check();
    for (mut rx, key) in [(rx_a, "a"), (rx_b, "b"), (rx_b2, "b"), (rx_c, "c")] {
        let Ok(Ok(Response::Values(v))) = rx.try_recv() else {
            panic!("{key}: no value")
        };
        assert_eq!(&v[0].key[..], key.as_bytes());
    }
    assert_eq!(state.callers(), 0, "places freed");
}

/// Two callers answered since the last write: the first to queue again
/// hands the write to the writer task instead of sending alone, the second
/// joins its `get` line meanwhile, and the writer task's one write carries
/// both.
#[test]
fn callers_answered_together_queue_again_into_one_write() {
    let mut state = State::new(4, true);
    for (key, in_flight) in [(b"a", 1), (b"b", 2)] {
        let (_rx, next) = queue_get(&mut state, key, in_flight);
        assert!(matches!(next, Next::Write(_)), "{next:?}");
        assert!(matches!(wrote_all(&mut state), Next::Nothing));
    }
    for key in [b"a", b"b"] {
        let (reply, _) = state.reply();
        reply.unwrap().deliver(Ok(values(&[key])));
    }
    let (rx_c, next) = queue_get(&mut state, b"c", 1);
    assert!(matches!(next, Next::WakeWriter), "{next:?}");
    state.check();
    let (rx_d, next) = queue_get(&mut state, b"d", 2);
    assert!(matches!(next, Next::Nothing), "{next:?}");
    let mut chunk = BytesMut::new();
    assert!(state.writer_take(&mut chunk));
    assert_eq!(&chunk[..], b"get c d\r\n");
    assert_eq!(state.batches, 1);
    state.check();
    assert!(!state.writer_take(&mut chunk), "nothing more to send");
    assert_eq!(state.role, Role::Idle);
    let (reply, _) = state.reply();
    reply.unwrap().deliver(Ok(values(&[b"c", b"d"])));
    for (mut rx, key) in [(rx_c, "c"), (rx_d, "d")] {
        let Ok(Ok(Response::Values(v))) = rx.try_recv() else {
            panic!("{key}: no value")
        };
        assert_eq!(&v[0].key[..], key.as_bytes());
    }
    // Answered together again: the next caller hands over again.
    let (_rx, next) = queue_get(&mut state, b"e", 1);
    assert!(matches!(next, Next::WakeWriter), "{next:?}");
}

/// A lone caller (one answered since the last write) is never held back.
#[test]
fn a_lone_caller_writes_at_once() {
    let mut state = State::new(4, true);
    for key in [b"a", b"b"] {
        let (_rx, next) = queue_get(&mut state, key, 1);
        assert!(matches!(next, Next::Write(_)), "{next:?}");
        assert!(matches!(wrote_all(&mut state), Next::Nothing));
        let (reply, _) = state.reply();
        reply.unwrap().deliver(Ok(values(&[key])));
    }
    // Two answered, but each before the other's write: no handing over.
    let (_rx, next) = queue_get(&mut state, b"c", 1);
    assert!(matches!(next, Next::Write(_)), "{next:?}");
    assert!(matches!(wrote_all(&mut state), Next::Nothing));
}

/// A caller writes at most `CALLER_EXTRA_WRITES` chunks for others after
/// its own: requests without a reply take no place, so a flood of them
/// could otherwise keep it writing; then the writer task takes over.
#[test]
fn a_caller_writes_for_others_a_bounded_number_of_times() {
    let mut state = State::new(4, false);
    let (_a, next) = queue_get(&mut state, b"a", 1);
    let Next::Write(_) = next else { panic!() };
    let quiet_set = quiet_set();
    for _ in 0..CALLER_EXTRA_WRITES {
        assert!(state.queue(&quiet_set, 2, far()).unwrap().is_some());
        let next = wrote_all(&mut state);
        assert!(matches!(next, Next::Write(_)), "{next:?}");
        state.check();
    }
    assert!(state.queue(&quiet_set, 2, far()).unwrap().is_some());
    assert_eq!(state.callers(), 1, "noreply requests take no place");
    assert!(matches!(wrote_all(&mut state), Next::WakeWriter));
    state.check();
}

/// Beyond a few callers in flight, what queued during a caller's write goes
/// to the writer task (which yields first, so more join the batch); a caller
/// whose write the socket did not take whole hands the rest over too.
#[test]
fn under_load_what_queued_meanwhile_goes_to_the_writer_task() {
    let mut state = State::new(4, false);
    let (_a, next) = queue_get(&mut state, b"a", 1);
    let Next::Write(_) = next else { panic!() };
    let rxs: Vec<_> = (0..DIRECT_WRITE_CALLERS)
        .map(|i| queue_get(&mut state, format!("k{i}").as_bytes(), i + 2).0)
        .collect();
    assert!(state.callers() > DIRECT_WRITE_CALLERS);
    assert!(matches!(wrote_all(&mut state), Next::WakeWriter));
    let mut chunk = BytesMut::new();
    assert!(state.writer_take(&mut chunk));
    assert_eq!(chunk.iter().filter(|&&b| b == b'\n').count(), rxs.len());
    state.check();
    // Few callers, but the socket took part of the chunk: the writer task.
    let mut state = State::new(4, false);
    let (_a, next) = queue_get(&mut state, b"a", 1);
    let Next::Write(mut chunk) = next else {
        panic!()
    };
    let (_b, _) = queue_get(&mut state, b"b", 2);
    let rest = chunk.split_off(2);
    assert!(matches!(state.caller_wrote(rest, false), Next::WakeWriter));
    state.check();
}

/// With a batch unanswered, a caller still writes its own request while few
/// requests are in flight; past `DIRECT_WRITE_CALLERS` the writer task does.
#[test]
fn callers_write_directly_only_while_few_requests_are_in_flight() {
    let mut state = State::new(8, false);
    let (_a, next) = queue_get(&mut state, b"a", 1);
    assert!(matches!(next, Next::Write(_)), "{next:?}");
    assert!(matches!(wrote_all(&mut state), Next::Nothing));
    let (_b, next) = queue_get(&mut state, b"b", DIRECT_WRITE_CALLERS);
    assert!(matches!(next, Next::Write(_)), "{next:?}");
    assert!(matches!(wrote_all(&mut state), Next::Nothing));
    let (_c, next) = queue_get(&mut state, b"c", DIRECT_WRITE_CALLERS + 1);
    assert!(matches!(next, Next::WakeWriter), "{next:?}");
    state.check();
}

#[test]
fn under_load_the_writer_task_takes_the_role_and_batches_wait_for_replies() {
    let mut state = State::new(1, false);
    let (_a, next) = queue_get(&mut state, b"a", 1);
    let Next::Write(_) = next else { panic!() };
    assert!(matches!(wrote_all(&mut state), Next::Nothing));
    // One batch unanswered, the cap is 1: requests wait.
    let (_b, next) = queue_get(&mut state, b"b", 10);
    assert!(matches!(next, Next::Nothing));
    let (_c, next) = queue_get(&mut state, b"c", 10);
    assert!(matches!(next, Next::Nothing));
    state.check();
    // The batch's reply hands the role to the writer task.
    let (_, next) = state.reply();
    assert!(matches!(next, Next::WakeWriter));
    let mut chunk = BytesMut::new();
    assert!(state.writer_take(&mut chunk));
    assert_eq!(&chunk[..], b"get b\r\nget c\r\n", "one write for both");
    state.check();
}

#[test]
fn a_partial_write_finishes_before_anything_else_even_at_the_cap() {
    let mut state = State::new(1, false);
    let (_a, next) = queue_get(&mut state, b"alpha", 1);
    let Next::Write(mut chunk) = next else {
        panic!()
    };
    let rest = chunk.split_off(3);
    let (_b, _) = queue_get(&mut state, b"b", 2);
    // The socket took 3 bytes: the rest goes to the writer task first.
    assert!(matches!(state.caller_wrote(rest, false), Next::WakeWriter));
    state.check();
    let mut out = BytesMut::new();
    assert!(state.writer_take(&mut out));
    assert_eq!(
        &out[..],
        b" alpha\r\n",
        "only the front: the batch cap is reached"
    );
    assert!(!state.writer_take(&mut out));
    state.check();
}

#[test]
fn a_failure_reaches_every_waiter_once_and_later_calls_fail() {
    let mut state = State::new(4, true);
    let (rx_a, _) = queue_get(&mut state, b"a", 1);
    let (rx_b, _) = queue_get(&mut state, b"b", 2);
    let keys = [Key::new(b"s").unwrap()];
    let set = Request::Store {
        command: StoreCommand::Set,
        key: keys[0],
        flags: 0,
        exptime: 0,
        data: b"x",
        noreply: false,
    };
    let rx_s = state.queue(&set, 3, far()).unwrap().unwrap().receiver;
    let error = Error::new(ErrorKind::Connection, "gone");
    let replies = state.fail(&error);
    // `a` went out alone (the caller took it); `b` waits in `out`.
    assert_eq!(replies.len(), 3);
    for reply in replies {
        reply.deliver(Err(error.clone()));
    }
    for mut rx in [rx_a, rx_b, rx_s.unwrap()] {
        assert!(rx.try_recv().unwrap().unwrap_err().is_connection());
    }
    let later = state.queue(&Request::Get { keys: &keys }, 1, far());
    assert!(later.unwrap_err().is_connection());
    assert_eq!(state.callers(), 0);
}

/// Callers join an open `get` only within the slack of its first caller's
/// deadline: joins cannot chain a line's deadline later and later.
#[test]
fn a_merged_line_times_out_within_the_slack_of_its_first_caller() {
    let mut state = State::new(1, true);
    let start = crate::clock::now();
    let timeout = std::time::Duration::from_millis(100);
    let mut queue_at = |key: &[u8], after_us: u64| {
        let keys = [Key::new(key).unwrap()];
        let deadline = start + std::time::Duration::from_micros(after_us) + timeout;
        state
            .queue(&Request::Get { keys: &keys }, 8, deadline)
            .unwrap()
    };
    // The first goes out at once; the next ones wait behind it, on one line.
    let _a = queue_at(b"a", 0);
    let _b = queue_at(b"b", 10);
    let _c = queue_at(b"c", 900);
    let _d = queue_at(b"d", 1_800);
    state.check();
    // a alone; b and c on one line; d (1.79 ms after b) on a line of its own.
    assert_eq!(state.waiters.len(), 3);
    assert_eq!(&state.out[..], b"get b c\r\nget d\r\n");
    let line = &state.waiters[1];
    assert!(line.deadline - line.first_deadline <= JOIN_DEADLINE_SLACK);
}

/// Beyond the cap, a caller gets no place and is counted as waiting; a
/// reply frees its callers' places and asks the driver to wake as many of
/// those waiting; a failure frees every place.
#[test]
fn callers_beyond_the_cap_wait_for_a_reply_to_free_a_place() {
    let mut state = State::new(4, false).with_max_callers(2);
    let (_a, _) = queue_get(&mut state, b"a", 1);
    let (_b, _) = queue_get(&mut state, b"b", 2);
    assert_eq!(state.callers(), 2);
    let keys = [Key::new(b"c").unwrap()];
    let get_c = Request::Get { keys: &keys };
    assert!(state.queue(&get_c, 3, far()).unwrap().is_none(), "no place");
    assert!(state.queue(&get_c, 3, far()).unwrap().is_none(), "no place");
    assert_eq!(state.take_room_wakes(), 0, "nothing freed yet");
    // The caller writes `b` too; `a`'s reply frees one place: one waiter is
    // to be woken.
    let next = wrote_all(&mut state);
    assert!(matches!(next, Next::Write(_)), "{next:?}");
    assert!(matches!(wrote_all(&mut state), Next::Nothing));
    let (reply, _) = state.reply();
    assert!(reply.is_some());
    assert_eq!(state.callers(), 1);
    assert_eq!(state.take_room_wakes(), 1);
    assert_eq!(state.take_room_wakes(), 0, "told once");
    // It tries again and gets the place; the other still waits.
    state.leave_room_queue();
    assert!(state.queue(&get_c, 2, far()).unwrap().is_some());
    state.check();
    assert_eq!(state.callers(), 2);
    // A failure frees every place: the one still waiting finds it closed.
    state.fail(&Error::new(ErrorKind::Connection, "gone"));
    assert_eq!(state.callers(), 0);
    state.leave_room_queue();
    assert!(state.queue(&get_c, 1, far()).unwrap_err().is_connection());
}

/// Requests without a reply take no place: they never wait for one. A
/// waiter that gets a place while more are free and others wait passes the
/// wake on (two places freed before the waiters listened wake only one).
#[test]
fn noreply_requests_never_wait_and_wakes_are_passed_on() {
    let mut state = State::new(4, false).with_max_callers(2);
    let (_a, _) = queue_get(&mut state, b"a", 1);
    let (_b, _) = queue_get(&mut state, b"b", 2);
    let keys = [Key::new(b"n").unwrap()];
    let quiet_set = quiet_set();
    let queued = state.queue(&quiet_set, 3, far()).unwrap();
    assert!(
        queued.is_some_and(|q| q.receiver.is_none()),
        "a noreply set is queued at once"
    );
    assert_eq!(state.callers(), 2);
    let get_c = Request::Get { keys: &keys };
    assert!(state.queue(&get_c, 3, far()).unwrap().is_none());
    assert!(state.queue(&get_c, 3, far()).unwrap().is_none());
    // The caller writes the rest too; both replies free their places: two
    // wakes asked for.
    let next = wrote_all(&mut state);
    assert!(matches!(next, Next::Write(_)), "{next:?}");
    assert!(matches!(wrote_all(&mut state), Next::Nothing));
    assert!(state.reply().0.is_some());
    assert!(state.reply().0.is_some());
    assert_eq!(state.take_room_wakes(), 2);
    // Only one wake got through; its caller takes a place, sees one more
    // free and a caller still waiting, and passes the wake on.
    state.leave_room_queue();
    assert!(state.queue(&get_c, 1, far()).unwrap().is_some());
    assert_eq!(state.take_room_wakes(), 1, "the wake passed on");
    state.check();
}

/// A caller that took the reader role may read for everyone while the
/// reader task holds it, but not once the role went idle or to a later
/// caller (it would deliver that caller's reply behind its back).
#[test]
fn a_caller_reads_only_while_the_role_is_its_own_or_the_tasks() {
    let mut state = State::new(4, false);
    let keys = [Key::new(b"a").unwrap()];
    let get = Request::Get { keys: &keys };
    let first = state.queue(&get, 1, far()).unwrap().unwrap();
    let epoch = first.reads.expect("the lone caller reads");
    assert!(state.may_read(epoch));
    let second = state.queue(&get, 2, far()).unwrap().unwrap();
    assert!(second.wake_reader, "the reader task takes the role");
    assert!(
        state.may_read(epoch),
        "reading for everyone while the task holds the role"
    );
    let next = wrote_all(&mut state);
    assert!(
        matches!(next, Next::Write(_)),
        "the caller writes the second too"
    );
    assert!(matches!(wrote_all(&mut state), Next::Nothing));
    assert!(state.reply().0.is_some());
    assert!(state.reply().0.is_some());
    assert!(state.reader_task_done(), "no reply due: the role goes idle");
    assert!(!state.may_read(epoch));
    let third = state.queue(&get, 1, far()).unwrap().unwrap();
    let later = third.reads.expect("a new lone caller");
    assert!(!state.may_read(epoch), "the bytes are the later caller's");
    assert!(state.may_read(later));
}

// ---- random interleavings ------------------------------------------------------------

/// One step of the simulation.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// A caller queues `get key<k>`.
    Get(u8),
    /// A caller queues a `set` (with `noreply` when true).
    Set(u8, bool),
    /// The caller holding the role writes; the socket takes up to this many
    /// bytes, or (when true, as over TLS) the transport takes the whole chunk
    /// and the socket none of it yet.
    CallerWrites(usize, bool),
    /// The writer task runs one step; the socket takes up to this many bytes.
    WriterRuns(usize),
    /// The server answers what it has read.
    Serve,
    /// The reader decodes one reply.
    Read,
    /// The server answers what it has read, and the reader decodes every
    /// reply (one read of the socket taking several).
    ReadAll,
    /// The oldest still-waiting caller gives up (drops its receiver).
    GiveUp,
    /// The reader role's holder checks whether it is done: a caller when its
    /// reply is in, the reader task when no reply is due.
    ReaderDone,
    /// This many milliseconds pass; the timer expires what is due.
    Tick(u64),
    /// The connection breaks.
    Fail,
}

/// Every simulated request's timeout.
const TIMEOUT: std::time::Duration = std::time::Duration::from_millis(10);

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..12).prop_map(Step::Get),
        1 => (0u8..12, any::<bool>()).prop_map(|(k, n)| Step::Set(k, n)),
        3 => (1usize..40, proptest::bool::weighted(0.2))
            .prop_map(|(n, owed)| Step::CallerWrites(n, owed)),
        3 => (1usize..40).prop_map(Step::WriterRuns),
        2 => Just(Step::Serve),
        3 => Just(Step::Read),
        2 => Just(Step::ReadAll),
        1 => Just(Step::GiveUp),
        2 => Just(Step::ReaderDone),
        1 => (1u64..8).prop_map(Step::Tick),
        1 => Just(Step::Fail).prop_filter("rare", |_| true),
    ]
}

/// What a caller waits for.
struct Caller {
    /// `Some(key)` for a get, `None` for a set.
    get: Option<Vec<u8>>,
    rx: Option<Rx>,
}

#[derive(Default)]
struct Sim {
    /// The chunk the caller holding the role is writing.
    caller_chunk: Option<BytesMut>,
    /// Whether the writer task holds the role, and the chunk it is writing.
    writer: bool,
    writer_chunk: BytesMut,
    /// Bytes the transport took from a caller and the socket did not (TLS
    /// records in rustls): they go before anything the writer sends next.
    held: Vec<u8>,
    /// Bytes on the wire the server has not read.
    wire: Vec<u8>,
    /// Replies the server sent, not yet decoded by the reader.
    replies: VecDeque<Response>,
    callers: Vec<Caller>,
    /// Callers that took the reader role (index, epoch) and still read until
    /// their own reply is in.
    caller_readers: Vec<(usize, u64)>,
    /// Whether the reader task holds the role.
    task_reads: bool,
    failed: bool,
    /// When the simulation started, and the time passed since.
    start: Option<std::time::Instant>,
    elapsed: std::time::Duration,
}

impl Sim {
    /// The simulated clock.
    fn now(&mut self) -> std::time::Instant {
        *self.start.get_or_insert_with(crate::clock::now) + self.elapsed
    }

    fn follow(&mut self, state: &State, next: Next) {
        match next {
            Next::Nothing => {}
            Next::Write(chunk) => {
                assert!(self.caller_chunk.is_none() && !self.writer, "two writers");
                self.caller_chunk = Some(chunk);
            }
            Next::WakeWriter => {
                assert!(!self.writer, "the writer task woken twice");
                self.writer = true;
            }
        }
        self.check_role(state);
    }

    /// The state's role is the party the simulation sees writing.
    fn check_role(&self, state: &State) {
        let role = if self.caller_chunk.is_some() {
            Role::Caller
        } else if self.writer {
            Role::Writer
        } else {
            Role::Idle
        };
        if !self.failed {
            assert_eq!(state.role, role);
            let read_role = if self.task_reads {
                ReadRole::Task
            } else if self
                .caller_readers
                .iter()
                .any(|&(_, e)| e == state.read_epoch)
            {
                ReadRole::Caller
            } else {
                ReadRole::Idle
            };
            assert_eq!(state.read_role, read_role);
        }
    }

    /// Caller reader `k` (an index into `caller_readers`) stops reading.
    fn release_reader(&mut self, state: &mut State, k: usize) {
        let (_, epoch) = self.caller_readers.remove(k);
        if state.reader_release(epoch) {
            assert!(!self.task_reads, "the reader task woken twice");
            self.task_reads = true;
        }
    }

    /// Whether anybody reads the socket.
    fn someone_reads(&self) -> bool {
        self.task_reads || !self.caller_readers.is_empty()
    }

    /// The server: parses whole requests off the wire and answers them, every
    /// `get` key a hit whose value is the key.
    fn serve(&mut self) {
        loop {
            let Some(eol) = self.wire.windows(2).position(|w| w == b"\r\n") else {
                return;
            };
            let line = String::from_utf8(self.wire[..eol].to_vec()).unwrap();
            let words: Vec<&str> = line.split(' ').collect();
            match words[0] {
                "get" => {
                    let keys: Vec<&[u8]> = words[1..].iter().map(|w| w.as_bytes()).collect();
                    self.replies.push_back(values(&keys));
                    self.wire.drain(..eol + 2);
                }
                "set" => {
                    let len: usize = words[4].parse().unwrap();
                    if self.wire.len() < eol + 2 + len + 2 {
                        return;
                    }
                    if words.get(5) != Some(&"noreply") {
                        self.replies.push_back(Response::Stored);
                    }
                    self.wire.drain(..eol + 2 + len + 2);
                }
                other => panic!("unexpected command {other:?}"),
            }
        }
    }

    fn apply(&mut self, state: &mut State, step: Step) {
        match step {
            Step::Get(k) | Step::Set(k, _) if !self.failed => {
                let key = format!("key{k}");
                let keys = [Key::new(key.as_bytes()).unwrap()];
                let request = match step {
                    Step::Set(_, noreply) => Request::Store {
                        command: StoreCommand::Set,
                        key: keys[0],
                        flags: 0,
                        exptime: 0,
                        data: b"xyz",
                        noreply,
                    },
                    _ => Request::Get { keys: &keys },
                };
                let in_flight = state.callers() + 1;
                let deadline = self.now() + TIMEOUT;
                let queued = state
                    .queue(&request, in_flight, deadline)
                    .unwrap()
                    .expect("no cap in this test");
                if let Some(epoch) = queued.reads {
                    assert!(!self.someone_reads(), "a caller read while others did");
                    self.caller_readers.push((self.callers.len(), epoch));
                }
                if queued.wake_reader {
                    assert!(!self.task_reads, "the reader task woken twice");
                    self.task_reads = true;
                }
                if let Some(rx) = queued.receiver {
                    let get = matches!(step, Step::Get(_)).then(|| get(key.as_bytes()));
                    self.callers.push(Caller { get, rx: Some(rx) });
                }
                self.follow(state, queued.next);
            }
            Step::CallerWrites(n, owed) => {
                if let Some(mut chunk) = self.caller_chunk.take() {
                    let next = if owed {
                        self.held.extend_from_slice(&chunk.split());
                        state.caller_wrote(chunk, true)
                    } else {
                        let n = n.min(chunk.len());
                        self.wire.extend_from_slice(&chunk.split_to(n));
                        state.caller_wrote(chunk, false)
                    };
                    self.follow(state, next);
                }
            }
            Step::WriterRuns(n) => {
                if !self.writer {
                    return;
                }
                if self.writer_chunk.is_empty() {
                    let mut chunk = std::mem::take(&mut self.writer_chunk);
                    let held = !self.held.is_empty();
                    if state.writer_take(&mut chunk) {
                        // Its send flushes the held bytes first.
                        self.wire.append(&mut self.held);
                        assert!(!chunk.is_empty() || held, "the writer took nothing");
                        self.writer_chunk = chunk;
                    } else {
                        self.writer = false;
                    }
                } else {
                    let n = n.min(self.writer_chunk.len());
                    self.wire.extend_from_slice(&self.writer_chunk.split_to(n));
                }
                self.check_role(state);
            }
            Step::Tick(ms) => {
                self.elapsed += std::time::Duration::from_millis(ms);
                let now = self.now();
                if state.armed().is_some_and(|at| at <= now) {
                    let error = Error::new(ErrorKind::Timeout, "simulated");
                    state.expire(now, &error);
                }
            }
            // After a failure the socket is gone: nothing moves any more.
            _ if self.failed => {}
            Step::Serve => self.serve(),
            Step::ReadAll => {
                self.serve();
                while !self.replies.is_empty() && self.someone_reads() && !self.failed {
                    self.apply(state, Step::Read);
                }
            }
            Step::Read => {
                if !self.someone_reads() {
                    // Nobody reads: then no reply may be due.
                    assert!(self.replies.is_empty(), "replies with no reader");
                    return;
                }
                if let Some(reply) = self.replies.pop_front() {
                    let (to, next) = state.reply();
                    to.expect("a reply has a waiter").deliver(Ok(reply));
                    self.follow(state, next);
                }
            }
            Step::GiveUp => {
                if let Some(i) = self.callers.iter().position(|c| c.rx.is_some()) {
                    self.callers[i].rx = None;
                    if let Some(k) = self.caller_readers.iter().position(|&(c, _)| c == i) {
                        self.release_reader(state, k);
                    }
                }
            }
            Step::ReaderDone => {
                // A reading caller stops once its own reply is in.
                let done = self.caller_readers.iter().position(|&(i, _)| {
                    self.callers[i].rx.as_ref().is_none_or(|rx| !rx.is_empty())
                });
                if let Some(k) = done {
                    self.release_reader(state, k);
                } else if self.task_reads && state.reader_task_done() {
                    self.task_reads = false;
                }
            }
            Step::Fail if !self.failed => {
                self.failed = true;
                let error = Error::new(ErrorKind::Connection, "broken");
                for reply in state.fail(&error) {
                    reply.deliver(Err(error.clone()));
                }
                self.caller_chunk = None;
                self.writer = false;
                while !self.caller_readers.is_empty() {
                    self.release_reader(state, 0);
                }
                self.task_reads = false;
            }
            _ => {}
        }
        if !self.failed {
            state.check();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the interleaving: one writer at a time, nothing queued left
    /// without a writer, every caller answered with its own reply (or, after
    /// a failure, the error) exactly once, and every place freed.
    #[test]
    fn any_interleaving_keeps_the_invariants(
        steps in proptest::collection::vec(step(), 1..200),
        max_batches in 1usize..4,
        merge in any::<bool>(),
        // Unbounded (plaintext), or a bound of a few requests (TLS's bound
        // scaled down to the simulation's small requests).
        max_unanswered in prop_oneof![Just(usize::MAX), 1usize..80],
    ) {
        let mut state = State::new(max_batches, merge);
        if max_unanswered != usize::MAX {
            state = state.with_max_unanswered_bytes(max_unanswered);
        }
        let mut sim = Sim::default();
        for s in steps {
            sim.apply(&mut state, s);
        }
        // Quiesce: every party runs until nobody can move. If something were
        // queued with nobody to write it, a caller would stay unanswered.
        for _ in 0..10_000 {
            sim.apply(&mut state, Step::CallerWrites(usize::MAX, false));
            sim.apply(&mut state, Step::WriterRuns(usize::MAX));
            sim.apply(&mut state, Step::Serve);
            sim.apply(&mut state, Step::Read);
            sim.apply(&mut state, Step::ReaderDone);
            if sim.caller_chunk.is_none()
                && !sim.writer
                && sim.replies.is_empty()
                && !sim.someone_reads()
            {
                break;
            }
        }
        if !sim.failed {
            prop_assert!(sim.wire.is_empty(), "the server read everything");
            prop_assert!(sim.held.is_empty(), "held bytes were flushed");
            prop_assert_eq!(state.batches, 0);
            prop_assert_eq!(state.role, Role::Idle);
            prop_assert_eq!(state.read_role, ReadRole::Idle);
            prop_assert!(state.waiters.is_empty());
        }
        for caller in &mut sim.callers {
            let Some(rx) = caller.rx.as_mut() else { continue };
            let got = rx.try_recv();
            match (&caller.get, got) {
                (_, Ok(Err(e))) => prop_assert!((sim.failed && e.is_connection()) || e.is_timeout()),
                (Some(key), Ok(Ok(Response::Values(v)))) => {
                    prop_assert_eq!(v.len(), 1);
                    prop_assert_eq!(&v[0].key[..], &key[..], "another caller's value");
                }
                (None, Ok(Ok(Response::Stored))) => {}
                (want, got) => prop_assert!(false, "{want:?}: {got:?}"),
            }
        }
        prop_assert_eq!(state.callers(), 0);
    }
}
