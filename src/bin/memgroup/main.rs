//! `memgroup`: the operator's tool for memcached clusters with server groups.
//!
//! Exit codes: 0 success; 1 the operation failed (a miss, a refused write,
//! servers unreachable, verification found missing keys); 2 usage or
//! configuration error.

mod bench;
mod cluster;
mod dump;
mod exit;
mod flags;
mod ops;
mod output;
mod plan;
mod status;
mod warm;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::cluster::Cluster;
use crate::exit::Failure;
use crate::flags::ClusterFlags;

/// Route keys, read and write, inspect and warm memcached server groups.
/// Shown after `--help`: what the exit codes mean, and a few examples.
const AFTER_HELP: &str = "\
Exit codes:
  0  success
  1  the operation failed: a miss, an unreachable server, a write that missed
     its policy or was not applied (add/replace/cas), keys missing after
     `warm --verify`, a value that cannot be decoded
  2  usage or configuration error, reported on one line naming the bad token

Examples:
  memgroup --servers 10.0.0.1:11211,10.0.0.2:11211 --hash new-compat route user:42
  memgroup --groups 'sg1=10.0.0.1:11211;sg2=10.0.1.1:11211' --zone sg1 get user:42
  memgroup --servers memcache://app:secret@10.0.0.1:11211?value_format=evcache get user:42
  echo -n payload | memgroup --servers 10.0.0.1:11211 set blob -
  memgroup --config cluster.toml warm --from sg1 --to sg3 --verify
  memgroup --config cluster.toml bench --concurrency 32 --duration 10
  memgroup completions bash > /etc/bash_completion.d/memgroup";

#[derive(Debug, Parser)]
#[command(name = "memgroup", version, about, propagate_version = true, after_help = AFTER_HELP)]
struct Cli {
    #[command(flatten)]
    cluster: ClusterFlags,
    /// Machine-readable JSON output.
    #[arg(long, global = true)]
    json: bool,
    /// No informational output (per-group write reports, confirmations);
    /// values, JSON and errors still print.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Log what the client does to stderr: -v servers down and up, missed
    /// write policies, topology changes; -vv every operation and request
    /// (spans with group, server, attempt, outcome). RUST_LOG, when set,
    /// chooses instead (e.g. RUST_LOG=memgroup_client=debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

/// KEY VALUE and an expiration time.
#[derive(Debug, clap::Args)]
struct ConditionalArgs {
    /// The key.
    key: String,
    /// The value, or `-` for stdin.
    value: String,
    /// Expiration time in seconds (0 = never; not used by append/prepend).
    #[arg(long, default_value_t = 0)]
    exptime: u32,
}

impl ConditionalArgs {
    async fn run(
        &self,
        cluster: &ClusterFlags,
        command: ops::Conditional,
        flags: u32,
        json: bool,
    ) -> Result<ExitCode, Failure> {
        let client = Cluster::from_flags(cluster)?.client()?;
        ops::store(
            &client,
            command,
            &self.key,
            &self.value,
            self.exptime,
            flags,
            json,
        )
        .await
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show which server (in each group) every key maps to.
    #[command(
        after_help = "Examples:\n  memgroup --servers h1:11211,h2:11211 --hash native route user:42\n  memgroup --config cluster.toml route user:42 --all-strategies\n  memgroup --servers h1:11211,h2:11211,h3:11211,h4:11211 --hash ketama route --compare h1:11211,h2:11211,h3:11211 --old-hash native\n  memgroup --config new.toml route --compare old.toml --from-cluster"
    )]
    Route {
        /// The keys (with --compare: optional, else a sample).
        #[arg(required_unless_present = "compare")]
        keys: Vec<String>,
        /// A table across every hashing strategy.
        #[arg(long, conflicts_with = "compare")]
        all_strategies: bool,
        /// Plan a layout change: what share of keys moves from the OLD
        /// layout (a cluster.toml path, a server list, EVCache groups or a
        /// memcache:// URL; --old-hash for its hashing) to the configured
        /// one, per server from -> to.
        #[arg(long, value_name = "OLD")]
        compare: Option<String>,
        /// With --compare and no keys: this many sample keys (key:0, key:1, …).
        #[arg(long, default_value_t = 10_000, requires = "compare")]
        sample: usize,
        /// With --compare: the keys stored on the old layout's servers
        /// (lru_crawler metadump) instead of a sample.
        #[arg(long, requires = "compare")]
        from_cluster: bool,
    },
    /// Read keys (local group first, falling back per the read policy).
    #[command(
        after_help = "One key writes exactly the value's bytes; several print `key: value` lines.\nExit 1 if any key is missing.\n\nExamples:\n  memgroup --servers h1:11211 get user:42 > value.bin\n  memgroup --config cluster.toml --value-format evcache --json get user:42 user:43"
    )]
    Get {
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Store a value in every group (`-` reads it from stdin).
    #[command(
        after_help = "Examples:\n  memgroup --servers h1:11211 set user:42 Ada --exptime 300\n  cat blob | memgroup --servers h1:11211 set blob -\n  memgroup --config cluster.toml --value-format evcache set visits 41 --type long"
    )]
    Set {
        /// The key.
        key: String,
        /// The value, or `-` for stdin.
        value: String,
        /// Expiration time in seconds (0 = never).
        #[arg(long, default_value_t = 0)]
        exptime: u32,
        /// Client flags stored with the value (without `--type`).
        #[arg(long, default_value_t = 0, conflicts_with = "kind")]
        flags: u32,
        /// Store the value as this type, with the flags and encoding of
        /// `--value-format`.
        #[arg(long = "type", value_enum)]
        kind: Option<ops::ValueType>,
    },
    /// Read keys with their CAS unique (for `cas`).
    Gets {
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Exit 0 only if every key exists (like memexist).
    Exist {
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Store only where the key is absent.
    Add(ConditionalArgs),
    /// Store only where the key is present.
    Replace(ConditionalArgs),
    /// Append to the existing value.
    Append(ConditionalArgs),
    /// Prepend to the existing value.
    Prepend(ConditionalArgs),
    /// Store only if the item still has the CAS unique from `gets`.
    Cas {
        #[command(flatten)]
        store: ConditionalArgs,
        /// The CAS unique `gets` showed.
        #[arg(long)]
        cas: u64,
        /// Client flags stored with the value.
        #[arg(long, default_value_t = 0)]
        flags: u32,
    },
    /// Each server's version, with its group.
    Version,
    /// Each server's state: reachable, round trip, version, up or dead, with
    /// group totals; exit 1 if any server is unreachable.
    #[command(
        after_help = "Examples:\n  memgroup --config cluster.toml status\n  memgroup --config cluster.toml --json status\n  memgroup --config cluster.toml status --watch 5"
    )]
    Status {
        /// Probe again every SECONDS, printing each time, until interrupted.
        #[arg(long, value_name = "SECONDS")]
        watch: Option<f64>,
    },
    /// Each server's round-trip time; exit 1 if any is down (like memping).
    Ping {
        /// Round trips per server.
        #[arg(long, default_value_t = 3)]
        count: usize,
    },
    #[command(
        after_help = "Examples:\n  memgroup --config cluster.toml keys --group sg1 --prefix user: --limit 100\n  memgroup --servers h1:11211 --json keys"
    )]
    /// List the keys stored on a group's servers, with size and expiry
    /// (lru_crawler metadump; like memdump).
    Keys {
        /// Only this group (default: every group).
        #[arg(long)]
        group: Option<String>,
        /// Only keys starting with this.
        #[arg(long)]
        prefix: Option<String>,
        /// At most this many keys.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages (memgroup.1 and one per subcommand) into DIR.
    #[command(hide = true)]
    Man {
        /// The directory.
        dir: std::path::PathBuf,
    },
    /// Store files: the file name is the key, the contents the value (like memcp).
    Cp {
        /// The files.
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
        /// Expiration time in seconds (0 = never).
        #[arg(long, default_value_t = 0)]
        exptime: u32,
    },
    /// Delete keys from every group.
    Delete {
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Set a new expiration time in every group.
    Touch {
        /// The key.
        key: String,
        /// Expiration time in seconds.
        exptime: u32,
    },
    /// Increment a counter.
    Incr {
        /// The key.
        key: String,
        /// The amount.
        #[arg(default_value_t = 1)]
        delta: u64,
    },
    /// Decrement a counter (stops at 0).
    Decr {
        /// The key.
        key: String,
        /// The amount.
        #[arg(default_value_t = 1)]
        delta: u64,
    },
    /// Invalidate every item of one group.
    Flush {
        /// The group to flush.
        #[arg(long)]
        group: String,
        /// Confirm: flushing loses the group's data.
        #[arg(long)]
        yes: bool,
    },
    /// Per-server statistics, with totals per group; or one raw section
    #[command(
        after_help = "Examples:\n  memgroup --config cluster.toml stats --group sg1\n  memgroup --config cluster.toml --json stats slabs"
    )]
    /// (`slabs`, `items`, `settings`, `sizes`, `conns`, …) of every server.
    Stats {
        /// A stats section.
        arg: Option<String>,
        /// Only this group.
        #[arg(long)]
        group: Option<String>,
    },
    /// Write N generated keys through the replicated client (for demos and tests).
    Load {
        /// How many keys.
        #[arg(long, default_value_t = 10_000)]
        count: usize,
        /// Key prefix; keys are `<prefix><n>`.
        #[arg(long, default_value = "key:")]
        prefix: String,
        /// Value size in bytes.
        #[arg(long, default_value_t = 100)]
        value_size: usize,
        /// Requests in flight.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
    },
    /// Copy a group's keys into other groups (the cache warmer).
    #[command(
        after_help = "Exit 1 if a key could not be copied, or (with --verify) is missing.\n\nExamples:\n  memgroup --config cluster.toml warm --from sg1 --to sg3 --verify\n  memgroup --groups \"$GROUPS\" --pool-size 6 --json warm --from sg1 --to sg2 --to sg3"
    )]
    Warm(warm::WarmArgs),
    /// A memslap-like load generator with latency percentiles.
    #[command(
        after_help = "Examples:\n  memgroup --servers h1:11211 bench --ratio 9:1 --keys 10000 --concurrency 32 --duration 10\n  memgroup --config cluster.toml --json bench --ops 100000"
    )]
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A bad flag value is a usage error like any other: one line naming
        // the value, exit 2 (clap's own rendering adds a hint paragraph).
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::InvalidValue | clap::error::ErrorKind::ValueValidation
            ) =>
        {
            let text = e.to_string();
            let line = text.lines().next().unwrap_or_default();
            eprintln!("memgroup: {}", line.strip_prefix("error: ").unwrap_or(line));
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("memgroup: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

/// Sends the client's tracing output to stderr: RUST_LOG if set, else by
/// `-v` count (none: nothing).
fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::fmt::format::FmtSpan;

    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::new(spec),
        _ => match verbose {
            0 => return,
            1 => EnvFilter::new("memgroup_client=info"),
            _ => EnvFilter::new("memgroup_client=debug"),
        },
    };
    // At -vv a span is printed when it closes, with its fields and timing.
    let spans = if verbose >= 2 {
        FmtSpan::CLOSE
    } else {
        FmtSpan::NONE
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(spans)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

async fn run(cli: Cli) -> Result<ExitCode, Failure> {
    let json = cli.json;
    output::set_quiet(cli.quiet);
    match cli.command {
        Command::Route {
            keys,
            compare: Some(old),
            sample,
            from_cluster,
            ..
        } => plan::compare(&cli.cluster, &old, &keys, sample, from_cluster, json).await,
        Command::Route {
            keys,
            all_strategies,
            ..
        } => ops::route(&cli.cluster, &keys, all_strategies, json),
        Command::Get { keys } => {
            ops::get(&Cluster::from_flags(&cli.cluster)?.client()?, &keys, json).await
        }
        Command::Set {
            key,
            value,
            exptime,
            flags,
            kind,
        } => {
            ops::set(
                &Cluster::from_flags(&cli.cluster)?.client()?,
                &key,
                &value,
                exptime,
                flags,
                kind,
                json,
            )
            .await
        }
        Command::Delete { keys } => {
            ops::delete(&Cluster::from_flags(&cli.cluster)?.client()?, &keys, json).await
        }
        Command::Touch { key, exptime } => {
            ops::touch(
                &Cluster::from_flags(&cli.cluster)?.client()?,
                &key,
                exptime,
                json,
            )
            .await
        }
        Command::Incr { key, delta } => {
            ops::arith(
                &Cluster::from_flags(&cli.cluster)?.client()?,
                &key,
                delta,
                true,
                json,
            )
            .await
        }
        Command::Decr { key, delta } => {
            ops::arith(
                &Cluster::from_flags(&cli.cluster)?.client()?,
                &key,
                delta,
                false,
                json,
            )
            .await
        }
        Command::Flush { group, yes } => {
            ops::flush(
                &Cluster::from_flags(&cli.cluster)?.client()?,
                &group,
                yes,
                json,
            )
            .await
        }
        Command::Stats { arg: None, group } => {
            ops::stats(
                &Cluster::from_flags(&cli.cluster)?.client()?,
                group.as_deref(),
                json,
            )
            .await
        }
        Command::Stats {
            arg: Some(arg),
            group,
        } => {
            ops::stats_section(
                &Cluster::from_flags(&cli.cluster)?.client()?,
                &arg,
                group.as_deref(),
                json,
            )
            .await
        }
        Command::Gets { keys } => {
            ops::gets(&Cluster::from_flags(&cli.cluster)?.client()?, &keys, json).await
        }
        Command::Exist { keys } => {
            ops::exist(&Cluster::from_flags(&cli.cluster)?.client()?, &keys, json).await
        }
        Command::Version => ops::version(&Cluster::from_flags(&cli.cluster)?.client()?, json).await,
        Command::Status { watch } => status::run(&cli.cluster, watch, json).await,
        Command::Completions { shell } => {
            use clap::CommandFactory;
            // Into a buffer first: clap_complete panics on a closed pipe.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "memgroup", &mut script);
            output::write_line(String::from_utf8_lossy(&script).trim_end());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => {
            use clap::CommandFactory;
            std::fs::create_dir_all(&dir)
                .map_err(|e| Failure::Op(format!("{}: {e}", dir.display())))?;
            clap_mangen::generate_to(Cli::command(), &dir)
                .map_err(|e| Failure::Op(format!("writing man pages: {e}")))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Ping { count } => ops::ping(&cli.cluster, count, json).await,
        Command::Keys {
            group,
            prefix,
            limit,
        } => {
            ops::keys(
                &cli.cluster,
                group.as_deref(),
                prefix.as_deref(),
                limit,
                json,
            )
            .await
        }
        Command::Cp { files, exptime } => {
            ops::cp(
                &Cluster::from_flags(&cli.cluster)?.client()?,
                &files,
                exptime,
                json,
            )
            .await
        }
        Command::Add(a) => a.run(&cli.cluster, ops::Conditional::Add, 0, json).await,
        Command::Replace(a) => {
            a.run(&cli.cluster, ops::Conditional::Replace, 0, json)
                .await
        }
        Command::Append(a) => a.run(&cli.cluster, ops::Conditional::Append, 0, json).await,
        Command::Prepend(a) => {
            a.run(&cli.cluster, ops::Conditional::Prepend, 0, json)
                .await
        }
        Command::Cas { store, cas, flags } => {
            store
                .run(&cli.cluster, ops::Conditional::Cas(cas), flags, json)
                .await
        }
        Command::Load {
            count,
            prefix,
            value_size,
            concurrency,
        } => {
            ops::load(
                &Cluster::from_flags(&cli.cluster)?.client()?,
                count,
                &prefix,
                value_size,
                concurrency,
                json,
            )
            .await
        }
        Command::Warm(args) => warm::run(&cli.cluster, &args, json).await,
        Command::Bench(args) => {
            let cluster = Cluster::from_flags(&cli.cluster)?;
            let client = cluster.client()?;
            let _watch = cluster.watch(&client, |spec| spec);
            bench::run(&client, &args, json).await
        }
    }
}
