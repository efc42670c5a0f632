//! The subcommands, one module per family, each with its clap `Args` and
//! the function that runs it; [`Command`] names them all for clap.

mod bench;
mod common;
mod generate;
mod keys;
mod load;
mod meta;
pub(crate) mod proxy;
mod read;
mod repair;
mod route;
mod server;
mod settings;
mod status;
mod warm;
mod write;

use std::process::ExitCode;

use clap::Subcommand;

use crate::exit::Failure;
use crate::flags::ClusterFlags;

/// Every subcommand, in the order `--help` lists them.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Show which server (in each group) every key maps to.
    #[command(
        after_help = "Examples:\n  memgroup --servers h1:11211,h2:11211 --hash native route user:42\n  memgroup --config cluster.toml route user:42 --all-strategies\n  memgroup --servers h1:11211,h2:11211,h3:11211,h4:11211 --hash ketama route --compare h1:11211,h2:11211,h3:11211 --old-hash native\n  memgroup --config new.toml route --compare old.toml --from-cluster"
    )]
    Route(route::Args),
    /// Read keys (local group first, falling back per the read policy).
    #[command(
        after_help = "One key writes exactly the value's bytes (on a terminal, control bytes show escaped, like \\x1b,\nand a newline ends the value); several print `key: value` lines, which a value\nholding a newline breaks: for any values use --protocol (memcached's own `VALUE key flags\nbytes` blocks, then `END`) or --json (text, or base64 with \"encoding\": \"base64\").\nExit 1 if any key is missing.\n\nExamples:\n  memgroup --servers h1:11211 get user:42 > value.bin\n  memgroup --servers h1:11211 get --protocol user:42 user:43\n  memgroup --config cluster.toml --value-format evcache --json get user:42 user:43"
    )]
    Get(read::GetArgs),
    /// Store a value in every group (`-` reads it from stdin; `--literal`
    /// stores a lone `-`).
    #[command(
        after_help = "Examples:\n  memgroup --servers h1:11211 set user:42 Ada --exptime 300\n  cat blob | memgroup --servers h1:11211 set blob -\n  memgroup --config cluster.toml --value-format evcache set visits 41 --type long"
    )]
    Set(write::SetArgs),
    /// Read keys with their CAS unique (for `cas`).
    Gets(read::GetArgs),
    /// Exit 0 only if every key exists (like memexist).
    Exist(read::Args),
    /// Store only where the key is absent.
    Add(write::StoreArgs),
    /// Store only where the key is present.
    Replace(write::StoreArgs),
    /// Append to the existing value (its flags and expiry stay).
    Append(write::AppendArgs),
    /// Prepend to the existing value (its flags and expiry stay).
    Prepend(write::AppendArgs),
    /// Store only if the item still has the CAS unique from `gets`.
    Cas(write::CasArgs),
    /// A meta get with memcached's own flags, printing the typed reply
    /// (won, stale, win sent, TTL, CAS, …).
    #[command(
        after_help = "Exit 1 on a miss (EN).\n\nExamples:\n  memgroup --servers h1:11211 mg user:42 v t c\n  memgroup --config cluster.toml mg hot:key v N30 --json"
    )]
    Mg(meta::Args),
    /// A meta set with memcached's own flags (`ME` add, `MR` replace, `I`,
    /// `C<cas>` go through the arbiter).
    Ms(meta::SetArgs),
    /// A meta delete in every group (`I T30`: mark stale instead).
    Md(meta::Args),
    /// Meta arithmetic, decided by the arbiter (`N0 J5 v`: create at 5).
    Ma(meta::Args),
    /// Mark values stale in every group: `get_or_fill` callers are served
    /// them while one caller refills.
    Invalidate(meta::InvalidateArgs),
    /// Each server's version, with its group.
    Version(server::VersionArgs),
    /// Each server's state: reachable, round trip, version, up, down (its
    /// probe failed) or dead, with group totals; exit 1 if any server is
    /// unreachable.
    #[command(
        after_help = "Examples:\n  memgroup --config cluster.toml status\n  memgroup --config cluster.toml --json status\n  memgroup --config cluster.toml status --watch 5"
    )]
    Status(status::Args),
    /// Each server's round-trip time; exit 1 if any is down (like memping).
    Ping(server::PingArgs),
    /// List the keys stored on a group's servers, with size and expiry
    /// (lru_crawler metadump; like memdump).
    #[command(
        after_help = "Examples:\n  memgroup --config cluster.toml keys --group sg1 --prefix user: --limit 100\n  memgroup --servers h1:11211 --json keys"
    )]
    Keys(keys::Args),
    /// Print the settings in effect and where each came from (flag,
    /// environment, URL, file or default), like `git config --show-origin`.
    Config,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(generate::CompletionsArgs),
    /// Write the man pages (memgroup.1 and one per subcommand) into DIR.
    #[command(hide = true)]
    Man(generate::ManArgs),
    /// Store files: the file name is the key (or --key's, for one file), the
    /// contents the value (like memcp).
    Cp(load::CpArgs),
    /// Delete keys from every group.
    #[command(visible_aliases = ["del", "rm"])]
    Delete(write::DeleteArgs),
    /// Set a new expiration time in every group.
    Touch(write::TouchArgs),
    /// Increment a counter.
    Incr(write::CounterArgs),
    /// Decrement a counter (stops at 0).
    Decr(write::CounterArgs),
    /// Invalidate every item of one group.
    Flush(server::FlushArgs),
    /// Per-server statistics, with totals per group; or one raw section
    /// (`slabs`, `items`, `settings`, `sizes`, `conns`, …) of every server;
    /// or (`--server`) every statistic of one server.
    #[command(
        after_help = "Examples:\n  memgroup --config cluster.toml stats --group sg1\n  memgroup --config cluster.toml --json stats slabs\n  memgroup --config cluster.toml stats --server 10.0.0.1:11211"
    )]
    Stats(server::StatsArgs),
    /// Write N generated keys through the replicated client (for demos and tests).
    Load(load::LoadArgs),
    /// Copy a group's keys into other groups (the cache warmer).
    #[command(
        after_help = "Exit 1 if a key could not be copied, or (with --verify) is missing.\n\nExamples:\n  memgroup --config cluster.toml warm --from sg1 --to sg3 --verify\n  memgroup --groups \"$GROUPS\" --pool-size 6 --json warm --from sg1 --to sg2 --to sg3"
    )]
    Warm(warm::Args),
    /// A memslap-like load generator with latency percentiles.
    ///
    /// A closed loop of --concurrency workers, each waiting for its reply;
    /// or, with --rate, an open loop on a fixed schedule that a stalled
    /// server cannot slow down, so its delays are measured, not omitted.
    #[command(
        after_help = "Examples:\n  memgroup --servers h1:11211 bench --ratio 9:1 --keys 10000 --concurrency 32 --duration 10\n  memgroup --config cluster.toml --json bench --ops 100000\n  memgroup --servers h1:11211 --timeout-ms 100 bench --rate 20000 --duration 30"
    )]
    Bench(bench::Args),
    /// Do the repairs earlier runs journaled (a group's copies they could
    /// not fix before they ended), or list them.
    #[command(
        after_help = "Exit 0 when no repair is left, 3 when some are (each named), 2 when the journal is off.\n\nExamples:\n  memgroup --config cluster.toml repair --wait 60\n  memgroup --config cluster.toml repair --list"
    )]
    Repair(repair::Args),
    /// Serve memcached's text and meta protocols to any client, forwarding
    /// through this cluster's client: routing, replication and repairs for
    /// every language (runs until Ctrl-C or SIGTERM).
    #[command(
        after_help = "Examples:\n  memgroup --config cluster.toml proxy --listen 127.0.0.1:11311\n  memgroup --groups 'z1=10.0.1.5:11211;z2=10.0.2.5:11211' --zone z1 proxy --listen 127.0.0.1:11311"
    )]
    Proxy(proxy::Args),
}

impl Command {
    /// The runtime's worker threads the command asks for (`proxy
    /// --threads`), else the default (one per core).
    pub(crate) fn worker_threads(&self) -> Option<usize> {
        match self {
            Command::Proxy(args) => args.threads.filter(|&n| n > 0),
            _ => None,
        }
    }

    /// Whether the command writes keys (a repair it leaves makes it partly
    /// done).
    pub(crate) fn writes(&self) -> bool {
        matches!(
            self,
            Command::Set(_)
                | Command::Add(_)
                | Command::Replace(_)
                | Command::Append(_)
                | Command::Prepend(_)
                | Command::Cas(_)
                | Command::Ms(_)
                | Command::Md(_)
                | Command::Ma(_)
                | Command::Invalidate(_)
                | Command::Cp(_)
                | Command::Delete(_)
                | Command::Touch(_)
                | Command::Incr(_)
                | Command::Decr(_)
                | Command::Load(_)
        )
    }

    /// Runs the command on the cluster `flags` describe (each command
    /// resolves them when, and only if, it needs them); `cli` is the whole
    /// command line's shape, for the commands that print it (completions,
    /// man pages).
    pub(crate) async fn run(
        self,
        flags: &ClusterFlags,
        cli: fn() -> clap::Command,
    ) -> Result<ExitCode, Failure> {
        use write::Conditional;
        match self {
            Command::Route(args) => route::run(&args, flags).await,
            Command::Get(args) => read::get(&args, flags).await,
            Command::Set(args) => write::set(&args, flags).await,
            Command::Gets(args) => read::gets(&args, flags).await,
            Command::Exist(args) => read::exist(&args, flags).await,
            Command::Add(args) => write::store(&args, Conditional::Add, flags).await,
            Command::Replace(args) => write::store(&args, Conditional::Replace, flags).await,
            Command::Append(args) => write::append(&args, false, flags).await,
            Command::Prepend(args) => write::append(&args, true, flags).await,
            Command::Cas(args) => write::cas(&args, flags).await,
            Command::Mg(args) => meta::get(&args, flags).await,
            Command::Ms(args) => meta::set(&args, flags).await,
            Command::Md(args) => meta::delete(&args, flags).await,
            Command::Ma(args) => meta::arith(&args, flags).await,
            Command::Invalidate(args) => meta::invalidate(&args, flags).await,
            Command::Version(args) => server::version(&args, flags).await,
            Command::Status(args) => status::run(&args, flags).await,
            Command::Ping(args) => server::ping(&args, flags).await,
            Command::Keys(args) => keys::run(&args, flags).await,
            Command::Config => settings::run(flags),
            Command::Completions(args) => Ok(generate::completions(&args, cli())),
            Command::Man(args) => generate::man(&args, cli()),
            Command::Cp(args) => load::cp(&args, flags).await,
            Command::Delete(args) => write::delete(&args, flags).await,
            Command::Touch(args) => write::touch(&args, flags).await,
            Command::Incr(args) => write::counter(&args, true, flags).await,
            Command::Decr(args) => write::counter(&args, false, flags).await,
            Command::Flush(args) => server::flush(&args, flags).await,
            Command::Stats(args) => server::stats(&args, flags).await,
            Command::Load(args) => load::load(&args, flags).await,
            Command::Repair(args) => repair::run(&args, flags).await,
            Command::Proxy(args) => proxy::run(&args, flags).await,
            Command::Warm(args) => warm::run(&args, flags).await,
            Command::Bench(args) => bench::run(&args, flags).await,
        }
    }
}

/// Every key checked as the client checks it ([`Client::check_key`]),
/// before any is read or written: an invalid one is a usage error naming
/// it, and nothing was sent.
///
/// [`Client::check_key`]: memgroup::client::Client::check_key
pub(crate) fn check_keys(
    client: &memgroup::client::Client,
    keys: &[String],
) -> Result<(), Failure> {
    for key in keys {
        client.check_key(key)?;
    }
    Ok(())
}

/// Requests at once at most for the commands that send one request per key
/// (`gets`, `delete`, `invalidate`; [`concurrently`]): enough that a stalled
/// server's keys wait out their timeouts together, few enough to stay
/// within a connection's cap on requests in flight.
const KEYS_AT_ONCE: usize = 64;

/// Runs `each` for every key, up to [`KEYS_AT_ONCE`] at a time, and returns
/// the results in the keys' order: the keys of a stalled server cost one
/// timeout together, not one after another.
pub(crate) async fn concurrently<'k, T, F, Fut>(keys: &'k [String], mut each: F) -> Vec<T>
where
    F: FnMut(&'k str) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    use std::task::Poll;
    let mut results: Vec<Option<T>> = keys.iter().map(|_| None).collect();
    let mut running: Vec<(usize, std::pin::Pin<Box<Fut>>)> = Vec::new();
    let mut started = 0;
    std::future::poll_fn(|cx| {
        loop {
            while running.len() < KEYS_AT_ONCE && started < keys.len() {
                running.push((started, Box::pin(each(&keys[started]))));
                started += 1;
            }
            let before = running.len();
            running.retain_mut(|(at, request)| match request.as_mut().poll(cx) {
                Poll::Ready(result) => {
                    results[*at] = Some(result);
                    false
                }
                Poll::Pending => true,
            });
            if running.is_empty() && started == keys.len() {
                return Poll::Ready(());
            }
            // Nothing finished: every request left is registered to wake
            // this task.
            if running.len() == before {
                return Poll::Pending;
            }
        }
    })
    .await;
    results
        .into_iter()
        .map(|result| result.expect("every key's request ran to its end"))
        .collect()
}
