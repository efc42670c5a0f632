//! Concurrent single-key `get`s (or `gets`) queued on one connection join
//! into one multi-key command, the way spymemcached optimises its get queue:
//! `get a` and `get b` waiting to be written become `get a b`.
//!
//! memcached answers every classic retrieval command with its own `write`,
//! so 32 pipelined `get`s cost the server 32 `sendmsg` calls and the client
//! up to 32 socket reads and wake-ups; one `get` of 32 keys costs one of each.
//! The replies are the same: each caller gets its own key's value, or a miss.
//!
//! A key asked for twice in one merged command goes on the wire once and its
//! value is handed to both callers, so the result does not depend on whether
//! the server (or a proxy in between) repeats or folds duplicate keys. Values
//! are matched to callers by key, not position, so a proxy that reorders a
//! multi-get's values is also fine.

use memgroup_proto::{Response, Values};
use tokio::sync::oneshot;

use crate::error::Error;

/// Where a caller's reply goes.
pub(crate) type ReplyTx = oneshot::Sender<Result<Response, Error>>;

/// The line itself grows in the output buffer as a
/// [`GrowingRetrieval`](memgroup_proto::GrowingRetrieval), which bounds its
/// keys and length; this module only tracks who gets which value.
/// The callers of one merged retrieval command.
#[derive(Debug)]
pub(crate) struct Merged {
    /// Every distinct key of the command, concatenated.
    keys: Vec<u8>,
    entries: Vec<Entry>,
    /// A 256-bit filter of the keys, so checking for a duplicate rarely
    /// compares keys.
    filter: [u64; 4],
    /// Some key has more than one caller.
    dups: bool,
}

#[derive(Debug)]
struct Entry {
    /// The key's range in `keys`.
    start: u32,
    end: u32,
    /// Taken when the reply is delivered.
    reply: Option<ReplyTx>,
}

/// A key looked up in a [`Merged`] command ([`Merged::lookup`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lookup {
    /// The key's range in the command's `keys`, when some caller asked for it.
    found: Option<(u32, u32)>,
    /// Its bit in the duplicate filter.
    word: usize,
    bit: u64,
}

impl Lookup {
    /// Whether some caller already asked for the key (it is on the line).
    pub(crate) fn found(&self) -> bool {
        self.found.is_some()
    }
}

/// The indices `0..n` starting at `from` and wrapping around: where a reply's
/// values are looked up among the keys asked for. Values come back in request
/// order, so starting after the last match usually finds the next at once.
pub(crate) fn circular(from: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |step| (from + step) % n)
}

/// The key's bit in the duplicate filter: every byte of the key, eight at a
/// time (the last word zero-padded), and its length, each word mixed in by a
/// multiplication; the top byte taken. Nothing but the filter depends on it.
fn filter_bit(key: &[u8]) -> (usize, u64) {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |h: u64, word: u64| (h ^ word).wrapping_mul(K).rotate_left(29);
    let mut h = key.len() as u64;
    let mut words = key.chunks_exact(8);
    for word in &mut words {
        h = mix(h, u64::from_le_bytes(word.try_into().expect("eight bytes")));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(last));
    }
    let bit = (h.wrapping_mul(K) >> 56) as usize; // 0..256
    (bit / 64, 1 << (bit % 64))
}

impl Merged {
    /// A merged command whose first caller asked for `key`.
    pub(crate) fn new(key: &[u8], reply: ReplyTx) -> Merged {
        let mut merged = Merged {
            // Room for the callers a busy connection merges without
            // growing (a line takes up to tens of keys).
            keys: Vec::with_capacity(key.len() * 16),
            entries: Vec::with_capacity(16),
            filter: [0; 4],
            dups: false,
        };
        merged.add(key, reply);
        merged
    }

    /// How many callers it has (each holds its place on the connection until
    /// the reply arrives).
    pub(crate) fn callers(&self) -> usize {
        self.entries.len()
    }

    /// Where `key` stands in the command: its range in `keys` if some caller
    /// already asked for it (so it is on the line), and its filter bit. Look
    /// it up once and hand the result to [`Merged::add_looked_up`]: the hash
    /// and the comparison are not done twice.
    pub(crate) fn lookup(&self, key: &[u8]) -> Lookup {
        let (word, bit) = filter_bit(key);
        let found = if self.filter[word] & bit == 0 {
            None
        } else {
            self.entries
                .iter()
                .find(|e| &self.keys[e.start as usize..e.end as usize] == key)
                .map(|e| (e.start, e.end))
        };
        Lookup { found, word, bit }
    }

    /// Adds a caller asking for `key`. Returns whether the key is new to the
    /// command (and so must be appended to the command line).
    pub(crate) fn add(&mut self, key: &[u8], reply: ReplyTx) -> bool {
        let lookup = self.lookup(key);
        self.add_looked_up(key, lookup, reply)
    }

    /// [`Merged::add`] with `key` already looked up (in this command, with
    /// no caller added since).
    pub(crate) fn add_looked_up(&mut self, key: &[u8], lookup: Lookup, reply: ReplyTx) -> bool {
        let (start, end, new) = match lookup.found {
            Some((start, end)) => {
                self.dups = true;
                (start, end, false)
            }
            None => {
                self.filter[lookup.word] |= lookup.bit;
                let start = self.keys.len() as u32;
                self.keys.extend_from_slice(key);
                (start, self.keys.len() as u32, true)
            }
        };
        self.entries.push(Entry {
            start,
            end,
            reply: Some(reply),
        });
        new
    }

    /// Every caller still waiting gets `error` now; their places on the
    /// connection stay held until the reply itself arrives (and is dropped).
    pub(crate) fn time_out(&mut self, error: &Error) {
        for entry in &mut self.entries {
            if let Some(tx) = entry.reply.take() {
                let _ = tx.send(Err(error.clone()));
            }
        }
    }

    /// Hands each caller its part of the command's reply: its key's value or
    /// a miss (an empty `Values`). An error reply or a failure goes to every
    /// caller.
    pub(crate) fn deliver(mut self, reply: Result<Response, Error>) {
        let values = match reply {
            Ok(Response::Values(values)) => values,
            other => {
                for entry in &mut self.entries {
                    if let Some(tx) = entry.reply.take() {
                        let _ = tx.send(other.clone());
                    }
                }
                return;
            }
        };
        let n = self.entries.len();
        // Values come in request order from memcached: scanning on from the
        // last match finds the next one at once. A value for a key nobody
        // (still) waits for, which a well-behaved server never sends, is
        // dropped.
        let mut cursor = 0;
        for value in values {
            // Moved to its caller; copied only when a key has several (each
            // copy of its bytes is an atomic count on the read buffer, shared
            // with the callers on other threads).
            let mut value = Some(value);
            for i in circular(cursor, n) {
                let Some(key) = value.as_ref().map(|v| &v.key) else {
                    break;
                };
                let entry = &mut self.entries[i];
                if entry.reply.is_none()
                    || self.keys[entry.start as usize..entry.end as usize] != key[..]
                {
                    continue;
                }
                if let Some(tx) = entry.reply.take() {
                    let mut one = Values::new();
                    one.push(if self.dups {
                        value.clone().expect("a value in hand")
                    } else {
                        value.take().expect("a value in hand")
                    });
                    let _ = tx.send(Ok(Response::Values(one)));
                }
                cursor = i + 1;
                if !self.dups {
                    break;
                }
            }
        }
        for entry in &mut self.entries {
            if let Some(tx) = entry.reply.take() {
                let _ = tx.send(Ok(Response::Values(Values::new())));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use memgroup_proto::Value;

    use super::*;
    use crate::error::ErrorKind;

    type Rx = oneshot::Receiver<Result<Response, Error>>;

    /// A merged command for `keys`, in caller order, and each caller's receiver.
    fn merged(keys: &[&str]) -> (Merged, Vec<Rx>, Vec<bool>) {
        let mut rxs = Vec::new();
        let mut sent = Vec::new();
        let mut merged: Option<Merged> = None;
        for key in keys {
            let (tx, rx) = oneshot::channel();
            rxs.push(rx);
            match &mut merged {
                None => {
                    merged = Some(Merged::new(key.as_bytes(), tx));
                    sent.push(true);
                }
                Some(m) => sent.push(m.add(key.as_bytes(), tx)),
            }
        }
        let merged = merged.unwrap();
        assert_eq!(merged.callers(), keys.len());
        (merged, rxs, sent)
    }

    fn value(key: &str) -> Value {
        Value {
            key: Bytes::copy_from_slice(key.as_bytes()),
            flags: 7,
            cas: Some(1),
            data: Bytes::from(format!("value of {key}")),
        }
    }

    fn values(keys: &[&str]) -> Result<Response, Error> {
        Ok(Response::Values(
            keys.iter().map(|k| value(k)).collect::<Vec<_>>().into(),
        ))
    }

    /// What each caller received: `Some(key)` for a value (checked to be that
    /// key's), `None` for a miss.
    fn outcomes(rxs: Vec<Rx>) -> Vec<Option<String>> {
        rxs.into_iter()
            .map(
                |mut rx| match rx.try_recv().expect("every caller is answered") {
                    Ok(Response::Values(v)) => {
                        assert!(v.len() <= 1);
                        v.first().map(|v| {
                            let key = String::from_utf8(v.key.to_vec()).unwrap();
                            assert_eq!(v.data, format!("value of {key}").as_bytes());
                            key
                        })
                    }
                    other => panic!("unexpected {other:?}"),
                },
            )
            .collect()
    }

    fn some(keys: &[&str]) -> Vec<Option<String>> {
        keys.iter()
            .map(|k| (!k.is_empty()).then(|| k.to_string()))
            .collect()
    }

    /// Keys that differ in one place only — at their end (`prefix:number`)
    /// or in their middle (`user:number:profile`), short or long — spread
    /// over the filter: a duplicate check then rarely compares keys.
    #[test]
    fn the_filter_spreads_keys_that_differ_in_one_place() {
        let patterns: [(&str, &str); 5] = [
            ("k", ""),
            ("key:", ""),
            ("user:session:0000", ""),
            ("user:", ":profile"),
            ("tenant:0000000042:user:", ":settings:v2"),
        ];
        for (prefix, suffix) in patterns {
            let bits: std::collections::HashSet<(usize, u64)> = (0..32)
                .map(|i| filter_bit(format!("{prefix}{i:05}{suffix}").as_bytes()))
                .collect();
            // 32 keys thrown at 256 bits at random fill about 30 of them.
            assert!(
                bits.len() >= 24,
                "{prefix}…{suffix}: {} bits for 32 keys",
                bits.len()
            );
        }
    }

    #[test]
    fn values_in_order_with_misses() {
        let (m, rxs, sent) = merged(&["a", "bb", "c", "d"]);
        assert_eq!(sent, [true; 4]);
        m.deliver(values(&["a", "c"]));
        assert_eq!(outcomes(rxs), some(&["a", "", "c", ""]));
    }

    #[test]
    fn values_out_of_order() {
        let (m, rxs, ..) = merged(&["a", "b", "c", "d"]);
        m.deliver(values(&["d", "b", "a"]));
        assert_eq!(outcomes(rxs), some(&["a", "b", "", "d"]));
    }

    #[test]
    fn a_duplicate_key_is_sent_once_and_answers_every_caller() {
        let (m, rxs, sent) = merged(&["a", "b", "a", "c", "a"]);
        assert_eq!(sent, [true, true, false, true, false]);
        m.deliver(values(&["a", "b", "c"]));
        assert_eq!(outcomes(rxs), some(&["a", "b", "a", "c", "a"]));
        // A server that repeats the value per occurrence: the extra copies
        // find nobody waiting and are dropped.
        let (m, rxs, ..) = merged(&["x", "x"]);
        m.deliver(values(&["x", "x", "x"]));
        assert_eq!(outcomes(rxs), some(&["x", "x"]));
    }

    #[test]
    fn a_key_nobody_asked_for_is_ignored() {
        let (m, rxs, ..) = merged(&["a", "b"]);
        m.deliver(values(&["zz", "b"]));
        assert_eq!(outcomes(rxs), some(&["", "b"]));
    }

    #[test]
    fn many_keys_with_filter_collisions() {
        let keys: Vec<String> = (0..200).map(|i| format!("k{}", i % 150)).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let (m, rxs, sent) = merged(&refs);
        assert_eq!(sent.iter().filter(|&&s| s).count(), 150);
        let hits: Vec<&str> = refs[..150]
            .iter()
            .copied()
            .filter(|k| k.len() % 2 == 0)
            .collect();
        m.deliver(values(&hits));
        let want: Vec<Option<String>> = refs
            .iter()
            .map(|k| (k.len() % 2 == 0).then(|| k.to_string()))
            .collect();
        assert_eq!(outcomes(rxs), want);
    }

    #[test]
    fn an_error_reply_or_a_failure_goes_to_every_caller() {
        let (m, rxs, ..) = merged(&["a", "b", "a"]);
        m.deliver(Ok(Response::ServerError(Bytes::from_static(
            b"out of memory",
        ))));
        for mut rx in rxs {
            assert!(matches!(rx.try_recv(), Ok(Ok(Response::ServerError(_)))));
        }
        let (m, rxs, ..) = merged(&["a", "b"]);
        m.deliver(Err(Error::new(ErrorKind::Connection, "gone")));
        for mut rx in rxs {
            assert!(rx.try_recv().unwrap().unwrap_err().is_connection());
        }
    }

    #[test]
    fn a_caller_that_gave_up_does_not_disturb_the_others() {
        let (m, mut rxs, _) = merged(&["a", "b", "c"]);
        drop(rxs.remove(1));
        m.deliver(values(&["a", "b", "c"]));
        assert_eq!(outcomes(rxs), some(&["a", "c"]));
    }

    proptest::proptest! {
        /// Whatever the callers ask for (repeats included) and however the
        /// server answers (any order, repeated values per occurrence or one
        /// per key, stray keys), each caller gets exactly its own key's value
        /// when it is a hit and a miss otherwise.
        #[test]
        fn every_caller_gets_its_own_key(
            asked in proptest::collection::vec(0u8..24, 1..80),
            hits in proptest::collection::vec(proptest::bool::ANY, 24),
            order_seed in proptest::num::u64::ANY,
            repeat_per_occurrence in proptest::bool::ANY,
            strays in proptest::collection::vec(24u8..30, 0..4),
        ) {
            let names: Vec<String> = asked.iter().map(|k| format!("key{k}")).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let (m, rxs, sent) = merged(&refs);
            // The command line: every distinct key once, in first-asked order.
            let mut line: Vec<u8> = Vec::new();
            for (k, &s) in asked.iter().zip(&sent) {
                proptest::prop_assert_eq!(s, !line.contains(k));
                if s {
                    line.push(*k);
                }
            }
            // The server's reply.
            let mut reply: Vec<u8> = Vec::new();
            for k in &line {
                if hits[*k as usize] {
                    let copies = if repeat_per_occurrence {
                        asked.iter().filter(|a| *a == k).count()
                    } else {
                        1
                    };
                    reply.extend(std::iter::repeat_n(*k, copies));
                }
            }
            reply.extend(&strays);
            // A deterministic shuffle.
            let mut seed = order_seed | 1;
            for i in (1..reply.len()).rev() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                reply.swap(i, (seed % (i as u64 + 1)) as usize);
            }
            let reply_names: Vec<String> = reply.iter().map(|k| format!("key{k}")).collect();
            let reply_refs: Vec<&str> = reply_names.iter().map(String::as_str).collect();
            m.deliver(values(&reply_refs));
            let want: Vec<Option<String>> = asked
                .iter()
                .map(|&k| hits[k as usize].then(|| format!("key{k}")))
                .collect();
            proptest::prop_assert_eq!(outcomes(rxs), want);
        }
    }
}
