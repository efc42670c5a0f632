//! Decoded replies. Every byte payload is a `Bytes` sliced out of the read
//! buffer, so decoding copies no key and no value.

use bytes::Bytes;

/// One item of a `get`/`gets`/`gat`/`gats` reply.
///
/// ```text
/// VALUE <key> <flags> <bytes> [<cas unique>]\r\n
/// <data block>\r\n
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// The key, as the server echoed it.
    pub key: Bytes,
    /// The 32-bit client flags stored with the value.
    pub flags: u32,
    /// The CAS unique, present for `gets`/`gats`.
    pub cas: Option<u64>,
    /// The value.
    pub data: Bytes,
}

/// The items of one retrieval reply, in the order the server sent them.
///
/// Most retrievals ask for one key, so a single item is held inline and only
/// two or more allocate. Use it like a slice (`len`, indexing, `iter`), turn it
/// into a `Vec` with `into_vec`, or consume it with `into_iter`/`pop`.
#[derive(Debug, Clone, Default)]
pub struct Values(Repr);

#[derive(Debug, Clone)]
enum Repr {
    One(Value),
    Many(Vec<Value>),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Many(Vec::new())
    }
}

impl Values {
    /// No items (every key missed).
    pub fn new() -> Values {
        Values::default()
    }

    /// Appends an item.
    pub fn push(&mut self, value: Value) {
        match &mut self.0 {
            Repr::Many(v) if v.capacity() > 0 => v.push(value),
            Repr::Many(_) => self.0 = Repr::One(value),
            Repr::One(_) => {
                let Repr::One(first) = std::mem::take(&mut self.0) else {
                    unreachable!("matched above")
                };
                let mut many = Vec::with_capacity(4);
                many.extend([first, value]);
                self.0 = Repr::Many(many);
            }
        }
    }

    /// Makes room for `n` values when that is more than one (a lone value is
    /// held without a `Vec`): a multi-key reply's values then land without
    /// the vector growing as they come.
    pub fn reserve(&mut self, n: usize) {
        match &mut self.0 {
            Repr::Many(v) if n > 1 => v.reserve(n.saturating_sub(v.len())),
            Repr::One(_) if n > 1 => {
                let Repr::One(first) = std::mem::take(&mut self.0) else {
                    unreachable!("matched above")
                };
                let mut many = Vec::with_capacity(n);
                many.push(first);
                self.0 = Repr::Many(many);
            }
            _ => {}
        }
    }

    /// Removes and returns the last item.
    pub fn pop(&mut self) -> Option<Value> {
        match std::mem::take(&mut self.0) {
            Repr::One(v) => Some(v),
            Repr::Many(mut v) => {
                let last = v.pop();
                self.0 = Repr::Many(v);
                last
            }
        }
    }

    /// The items as a `Vec` (allocates for a single inline item).
    pub fn into_vec(self) -> Vec<Value> {
        match self.0 {
            Repr::One(v) => vec![v],
            Repr::Many(v) => v,
        }
    }
}

impl std::ops::Deref for Values {
    type Target = [Value];

    fn deref(&self) -> &[Value] {
        match &self.0 {
            Repr::One(v) => std::slice::from_ref(v),
            Repr::Many(v) => v,
        }
    }
}

impl PartialEq for Values {
    fn eq(&self, other: &Values) -> bool {
        **self == **other
    }
}

impl Eq for Values {}

impl From<Vec<Value>> for Values {
    fn from(values: Vec<Value>) -> Values {
        Values(Repr::Many(values))
    }
}

impl IntoIterator for Values {
    type Item = Value;
    type IntoIter = ValuesIntoIter;

    /// The values in order; a single value (a `get` of one key) without
    /// the allocation of a `Vec`.
    fn into_iter(self) -> ValuesIntoIter {
        ValuesIntoIter(match self.0 {
            Repr::One(v) => IntoIterRepr::One(Some(v)),
            Repr::Many(v) => IntoIterRepr::Many(v.into_iter()),
        })
    }
}

/// The values of a [`Values`], by value, in order.
#[derive(Debug)]
pub struct ValuesIntoIter(IntoIterRepr);

#[derive(Debug)]
enum IntoIterRepr {
    One(Option<Value>),
    Many(std::vec::IntoIter<Value>),
}

impl Iterator for ValuesIntoIter {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        match &mut self.0 {
            IntoIterRepr::One(v) => v.take(),
            IntoIterRepr::Many(v) => v.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            IntoIterRepr::One(v) => (usize::from(v.is_some()), Some(usize::from(v.is_some()))),
            IntoIterRepr::Many(v) => v.size_hint(),
        }
    }
}

impl ExactSizeIterator for ValuesIntoIter {}

impl<'a> IntoIterator for &'a Values {
    type Item = &'a Value;
    type IntoIter = std::slice::Iter<'a, Value>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// One `STAT <name> <value>` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// The statistic's name.
    pub name: Bytes,
    /// Its value (everything after the name, which may contain spaces).
    pub value: Bytes,
}

impl Stat {
    /// The name as text (memcached's names are ASCII).
    pub fn name_str(&self) -> &str {
        std::str::from_utf8(&self.name).unwrap_or("")
    }

    /// The value as text, or `""` if it is not UTF-8.
    pub fn value_str(&self) -> &str {
        std::str::from_utf8(&self.value).unwrap_or("")
    }
}

/// The two-letter status of a meta reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaStatus {
    /// `HD`: success, no value.
    Hd,
    /// `VA <size>`: success, a value follows.
    Va,
    /// `EN`: miss.
    En,
    /// `NF`: not found.
    Nf,
    /// `NS`: not stored.
    Ns,
    /// `EX`: exists (CAS mismatch).
    Ex,
    /// `MN`: the reply to `mn`, ending a pipeline of quiet commands.
    Mn,
    /// `ME <key> <k>=<v>*`: the reply to `me`.
    Me,
}

impl MetaStatus {
    /// The status as it appears on the wire.
    pub fn code(self) -> &'static str {
        match self {
            MetaStatus::Hd => "HD",
            MetaStatus::Va => "VA",
            MetaStatus::En => "EN",
            MetaStatus::Nf => "NF",
            MetaStatus::Ns => "NS",
            MetaStatus::Ex => "EX",
            MetaStatus::Mn => "MN",
            MetaStatus::Me => "ME",
        }
    }
}

/// A reply to a meta command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaResponse {
    /// The status code.
    pub status: MetaStatus,
    /// The return flags, raw: space-separated tokens, each a letter and its
    /// value (`f30 c12 t-1`). For `ME` this is the key followed by `k=v` pairs.
    /// Read individual flags with [`MetaResponse::flag`].
    pub flags: Bytes,
    /// The value, for `VA`.
    pub value: Option<Bytes>,
}

impl MetaResponse {
    /// Iterates the return flags as `(letter, token)` pairs.
    pub fn flags(&self) -> impl Iterator<Item = (u8, &[u8])> {
        self.flags
            .split(|&b| b == b' ')
            .filter(|t| !t.is_empty())
            .map(|t| (t[0], &t[1..]))
    }

    /// The token of return flag `letter` (`b'f'` → `b"30"`), if present.
    pub fn flag(&self, letter: u8) -> Option<&[u8]> {
        self.flags().find(|(l, _)| *l == letter).map(|(_, t)| t)
    }

    /// A numeric return flag (`c`, `f`, `s`, `O`, …) parsed as `u64`.
    pub fn flag_u64(&self, letter: u8) -> Option<u64> {
        std::str::from_utf8(self.flag(letter)?).ok()?.parse().ok()
    }

    /// The `t` flag (remaining TTL; `-1` means no expiry).
    pub fn ttl(&self) -> Option<i64> {
        std::str::from_utf8(self.flag(b't')?).ok()?.parse().ok()
    }

    /// `W`: this caller won the right to fill (or refresh) the item — a
    /// miss vivified by `N`, a stale item, or one whose TTL fell below `R`.
    pub fn won(&self) -> bool {
        self.flag(b'W').is_some()
    }

    /// `X`: the item is stale (marked by `md … I`); its value may be served
    /// while someone refills it.
    pub fn is_stale(&self) -> bool {
        self.flag(b'X').is_some()
    }

    /// `Z`: another caller already won the right to fill the item; wait for
    /// its value (or serve a stale one).
    pub fn win_sent(&self) -> bool {
        self.flag(b'Z').is_some()
    }

    /// A lease stub: an empty item carrying a win (`W` or `Z`), vivified by
    /// `mg … N` while someone fills it — to a classic `get`, an empty value.
    pub fn is_stub(&self) -> bool {
        self.value.as_ref().is_none_or(Bytes::is_empty) && (self.won() || self.win_sent())
    }

    /// Whether the reply carries lease state (`W`, `Z` or `X`): not a plain
    /// copy to serve or copy as it is.
    pub fn has_lease_flags(&self) -> bool {
        self.won() || self.win_sent() || self.is_stale()
    }

    /// The return flags as typed fields: what `mg`/`ms`/`md`/`ma` were asked
    /// to return (`f`, `t`, `c`, `s`, `h`, `l`, `O`, `k`) and the lease state
    /// (`W`, `Z`, `X`). A flag absent from the reply, or one whose token does
    /// not parse, is `None`; letters memgroup does not know (flags of later
    /// memcached versions) are skipped, and stay readable with
    /// [`MetaResponse::flag`].
    pub fn fields(&self) -> MetaFields {
        let mut out = MetaFields::default();
        let number = |t: &[u8]| std::str::from_utf8(t).ok()?.parse::<u64>().ok();
        for (letter, token) in self.flags() {
            match letter {
                b'f' => out.client_flags = number(token).and_then(|n| u32::try_from(n).ok()),
                b't' => {
                    out.ttl = match token {
                        b"-1" => Some(MetaTtl::Never),
                        t => number(t).map(MetaTtl::Seconds),
                    }
                }
                b'c' => out.cas = number(token),
                b's' => out.size = number(token),
                b'h' => out.hit_before = number(token).map(|n| n != 0),
                b'l' => out.last_access = number(token),
                b'O' => out.opaque = number(token).and_then(|n| u32::try_from(n).ok()),
                b'k' => out.key = Some(Bytes::copy_from_slice(token)),
                b'b' => out.base64_key = true,
                b'W' => out.won = true,
                b'Z' => out.win_sent = true,
                b'X' => out.stale = true,
                _ => {}
            }
        }
        if out.base64_key {
            // The key comes back encoded as it was sent: hand it back raw.
            out.key = out
                .key
                .take()
                .and_then(|k| crate::base64_decode(&k).map(Bytes::from));
        }
        out
    }
}

/// The remaining lifetime a meta reply reports (`t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaTtl {
    /// `t-1`: the item never expires.
    Never,
    /// Seconds until the item expires.
    Seconds(u64),
}

/// A meta reply's return flags as typed fields ([`MetaResponse::fields`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetaFields {
    /// `f`: the client flags.
    pub client_flags: Option<u32>,
    /// `t`: the remaining TTL.
    pub ttl: Option<MetaTtl>,
    /// `c`: the CAS value.
    pub cas: Option<u64>,
    /// `s`: the value's size in bytes.
    pub size: Option<u64>,
    /// `h`: whether the item had been read before this request.
    pub hit_before: Option<bool>,
    /// `l`: seconds since the item was last accessed.
    pub last_access: Option<u64>,
    /// `O`: the opaque number the request carried.
    pub opaque: Option<u32>,
    /// `k`: the key (decoded when the reply says it is base64, `b`).
    pub key: Option<Bytes>,
    /// `b`: the key was base64 encoded on the wire.
    pub base64_key: bool,
    /// `W`: this caller won the right to fill or refresh the item.
    pub won: bool,
    /// `Z`: another caller already holds that right.
    pub win_sent: bool,
    /// `X`: the item is stale.
    pub stale: bool,
}

/// One complete reply from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// The items of a retrieval (`VALUE …` blocks up to `END`); empty when every key missed.
    Values(Values),
    /// The `STAT` lines of a `stats` reply, up to `END`.
    Stats(Vec<Stat>),
    /// `STORED`
    Stored,
    /// `NOT_STORED`: the condition of `add`/`replace`/`append`/`prepend` failed.
    NotStored,
    /// `EXISTS`: the CAS value did not match.
    Exists,
    /// `NOT_FOUND`
    NotFound,
    /// `DELETED`
    Deleted,
    /// `TOUCHED`
    Touched,
    /// `OK` (`flush_all`, `verbosity`), and `RESET` (`stats reset`).
    Ok,
    /// The new value after `incr`/`decr`.
    Number(u64),
    /// `VERSION <version>`
    Version(Bytes),
    /// `ERROR`: the server did not know the command.
    Error,
    /// `CLIENT_ERROR <message>`: the request was malformed.
    ClientError(Bytes),
    /// `SERVER_ERROR <message>`: the server failed (out of memory, value too large, …).
    ServerError(Bytes),
    /// A meta command's reply.
    Meta(MetaResponse),
    /// The replies of a quiet batch ([`Request::MetaBatch`](crate::Request::MetaBatch)),
    /// in the order they came, up to its `MN`: the meta replies worth sending
    /// (each with the opaque of its command) and any error replies.
    MetaBatch(Vec<Response>),
}

impl Response {
    /// Whether this is `ERROR`, `CLIENT_ERROR` or `SERVER_ERROR`.
    pub fn is_error(&self) -> bool {
        matches!(
            self,
            Response::Error | Response::ClientError(_) | Response::ServerError(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: &'static [u8]) -> Value {
        Value {
            key: Bytes::from_static(key),
            flags: 0,
            cas: None,
            data: Bytes::from_static(b"v"),
        }
    }

    /// The lease flags as memcached 1.6.18 sends them: a won miss, a stale
    /// item whose win was sent, a plain hit.
    #[test]
    fn lease_flags_read_as_won_stale_and_win_sent() {
        let meta = |flags: &'static [u8]| MetaResponse {
            status: MetaStatus::Va,
            flags: Bytes::from_static(flags),
            value: Some(Bytes::new()),
        };
        let won = meta(b"s0 t30 c1 W");
        assert!(won.won() && !won.is_stale() && !won.win_sent());
        let waiting = meta(b"t30 c3 Z X");
        assert!(!waiting.won() && waiting.is_stale() && waiting.win_sent());
        let hit = meta(b"t-1 c7");
        assert!(!hit.won() && !hit.is_stale() && !hit.win_sent());
        assert_eq!(hit.ttl(), Some(-1));
    }

    #[test]
    fn one_value_is_inline_and_emptied_lists_keep_their_allocation() {
        let mut values = Values::new();
        values.push(item(b"a"));
        assert!(matches!(values.0, Repr::One(_)), "one item is inline");
        values.push(item(b"b"));
        values.push(item(b"c"));
        assert_eq!(values.len(), 3);
        assert_eq!(values.pop().map(|v| v.key), Some(Bytes::from_static(b"c")));
        assert_eq!(values.pop().map(|v| v.key), Some(Bytes::from_static(b"b")));
        assert_eq!(values.pop().map(|v| v.key), Some(Bytes::from_static(b"a")));
        assert_eq!(values.pop(), None);
        // The emptied list keeps its allocation for the next items.
        values.push(item(b"d"));
        assert!(matches!(&values.0, Repr::Many(v) if v.capacity() >= 3));
        let mut single = Values::new();
        single.push(item(b"e"));
        assert_eq!(single.pop().map(|v| v.key), Some(Bytes::from_static(b"e")));
        assert_eq!(single.pop(), None);
    }

    #[test]
    fn values_compare_and_convert_by_their_items() {
        let mut one = Values::new();
        one.push(item(b"a"));
        let many = Values::from(vec![item(b"a")]);
        assert_eq!(one, many, "inline or not, the same items");
        assert_ne!(one, Values::from(vec![item(b"b")]));
        assert_ne!(one, Values::new());
        assert_eq!(one.clone().into_vec(), vec![item(b"a")]);
        let keys: Vec<Bytes> = Values::from(vec![item(b"x"), item(b"y")])
            .into_iter()
            .map(|v| v.key)
            .collect();
        assert_eq!(keys, [&b"x"[..], b"y"]);
        assert_eq!(one.into_iter().count(), 1);
    }

    #[test]
    fn stat_text_and_meta_ttl() {
        let stat = Stat {
            name: Bytes::from_static(b"version"),
            value: Bytes::from_static(b"1.6.18"),
        };
        assert_eq!((stat.name_str(), stat.value_str()), ("version", "1.6.18"));
        let binary = Stat {
            name: Bytes::from_static(b"\xff"),
            value: Bytes::from_static(b"\xfe"),
        };
        assert_eq!((binary.name_str(), binary.value_str()), ("", ""));
        let meta = |flags: &'static [u8]| MetaResponse {
            status: MetaStatus::Hd,
            flags: Bytes::from_static(flags),
            value: None,
        };
        assert_eq!(meta(b"f1 t300").ttl(), Some(300));
        assert_eq!(meta(b"t-1").ttl(), Some(-1));
        assert_eq!(meta(b"f1").ttl(), None);
    }

    /// Values keep their order however they were stored: one alone, pushed
    /// into a reserved vector, or a lone one moved into one by `reserve`.
    #[test]
    fn values_keep_their_order_however_stored() {
        let value = |k: &str| Value {
            key: Bytes::copy_from_slice(k.as_bytes()),
            flags: 0,
            cas: None,
            data: Bytes::new(),
        };
        let keys = |v: Values| -> Vec<Bytes> { v.into_iter().map(|v| v.key).collect() };
        let mut one = Values::new();
        one.push(value("a"));
        assert_eq!(one.len(), 1);
        assert_eq!(keys(one), ["a"]);
        let mut reserved = Values::new();
        reserved.reserve(3);
        for k in ["a", "b", "c", "d"] {
            reserved.push(value(k));
        }
        assert_eq!(reserved.len(), 4);
        assert_eq!(keys(reserved), ["a", "b", "c", "d"]);
        let mut moved = Values::new();
        moved.push(value("a"));
        moved.reserve(5);
        moved.push(value("b"));
        assert_eq!(&moved[1].key[..], b"b");
        assert_eq!(moved.into_iter().len(), 2);
        let mut none = Values::new();
        none.reserve(1);
        assert!(none.is_empty());
        none.push(value("z"));
        assert_eq!(keys(none), ["z"]);
    }
}
