//! A service's use of memgroup: its client built from the same
//! `cluster.toml` the `memgroup` tool reads, with every setting of the file
//! (groups, zone, timeouts, value format, logins, TLS, limits), then typed
//! reads and writes. Errors, the file's included, go up with `?` as the
//! client's one error type.
//!
//! ```sh
//! cargo run --example service -- path/to/cluster.toml   # or MEMGROUP_CONFIG=…
//! ```
//!
//! A service depends on `memgroup = { version = "0.1", default-features =
//! false, features = ["config"] }` (add `"tls"` for a file with `[tls]`).

use std::path::PathBuf;
use std::process::ExitCode;

use memgroup::client::{Client, Error};
use memgroup::config::ClusterFile;
use memgroup::topology::Group;

/// The file: the first argument, else `MEMGROUP_CONFIG` (as for the tool),
/// else `cluster.toml` in the working directory.
fn config_path() -> PathBuf {
    std::env::args_os()
        .nth(1)
        .or_else(|| std::env::var_os("MEMGROUP_CONFIG"))
        .map_or_else(|| PathBuf::from("cluster.toml"), PathBuf::from)
}

/// One visit: the counter read, incremented and written back (to every
/// group, as the write policy wants), the greeting with it.
async fn visit(client: &Client) -> Result<i64, Error> {
    let visits: i64 = client.get_as("service:visits").await?.unwrap_or(0) + 1;
    let outcome = client.set_as("service:visits", &visits, 3600).await?;
    if !outcome.is_complete() {
        // Ok means the policy was met; some group may still have missed it.
        for (group, error) in outcome.failed() {
            eprintln!("service: group {group} missed the write: {error}");
        }
    }
    let greeting = format!("hello, visitor {visits}");
    client.set_as("service:greeting", &greeting, 3600).await?;
    let read: Option<String> = client.get_as("service:greeting").await?;
    assert_eq!(read.as_deref(), Some(greeting.as_str()), "just written");
    Ok(visits)
}

async fn run() -> Result<(), Error> {
    let path = config_path();
    // One call: the file read and checked, the files it names read, every
    // setting applied. A `ConfigError` converts into `Error` for `?`.
    let client = ClusterFile::read(&path)?.builder()?.build()?;
    let visits = visit(&client).await?;
    let topology = client.topology();
    let groups: Vec<&str> = topology.groups().iter().map(Group::name).collect();
    println!(
        "visit {visits}: stored as {} values in groups {} of {}",
        client.value_format().name(),
        groups.join(", "),
        path.display()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // The message and its causes on one line.
            eprintln!("service: {error}");
            ExitCode::FAILURE
        }
    }
}
