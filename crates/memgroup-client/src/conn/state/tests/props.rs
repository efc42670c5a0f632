//! The property test: random interleavings of callers, the writer task,
//! the socket, the server and the reader, every invariant checked after each
//! step.

use std::collections::VecDeque;

use bytes::BytesMut;
use memgroup_proto::{Key, Request, Response, StoreCommand};
use proptest::prelude::*;

use super::super::*;
use super::{Rx, get, values};
use crate::error::ErrorKind;

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
    /// `None` once it gave up.
    rx: Option<Rx>,
    /// Its reply, once it looked and found it.
    reply: Option<Result<Response, Error>>,
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
    /// Replies read for callers reading their own, by epoch, until they look.
    own: Vec<(u64, Result<Response, Error>)>,
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

    /// Caller `i` looks for its reply (on its channel, in what its read
    /// handed it, or in what the state kept for it).
    fn look(&mut self, state: &mut State, i: usize) {
        let caller = &mut self.callers[i];
        if let (None, Some(rx)) = (&caller.reply, caller.rx.as_mut()) {
            caller.reply = rx.got(state, &mut self.own);
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
                let mut queued = state
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
                if queued.reads.is_some() || queued.receiver.is_some() {
                    let get = matches!(step, Step::Get(_)).then(|| get(key.as_bytes()));
                    let rx = Some(Rx::of(&mut queued));
                    self.callers.push(Caller {
                        get,
                        rx,
                        reply: None,
                    });
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
                    let reading = (state.read_role == ReadRole::Caller).then_some(state.read_epoch);
                    let (to, next) = state.reply();
                    match to.expect("a reply has a waiter") {
                        // Read by its own caller, or (it gave up) dropped.
                        Reply::Own(epoch) => {
                            let live = self.callers.iter().any(|c| {
                                matches!(c.rx, Some(Rx::Own(e)) if e == epoch) && c.reply.is_none()
                            });
                            if live {
                                assert_eq!(reading, Some(epoch), "its own reply read by another");
                                self.own.push((epoch, Ok(reply)));
                            }
                        }
                        to => to.deliver(Ok(reply)),
                    }
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
                for k in 0..self.caller_readers.len() {
                    self.look(state, self.caller_readers[k].0);
                }
                let done = self.caller_readers.iter().position(|&(i, _)| {
                    let caller = &self.callers[i];
                    caller.rx.is_none() || caller.reply.is_some()
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
                // Woken, the reading callers look before they let the role go.
                for k in 0..self.caller_readers.len() {
                    self.look(state, self.caller_readers[k].0);
                }
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
        for i in 0..sim.callers.len() {
            sim.look(&mut state, i);
            let caller = &mut sim.callers[i];
            if caller.rx.is_none() {
                continue;
            }
            match (&caller.get, caller.reply.take()) {
                (_, Some(Err(e))) => prop_assert!((sim.failed && e.is_connection()) || e.is_timeout()),
                (Some(key), Some(Ok(Response::Values(v)))) => {
                    prop_assert_eq!(v.len(), 1);
                    prop_assert_eq!(&v[0].key[..], &key[..], "another caller's value");
                }
                (None, Some(Ok(Response::Stored))) => {}
                (want, got) => prop_assert!(false, "{want:?}: {got:?}"),
            }
        }
        prop_assert_eq!(state.callers(), 0);
        prop_assert!(state.kept.is_empty(), "nothing kept for callers gone");
    }
}
