//! The connection state machine, driven without sockets: unit tests of each
//! transition and a property test over random interleavings of callers, the
//! writer task, the socket, the server and the reader.

use bytes::{Bytes, BytesMut};
use memgroup_proto::{Key, Request, Response, StoreCommand, Value, Values};
use tokio::sync::oneshot;

use super::*;
use crate::error::ErrorKind;

type Channel = oneshot::Receiver<Result<Response, Error>>;

/// Where a test caller's reply comes: a channel, or (the caller that took
/// the reader role) its own read, handed over as [`Reply::Own`], or what
/// the state keeps for it ([`State::watch_reader`]).
#[derive(Debug)]
enum Rx {
    Channel(Channel),
    Own(u64),
}

impl Rx {
    /// Where the reply of the request `queued` comes.
    fn of(queued: &mut Queued) -> Rx {
        match queued.reads {
            Some(epoch) => {
                assert!(queued.receiver.is_none(), "no channel for its own reply");
                Rx::Own(epoch)
            }
            None => Rx::Channel(queued.receiver.take().expect("a reply")),
        }
    }

    /// The reply, once in: from the channel, from the replies read for
    /// callers reading their own (`own`, by epoch), or kept by the state.
    fn got(
        &mut self,
        state: &mut State,
        own: &mut Vec<(u64, Result<Response, Error>)>,
    ) -> Option<Result<Response, Error>> {
        if let Rx::Own(epoch) = *self {
            if let Some(at) = own.iter().position(|(e, _)| *e == epoch) {
                return Some(own.swap_remove(at).1);
            }
            match state.watch_reader(epoch, std::task::Waker::noop()) {
                Watch::Kept(Kept::Handed(channel)) => *self = Rx::Channel(channel),
                Watch::Kept(Kept::Failed(error)) => return Some(Err(error)),
                Watch::Reading | Watch::Gone => return None,
            }
        }
        match self {
            Rx::Channel(channel) => channel.try_recv().ok(),
            Rx::Own(_) => None,
        }
    }
}

/// Hands `reply` to `to`: a caller reading its own gets it from its read
/// (into `own`).
fn deliver(
    to: Reply,
    reply: Result<Response, Error>,
    own: &mut Vec<(u64, Result<Response, Error>)>,
) {
    match to {
        Reply::Own(epoch) => own.push((epoch, reply)),
        to => to.deliver(reply),
    }
}

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
    let mut queued = state
        .queue(&Request::Get { keys: &keys }, in_flight, far())
        .unwrap()
        .expect("a place");
    (Rx::of(&mut queued), queued.next)
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
    let own = &mut Vec::new();
    let (reply, _) = state.reply();
    deliver(reply.unwrap(), Ok(values(&[b"a"])), own);
    let (reply, _) = state.reply();
    deliver(reply.unwrap(), Ok(values(&[b"c", b"b"])), own);
    state.check();
    assert!(
        own.is_empty(),
        "`a`'s caller waits on a channel once `b` queued"
    );
    for (mut rx, key) in [(rx_a, "a"), (rx_b, "b"), (rx_b2, "b"), (rx_c, "c")] {
        let Some(Ok(Response::Values(v))) = rx.got(&mut state, own) else {
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
    let own = &mut Vec::new();
    let (reply, _) = state.reply();
    deliver(reply.unwrap(), Ok(values(&[b"c", b"d"])), own);
    for (mut rx, key) in [(rx_c, "c"), (rx_d, "d")] {
        let Some(Ok(Response::Values(v))) = rx.got(&mut state, own) else {
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
    let rx_s = Rx::of(&mut state.queue(&set, 3, far()).unwrap().unwrap());
    let error = Error::new(ErrorKind::Connection, "gone");
    let replies = state.fail(&error);
    // `a` went out alone (the caller took it; its reply now on a channel, as
    // `b` queued); `b` waits in `out`.
    assert_eq!(replies.len(), 3);
    for reply in replies {
        reply.deliver(Err(error.clone()));
    }
    for mut rx in [rx_a, rx_b, rx_s] {
        let got = rx.got(&mut state, &mut Vec::new());
        assert!(got.unwrap().unwrap_err().is_connection());
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
        queued.is_some_and(|q| q.receiver.is_none() && q.reads.is_none()),
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

/// A lone caller reads its own reply: no channel; its read hands the reply
/// over ([`Reply::Own`]). Its timeout, or a failure, is kept for it until it
/// looks; once it gave up, its reply is dropped and nothing is kept.
#[test]
fn a_lone_caller_gets_its_reply_from_its_own_read() {
    let mut state = State::new(4, false);
    let (rx, _) = queue_get(&mut state, b"a", 1);
    let Rx::Own(epoch) = rx else {
        panic!("a channel for a lone caller: {rx:?}")
    };
    assert!(matches!(wrote_all(&mut state), Next::Nothing));
    let (reply, _) = state.reply();
    assert!(matches!(reply, Some(Reply::Own(e)) if e == epoch));
    assert!(!state.reader_release(epoch), "nothing more due");

    // Timed out: kept for it, the late reply dropped.
    let start = crate::clock::now();
    let keys = [Key::new(b"b").unwrap()];
    let mut queued = state
        .queue(&Request::Get { keys: &keys }, 1, start)
        .unwrap()
        .unwrap();
    let mut rx = Rx::of(&mut queued);
    let Rx::Own(epoch) = rx else { panic!() };
    assert!(matches!(wrote_all(&mut state), Next::Nothing));
    let error = Error::new(ErrorKind::Timeout, "late");
    assert!(state.expire(start, &error).is_none(), "no waker left yet");
    let got = rx.got(&mut state, &mut Vec::new());
    assert!(got.unwrap().unwrap_err().is_timeout());
    assert!(matches!(state.reply().0, Some(Reply::One(None))), "dropped");
    state.reader_release(epoch);
    state.check();

    // Gave up: released, its reply read by the task is dropped, and its
    // timeout keeps nothing.
    let (rx, _) = queue_get(&mut state, b"c", 1);
    let Rx::Own(epoch) = rx else { panic!() };
    assert!(matches!(wrote_all(&mut state), Next::Nothing));
    assert!(state.reader_release(epoch), "the task reads what is due");
    state.expire(far() + std::time::Duration::from_secs(1), &error);
    assert!(state.kept.is_empty());
    assert!(matches!(state.reply().0, Some(Reply::One(None))));
    assert!(state.reader_task_done());

    // Failed while it reads: the error kept for it.
    let (mut rx, _) = queue_get(&mut state, b"d", 1);
    let Rx::Own(epoch) = rx else { panic!() };
    assert!(
        state
            .fail(&Error::new(ErrorKind::Connection, "gone"))
            .is_empty()
    );
    let got = rx.got(&mut state, &mut Vec::new());
    assert!(got.unwrap().unwrap_err().is_connection());
    state.reader_release(epoch);
    assert!(state.kept.is_empty());
}

mod props;
