//! Tracing spans with a real failure: a read whose local group's server was
//! SIGKILLed falls back to the other group. A capturing subscriber sees the
//! operation's span and, inside it, one span per request: the first names
//! the local group and the error, the second the other group, the fallback
//! and the hit. Keys appear only when asked for. Within one group, the
//! second try is a failover. A malformed reply is a warning event.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use memgroup::client::Client;
use memgroup::topology::{ClusterSpec, ReadFallback, Topology};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::support::Memcached;

/// A closed span: its name, fields, parent's name and the thread (the
/// test) that made it.
#[derive(Debug, Clone)]
struct Captured {
    name: &'static str,
    fields: HashMap<String, String>,
    parent: Option<&'static str>,
    thread: std::thread::ThreadId,
}

impl Visit for Captured {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.fields.insert(
            field.name().to_string(),
            format!("{value:?}").trim_matches('"').to_string(),
        );
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .insert(field.name().to_string(), value.to_string());
    }
}

/// Keeps the fields of every span made on a capturing thread as they are
/// recorded; lists them when closed.
#[derive(Default, Clone)]
struct Capture {
    open: Arc<Mutex<HashMap<u64, Captured>>>,
    closed: Arc<Mutex<Vec<Captured>>>,
    /// Events, named by their level.
    events: Arc<Mutex<Vec<Captured>>>,
}

thread_local! {
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
}

/// The process-wide capturing subscriber. Global, not scoped to the test's
/// thread: tracing caches each call site's interest process-wide, and a call
/// site first reached by another test's thread while only a scoped
/// subscriber exists can stay disabled (a flaky test). Only spans made on a
/// thread that set `CAPTURING` are kept.
fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture = Capture::default();
        // Beside it, OpenTelemetry's layer exporting to memory: what a
        // service's collector would receive (see `the_exported_spans…`).
        use opentelemetry::trace::TracerProvider as _;
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_simple_exporter(exported().clone())
            .build();
        let tracer = provider.tracer("memgroup-tests");
        let _ = PROVIDER.set(provider);
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry()
                .with(capture.clone())
                .with(tracing_opentelemetry::layer().with_tracer(tracer)),
        )
        .expect("no other global subscriber in the test binary");
        capture
    })
}

/// The spans OpenTelemetry exported, from every test's thread.
fn exported() -> &'static opentelemetry_sdk::trace::InMemorySpanExporter {
    static EXPORTER: OnceLock<opentelemetry_sdk::trace::InMemorySpanExporter> = OnceLock::new();
    EXPORTER.get_or_init(Default::default)
}

static PROVIDER: OnceLock<opentelemetry_sdk::trace::SdkTracerProvider> = OnceLock::new();

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !CAPTURING.with(Cell::get) {
            return;
        }
        let mut span = Captured {
            name: attrs.metadata().name(),
            parent: ctx.span(id).and_then(|s| s.parent()).map(|p| p.name()),
            fields: HashMap::new(),
            thread: std::thread::current().id(),
        };
        attrs.record(&mut span);
        self.open.lock().unwrap().insert(id.into_u64(), span);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        if let Some(span) = self.open.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(span);
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        if !CAPTURING.with(Cell::get) {
            return;
        }
        let mut captured = Captured {
            name: event.metadata().level().as_str(),
            parent: None,
            fields: HashMap::new(),
            thread: std::thread::current().id(),
        };
        event.record(&mut captured);
        self.events.lock().unwrap().push(captured);
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        if let Some(span) = self.open.lock().unwrap().remove(&id.into_u64()) {
            self.closed.lock().unwrap().push(span);
        }
    }
}

impl Capture {
    /// The spans this thread's test made and closed, taken out of the list.
    fn take_mine(&self) -> Vec<Captured> {
        Self::take_from(&self.closed)
    }

    /// The events this thread's test emitted, taken out of the list.
    fn take_my_events(&self) -> Vec<Captured> {
        Self::take_from(&self.events)
    }

    fn take_from(list: &Mutex<Vec<Captured>>) -> Vec<Captured> {
        let me = std::thread::current().id();
        let mut all = list.lock().unwrap();
        let (mine, others) = std::mem::take(&mut *all)
            .into_iter()
            .partition(|s| s.thread == me);
        *all = others;
        mine
    }
}

/// The request spans among `closed`, in the order they closed.
fn requests(closed: &[Captured]) -> Vec<&Captured> {
    closed
        .iter()
        .filter(|s| s.name == "memcached.request")
        .collect()
}

fn field<'a>(span: &'a Captured, name: &str) -> &'a str {
    span.fields.get(name).map_or("", String::as_str)
}

#[tokio::test(flavor = "current_thread")]
async fn a_fallback_read_shows_both_requests_in_its_span() {
    let (mut a, b) = (Memcached::spawn(), Memcached::spawn());
    let groups = format!("sg1={};sg2={}", a.addr_string(), b.addr_string());
    let build = |trace_keys: bool| {
        Client::builder()
            .evcache_groups(&groups)
            .zone("sg1")
            .read_fallback(ReadFallback::OneMore)
            .trace_keys(trace_keys)
            .build()
            .unwrap()
    };
    let client = build(false);
    client.set("user:42", "Ada", 0).await.unwrap();
    crate::support::background_done(&client).await;
    client.get("user:42").await.unwrap();
    a.kill();

    let capture = capture();
    CAPTURING.with(|c| c.set(true));
    let item = client.get("user:42").await.unwrap().expect("served by sg2");
    assert_eq!(item.value, "Ada");
    let closed = capture.take_mine();
    let requests = requests(&closed);
    assert_eq!(requests.len(), 2, "{closed:#?}");
    let (first, second) = (requests[0], requests[1]);
    assert_eq!(field(first, "group"), "sg1", "{first:?}");
    assert_eq!(field(first, "server"), a.addr_string());
    assert_eq!(field(first, "attempt"), "first");
    assert_eq!(field(first, "outcome"), "connection", "{first:?}");
    assert_eq!(field(first, "command"), "get");
    assert_eq!(field(second, "group"), "sg2", "{second:?}");
    assert_eq!(field(second, "attempt"), "fallback");
    assert_eq!(field(second, "outcome"), "hit");
    let op = closed
        .iter()
        .find(|s| s.name == "memgroup")
        .expect("the operation's span");
    assert_eq!(field(op, "op"), "get");
    assert_eq!(field(op, "outcome"), "hit");
    assert_eq!(field(op, "key"), "", "no key unless asked for");
    assert!(requests.iter().all(|r| r.parent == Some("memgroup")));

    // Asked for, the key is in the operation's span.
    build(true).get("user:42").await.unwrap();
    let closed = capture.take_mine();
    let op = closed.iter().find(|s| s.name == "memgroup").unwrap();
    assert_eq!(field(op, "key"), "user:42");
    CAPTURING.with(|c| c.set(false));
}

/// One group with failover: the key's server is killed, the next server of
/// the group is tried, and that request says "failover".
#[tokio::test(flavor = "current_thread")]
async fn a_failover_within_the_group_is_labelled_so() {
    let (mut a, b) = (Memcached::spawn(), Memcached::spawn());
    let list = format!("{},{}", a.addr_string(), b.addr_string());
    let topology = Topology::new(ClusterSpec::parse_server_list(&list).unwrap()).unwrap();
    // A key whose server is a (the first of the list).
    let key = (0..)
        .map(|i| format!("k{i}"))
        .find(|k| topology.groups()[0].server_for(k.as_bytes()).0 == 0)
        .unwrap();
    let client = Client::builder().servers(&list).build().unwrap();
    a.kill();
    let capture = capture();
    CAPTURING.with(|c| c.set(true));
    let got = client.get(&key).await.unwrap();
    CAPTURING.with(|c| c.set(false));
    assert!(got.is_none(), "b never held {key}");
    let closed = capture.take_mine();
    let requests = requests(&closed);
    assert_eq!(requests.len(), 2, "{closed:#?}");
    assert_eq!(field(requests[0], "attempt"), "first");
    assert_eq!(field(requests[0], "server"), a.addr_string());
    assert_eq!(
        field(requests[1], "attempt"),
        "failover",
        "{:?}",
        requests[1]
    );
    assert_eq!(field(requests[1], "server"), b.addr_string());
    assert_eq!(field(requests[1], "outcome"), "miss");
}

/// A reply the decoder refuses closes the connection with a warning that
/// names the server and what was wrong.
#[tokio::test(flavor = "current_thread")]
async fn a_malformed_reply_is_a_warning_naming_the_server() {
    use std::io::Write;
    let addr = crate::support::fault_peer(|_, conn| {
        let _ = conn.write_all(b"\x00garbage\r\n");
        true
    });
    let client = Client::builder()
        .servers(&addr)
        .timeout(std::time::Duration::from_millis(500))
        .build()
        .unwrap();
    let capture = capture();
    CAPTURING.with(|c| c.set(true));
    let got = client.get("k").await;
    CAPTURING.with(|c| c.set(false));
    assert!(got.unwrap_err().is_protocol());
    let events = capture.take_my_events();
    let warned = events.iter().any(|e| {
        e.name == "WARN"
            && field(e, "message").contains("malformed reply")
            && field(e, "error").contains(&addr)
    });
    assert!(warned, "{events:#?}");
}

/// What a service's OpenTelemetry collector receives (tracing-opentelemetry
/// over these spans): the operation is the CLIENT span, named by its
/// `db.operation.name`, with `db.system.name`; its requests are children
/// carrying `server.address` and `server.port`; a failure has `error.type`;
/// the batch write's name and size follow the batch rule, and a multi-key
/// `get` is no batch.
#[tokio::test(flavor = "current_thread")]
async fn the_exported_spans_follow_the_database_conventions() {
    use opentelemetry::trace::SpanKind;
    use opentelemetry::{Key, Value};
    capture();
    // Convergence off: `set_multi` is then one quiet batch per connection
    // (with it on, several groups write each key as a single `set`).
    let (mut a, b, client) = crate::support::two_zones(|c| {
        c.write_wait(memgroup::client::WriteWait::AllGroups)
            .converge(false)
    });
    client
        .set_multi(&[("o1", "1"), ("o2", "2"), ("o3", "3")], 0)
        .await
        .unwrap();
    client.get_multi(&["o1", "o2"]).await.unwrap();
    a.kill();
    let lone = Client::builder().servers(&a.addr_string()).build().unwrap();
    assert!(lone.get("o1").await.is_err());
    let ports = [a.addr().port(), b.addr().port()].map(|p| Value::I64(i64::from(p)));
    let spans = exported().get_finished_spans().unwrap();
    let attr = |s: &opentelemetry_sdk::trace::SpanData, k: &str| {
        s.attributes
            .iter()
            .find(|kv| kv.key == Key::from(k.to_string()))
            .map(|kv| kv.value.clone())
    };
    // This test's requests: those to its servers; their parents, its operations.
    let requests: Vec<_> = spans
        .iter()
        .filter(|s| attr(s, "server.port").is_some_and(|p| ports.contains(&p)))
        .collect();
    let parents: Vec<_> = spans
        .iter()
        .filter(|s| {
            requests
                .iter()
                .any(|r| r.parent_span_id == s.span_context.span_id())
        })
        .collect();
    let op = |name: &str| {
        parents.iter().find(|s| s.name == name).unwrap_or_else(|| {
            panic!(
                "no {name:?} among {:?}",
                parents.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        })
    };
    let batch = op("BATCH set");
    assert_eq!(batch.span_kind, SpanKind::Client);
    assert_eq!(
        attr(batch, "db.system.name"),
        Some(Value::from("memcached"))
    );
    assert_eq!(
        attr(batch, "db.operation.name"),
        Some(Value::from("BATCH set"))
    );
    assert_eq!(attr(batch, "db.operation.batch.size"), Some(Value::I64(3)));
    let get = op("get");
    assert_eq!(get.span_kind, SpanKind::Client);
    assert_eq!(
        attr(get, "db.operation.batch.size"),
        None,
        "a multi-key get is no batch"
    );
    let failed = parents
        .iter()
        .find(|s| s.name == "get" && attr(s, "error.type").is_some())
        .expect("the failed get");
    let kind = attr(failed, "error.type").unwrap().as_str().into_owned();
    assert!(
        memgroup::client::ErrorKind::ALL
            .iter()
            .any(|k| k.name() == kind),
        "error.type {kind:?} is an error kind's name"
    );
    for r in &requests {
        assert_eq!(attr(r, "server.address"), Some(Value::from("127.0.0.1")));
        assert!(attr(r, "group").is_some() && attr(r, "attempt").is_some());
        assert_ne!(
            r.span_kind,
            SpanKind::Client,
            "one CLIENT span per operation"
        );
    }
    // The batch wrote each group: a request per group under it.
    let under_batch = requests
        .iter()
        .filter(|r| r.parent_span_id == batch.span_context.span_id())
        .count();
    assert_eq!(under_batch, 2);
    let names: Vec<_> = parents.iter().map(|s| s.name.to_string()).collect();
    eprintln!("exported operation spans: {names:?}");
}
