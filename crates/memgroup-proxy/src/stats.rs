//! The proxy's counters, answered to `stats` under memcached's names.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use memgroup_client::{Health, ServerHealth, ServerState};

use crate::Shared;

/// What the proxy counts (relaxed atomics, read by `stats`).
#[derive(Debug)]
#[non_exhaustive]
pub struct ProxyStats {
    started: Instant,
    /// Client connections open now.
    pub curr_connections: AtomicU64,
    /// Client connections accepted since start.
    pub total_connections: AtomicU64,
    /// Keys asked for by retrievals (`get`, `gets`, `gat`, `gats`, `mg`).
    pub cmd_get: AtomicU64,
    /// Of those, hits.
    pub get_hits: AtomicU64,
    /// Of those, misses (including the keys whose servers failed).
    pub get_misses: AtomicU64,
    /// Keys read as a miss because their servers failed (after fallback).
    pub get_errors: AtomicU64,
    /// Storage commands (`set`, `add`, …, `ms`).
    pub cmd_set: AtomicU64,
    /// `touch` commands.
    pub cmd_touch: AtomicU64,
    /// `delete`/`md` commands.
    pub cmd_delete: AtomicU64,
    /// `incr`/`decr`/`ma` commands.
    pub cmd_arith: AtomicU64,
    /// Requests answered (every command, the proxy's own replies too).
    pub requests: AtomicU64,
    /// Connections refused at the most allowed (memcached's name).
    pub rejected_connections: AtomicU64,
    /// Connections closed for being idle too long (memcached's name).
    pub idle_kicks: AtomicU64,
    /// TLS handshakes that failed or took too long (memcached's name).
    pub ssl_handshake_errors: AtomicU64,
    /// Requests refused for want of a login, and failed logins (memcached's
    /// `auth_errors`).
    pub auth_errors: AtomicU64,
    /// `flush_all` commands forwarded.
    pub cmd_flush: AtomicU64,
    /// Writes answered with an error (their policy missed, a server error).
    pub write_errors: AtomicU64,
    /// `noreply` (or quiet) writes that failed: nobody was told.
    pub noreply_failures: AtomicU64,
    /// Connections closed for what they sent, as memcached closes them: the
    /// binary protocol, a line too long without a newline, an HTTP request,
    /// a request larger than the limits allow.
    pub protocol_closes: AtomicU64,
}

impl Default for ProxyStats {
    fn default() -> Self {
        let zero = || AtomicU64::new(0);
        ProxyStats {
            started: Instant::now(),
            curr_connections: zero(),
            total_connections: zero(),
            cmd_get: zero(),
            get_hits: zero(),
            get_misses: zero(),
            get_errors: zero(),
            cmd_set: zero(),
            cmd_touch: zero(),
            cmd_delete: zero(),
            cmd_arith: zero(),
            cmd_flush: zero(),
            requests: zero(),
            rejected_connections: zero(),
            idle_kicks: zero(),
            ssl_handshake_errors: zero(),
            auth_errors: zero(),
            write_errors: zero(),
            noreply_failures: zero(),
            protocol_closes: zero(),
        }
    }
}

impl ProxyStats {
    /// `stats reset`: every counter back to zero but the connections open
    /// now (memcached keeps `curr_connections` too).
    pub(crate) fn reset(&self) {
        for counter in [
            &self.total_connections,
            &self.cmd_get,
            &self.get_hits,
            &self.get_misses,
            &self.get_errors,
            &self.cmd_set,
            &self.cmd_touch,
            &self.cmd_delete,
            &self.cmd_arith,
            &self.cmd_flush,
            &self.requests,
            &self.rejected_connections,
            &self.idle_kicks,
            &self.ssl_handshake_errors,
            &self.auth_errors,
            &self.write_errors,
            &self.noreply_failures,
            &self.protocol_closes,
        ] {
            counter.store(0, Relaxed);
        }
    }

    /// Every counter `stats` answers but the clock's, by name: the proxy's,
    /// then the client's (`status`).
    fn values(&self, status: &Health) -> Vec<(&'static str, u64)> {
        let counters: [(&str, &AtomicU64); 19] = [
            ("curr_connections", &self.curr_connections),
            ("total_connections", &self.total_connections),
            ("cmd_get", &self.cmd_get),
            ("cmd_set", &self.cmd_set),
            ("cmd_touch", &self.cmd_touch),
            ("cmd_flush", &self.cmd_flush),
            ("get_hits", &self.get_hits),
            ("get_misses", &self.get_misses),
            ("get_errors", &self.get_errors),
            ("delete_cmds", &self.cmd_delete),
            ("arith_cmds", &self.cmd_arith),
            ("write_errors", &self.write_errors),
            ("noreply_failures", &self.noreply_failures),
            ("protocol_closes", &self.protocol_closes),
            ("requests", &self.requests),
            ("rejected_connections", &self.rejected_connections),
            ("idle_kicks", &self.idle_kicks),
            ("ssl_handshake_errors", &self.ssl_handshake_errors),
            ("auth_errors", &self.auth_errors),
        ];
        let mut values: Vec<(&str, u64)> = counters
            .into_iter()
            .map(|(name, value)| (name, value.load(Relaxed)))
            .collect();
        values.push(("threads", thread_count()));
        let up = status.servers.iter().filter(|s| s.state == ServerState::Up);
        let sum = |field: fn(&ServerHealth) -> u64| status.servers.iter().map(field).sum::<u64>();
        values.extend([
            ("servers", status.servers.len() as u64),
            ("servers_up", up.count() as u64),
            ("server_requests", sum(|s| s.counters.requests)),
            ("server_fallbacks", sum(|s| s.counters.fallbacks)),
            ("server_errors", sum(|s| s.counters.errors_total())),
            ("server_timeouts", sum(|s| s.counters.timeouts)),
            ("repairs_pending", status.repairs.pending as u64),
            ("repairs_done", status.repairs.repaired),
            ("repairs_dropped", status.repairs.dropped),
            ("hedged_reads", status.hedged_reads),
            ("read_repairs", status.read_repairs),
            ("background_writes", status.background_writes as u64),
            ("topology_generation", status.topology_generation),
        ]);
        values
    }

    /// Records every counter `stats` answers through the `metrics` facade,
    /// named `memgroup.proxy.<stats name>` (`memgroup_proxy_cmd_get` in
    /// Prometheus): what goes up and down (connections open, servers up,
    /// repairs pending, writes finishing, the topology's generation and
    /// age) as gauges, the rest as counters set to their totals.
    #[cfg(feature = "metrics")]
    pub(crate) fn record(&self, status: &Health) {
        const GAUGES: [&str; 7] = [
            "curr_connections",
            "threads",
            "servers",
            "servers_up",
            "repairs_pending",
            "background_writes",
            "topology_generation",
        ];
        for (name, value) in self.values(status) {
            let gauge = GAUGES.contains(&name);
            let name = format!("memgroup.proxy.{name}");
            if gauge {
                metrics::gauge!(name).set(value as f64);
            } else {
                metrics::counter!(name).absolute(value);
            }
        }
        metrics::gauge!("memgroup.proxy.topology_age").set(status.topology_age.as_secs_f64());
        metrics::gauge!("memgroup.proxy.uptime").set(self.started.elapsed().as_secs_f64());
    }

    /// The `stats` reply: `STAT <name> <value>` lines and `END`; the
    /// proxy's counters, then the client's (`status`): its servers, what it
    /// repaired and hedged, and its topology's generation and age.
    pub(crate) fn encode(&self, status: &Health, out: &mut BytesMut) {
        let mut stat = |name: &str, value: &dyn std::fmt::Display| {
            out.put_slice(format!("STAT {name} {value}\r\n").as_bytes());
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        stat("pid", &std::process::id());
        stat("uptime", &self.started.elapsed().as_secs());
        stat("time", &now);
        stat("version", &crate::answer::VERSION);
        for (name, value) in self.values(status) {
            stat(name, &value);
        }
        stat("topology_age", &status.topology_age.as_secs());
        out.put_slice(b"END\r\n");
    }
}

fn thread_count() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

/// `stats <section>`: the proxy's own `servers` (each server as the
/// client sees it) and `latency` (each command's over a recent window), and
/// memcached's sections other than `reset`, answered as a memcached that
/// holds no items answers them (memcached's own proxy does the same: the
/// proxy stores nothing; the servers' sections are theirs to give,
/// `memgroup stats --arg items`). `settings` and `conns` are not served
/// (`ERROR`, as for a section memcached lacks).
pub(crate) fn section(shared: &Shared, args: &[Bytes]) -> Bytes {
    let mut out = BytesMut::new();
    match &args[0][..] {
        b"servers" => servers(&shared.client.health(), &mut out),
        b"latency" => shared.latency.encode(&mut out),
        _ => return memcacheds_section(args),
    }
    out.freeze()
}

/// `stats servers`: `STAT <host:port>:<field> <value>` for every server of
/// the topology serving, in its order.
fn servers(status: &Health, out: &mut BytesMut) {
    for server in &status.servers {
        let mut stat = |field: &str, value: &dyn std::fmt::Display| {
            out.put_slice(format!("STAT {}:{field} {value}\r\n", server.server).as_bytes());
        };
        stat("groups", &server.groups.join(","));
        match server.state {
            ServerState::Dead { retry_in } => {
                stat("state", &"dead");
                stat("retry_in_ms", &retry_in.as_millis());
            }
            _ => stat("state", &"up"),
        }
        let c = &server.counters;
        stat("failures", &server.failures);
        stat("connections", &server.connections);
        stat("in_flight", &server.in_flight);
        stat("queued", &server.queued);
        stat("requests", &c.requests);
        stat("hits", &c.hits);
        stat("misses", &c.misses);
        stat("fallbacks", &c.fallbacks);
        stat("errors", &c.errors_total());
        stat("timeouts", &c.timeouts);
        if let (Some(p50), Some(p99)) = (c.latency_p50, c.latency_p99) {
            stat("p50_us", &p50.as_micros());
            stat("p99_us", &p99.as_micros());
        }
    }
    out.put_slice(b"END\r\n");
}

/// memcached's own sections, as a memcached holding nothing answers them.
fn memcacheds_section(args: &[Bytes]) -> Bytes {
    let number = |i: usize| {
        args.get(i)
            .and_then(|t| std::str::from_utf8(t).ok())
            .and_then(|t| t.strip_prefix('+').unwrap_or(t).parse::<u64>().ok())
    };
    let reply: &'static [u8] = match &args[0][..] {
        b"items" | b"extstore" => b"END\r\n",
        b"slabs" => b"STAT active_slabs 0\r\nSTAT total_malloced 0\r\nEND\r\n",
        b"sizes" => b"STAT sizes_status disabled\r\nEND\r\n",
        b"detail" => match args.get(1).map(|a| &a[..]) {
            // No per-prefix counters to switch on or to dump.
            Some(b"on" | b"off") => b"OK\r\n",
            Some(b"dump") => b"END\r\n",
            _ => b"CLIENT_ERROR usage: stats detail on|off|dump\r\n",
        },
        b"cachedump" if args.len() < 3 => b"CLIENT_ERROR bad command line\r\n",
        // memcached reads both as 32-bit numbers; 64 slab classes.
        b"cachedump" => match (number(1), number(2)) {
            (Some(class), Some(_)) if class as u32 >= 64 => b"CLIENT_ERROR Illegal slab id\r\n",
            (Some(_), Some(_)) => b"END\r\n",
            _ => b"CLIENT_ERROR bad command line format\r\n",
        },
        _ => b"ERROR\r\n",
    };
    Bytes::from_static(reply)
}
