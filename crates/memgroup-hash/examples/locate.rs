//! `locate`: prints where the reference memcached clients would route keys.
//!
//! ```text
//! locate --strategy <name> --servers h:p,h:p,… [--weights 5,3,…]
//!        [--node-naming spymemcached|libmemcached|evcache] [--hostnames n1,n2,…]
//!        [--sanitize] [--failover | --hash-only] [--max-probes N]  < keys
//! ```
//!
//! Keys are read from stdin, one per line, split on `\n` only; a line's bytes are the key
//! as-is (not trimmed, not validated, not required to be UTF-8). One output line per key:
//!
//! * by default, the chosen server as `host:port`;
//! * with `--failover`, tab-separated, the order in which Whalin's `getSock` would try the
//!   servers if every one it tried were dead (bounded: see `Locator::failover`);
//! * with `--hash-only`, the raw key hash in decimal, in the reference client's signedness.
//!
//! `--sanitize` URL-encodes keys first, as Whalin's `sanitizeKeys` does. `--hostnames` sets
//! the per-server host name the `evcache` naming uses (default: the host string). Bad
//! arguments print a message on stderr and exit with status 2.

use std::io::{self, BufWriter, Read, Write};
use std::process::ExitCode;

use memgroup_hash::{HashStrategy, Locator, LocatorConfig, Node, NodeNaming};

const USAGE: &str = "usage: locate --strategy <native|old-compat|new-compat|consistent|ketama|\
libmemcached-modula-oaat|libmemcached-modula-crc|libmemcached-ketama-unweighted|\
python-memcached|python-memcached-1.59> --servers h:p,h:p,... [--weights w,w,...] \
[--node-naming spymemcached|libmemcached|evcache] [--hostnames n,n,...] [--sanitize] \
[--failover | --hash-only] [--max-probes N] < keys";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Output {
    Server,
    Failover,
    Hash,
}

#[derive(Debug)]
struct Args {
    config: LocatorConfig,
    nodes: Vec<Node>,
    output: Output,
}

/// Why the command line was rejected.
#[derive(Debug)]
enum ArgError {
    Help,
    Bad(String),
}

impl<E: std::fmt::Display> From<E> for ArgError {
    fn from(e: E) -> ArgError {
        ArgError::Bad(e.to_string())
    }
}

fn bad(msg: impl Into<String>) -> ArgError {
    ArgError::Bad(msg.into())
}

fn parse_args(mut argv: impl Iterator<Item = String>) -> Result<Args, ArgError> {
    let mut strategy: Option<HashStrategy> = None;
    let mut servers: Option<Vec<Node>> = None;
    let mut weights: Option<Vec<u32>> = None;
    let mut hostnames: Option<Vec<String>> = None;
    let mut naming: Option<NodeNaming> = None;
    let mut max_probes: Option<u32> = None;
    let (mut sanitize, mut failover, mut hash_only) = (false, false, false);

    while let Some(arg) = argv.next() {
        // Accept both `--flag value` and `--flag=value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let takes_value = matches!(
            flag.as_str(),
            "--strategy"
                | "--servers"
                | "--weights"
                | "--node-naming"
                | "--hostnames"
                | "--max-probes"
        );
        let value = if takes_value {
            match inline {
                Some(v) => v,
                None => argv
                    .next()
                    .ok_or_else(|| bad(format!("{flag} needs a value")))?,
            }
        } else if inline.is_some() {
            return Err(bad(format!("{flag} takes no value")));
        } else {
            String::new()
        };
        let duplicate = || bad(format!("{flag} given twice"));
        match flag.as_str() {
            "--help" | "-h" => return Err(ArgError::Help),
            "--strategy" if strategy.is_none() => strategy = Some(value.parse()?),
            "--servers" if servers.is_none() => {
                servers = Some(value.split(',').map(str::parse).collect::<Result<_, _>>()?);
            }
            "--weights" if weights.is_none() => {
                let parsed: Result<Vec<u32>, _> = value.split(',').map(str::parse).collect();
                weights = Some(parsed.map_err(|_| bad(format!("invalid --weights {value:?}")))?);
            }
            "--hostnames" if hostnames.is_none() => {
                hostnames = Some(value.split(',').map(str::to_owned).collect());
            }
            "--node-naming" if naming.is_none() => naming = Some(value.parse()?),
            "--max-probes" if max_probes.is_none() => {
                max_probes = Some(
                    value
                        .parse()
                        .map_err(|_| bad(format!("invalid --max-probes {value:?}")))?,
                );
            }
            "--sanitize" if !sanitize => sanitize = true,
            "--failover" if !failover => failover = true,
            "--hash-only" if !hash_only => hash_only = true,
            "--strategy" | "--servers" | "--weights" | "--hostnames" | "--node-naming"
            | "--max-probes" | "--sanitize" | "--failover" | "--hash-only" => {
                return Err(duplicate());
            }
            _ => return Err(bad(format!("unknown argument {arg:?}"))),
        }
    }

    let strategy = strategy.ok_or_else(|| bad("--strategy is required"))?;
    let mut nodes = servers.ok_or_else(|| bad("--servers is required"))?;
    if let Some(weights) = weights {
        if weights.len() != nodes.len() {
            return Err(bad(format!(
                "{} weights for {} servers",
                weights.len(),
                nodes.len()
            )));
        }
        nodes = nodes
            .into_iter()
            .zip(weights)
            .map(|(n, w)| n.with_weight(w))
            .collect();
    }
    if let Some(hostnames) = hostnames {
        if hostnames.len() != nodes.len() {
            return Err(bad(format!(
                "{} host names for {} servers",
                hostnames.len(),
                nodes.len()
            )));
        }
        nodes = nodes
            .into_iter()
            .zip(hostnames)
            .map(|(n, h)| n.with_hostname(h))
            .collect();
    }
    if failover && hash_only {
        return Err(bad("--failover and --hash-only exclude each other"));
    }
    let mut config = LocatorConfig::new(strategy).with_sanitize_keys(sanitize);
    if let Some(naming) = naming {
        config = config.with_node_naming(naming);
    }
    if let Some(probes) = max_probes {
        config = config.with_max_failover_probes(probes);
    }
    let output = if failover {
        Output::Failover
    } else if hash_only {
        Output::Hash
    } else {
        Output::Server
    };
    Ok(Args {
        config,
        nodes,
        output,
    })
}

fn run(args: &Args, locator: &Locator) -> io::Result<()> {
    let mut input = Vec::new();
    io::stdin().lock().read_to_end(&mut input)?;
    if input.is_empty() {
        return Ok(());
    }
    // A final newline ends the last key rather than starting an empty one.
    let body = input.strip_suffix(b"\n").unwrap_or(&input);
    let names: Vec<String> = args.nodes.iter().map(Node::to_string).collect();
    let mut out = BufWriter::new(io::stdout().lock());
    for line in body.split(|&b| b == b'\n') {
        let key = locator.wire_key(line);
        match args.output {
            Output::Server => writeln!(out, "{}", names[locator.locate(&key)])?,
            Output::Hash => writeln!(out, "{}", locator.hash(&key))?,
            Output::Failover => {
                for (i, node) in locator.failover(&key).enumerate() {
                    if i > 0 {
                        out.write_all(b"\t")?;
                    }
                    out.write_all(names[node].as_bytes())?;
                }
                out.write_all(b"\n")?;
            }
        }
    }
    out.flush()
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(ArgError::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(ArgError::Bad(msg)) => {
            eprintln!("locate: {msg}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let locator = match Locator::new(args.config, &args.nodes) {
        Ok(locator) => locator,
        Err(e) => {
            eprintln!("locate: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args, &locator) {
        Ok(()) => ExitCode::SUCCESS,
        // `locate … | head` is normal use.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("locate: {e}");
            ExitCode::FAILURE
        }
    }
}
