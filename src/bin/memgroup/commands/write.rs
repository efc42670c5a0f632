//! The writes, each to every group: `set`, the conditional stores (`add`,
//! `replace`, `append`, `prepend`, `cas`), `delete`, `touch`, `incr` and
//! `decr`.

use std::process::ExitCode;

use memgroup::client::value::{ToValue, Value, ValueFormat};
use memgroup::client::{Client, Expiry, WriteOptions};
use memgroup::proto::{ArithMode, MetaFlag};
use serde_json::json;

use super::common::{ValueArg, each_key, write_report};
use crate::cluster::Cluster;
use crate::exit::Failure;
use crate::expiry::{ExpiryArgs, parse_ttl};
use crate::flags::ClusterFlags;
use crate::output::{self, Refused, outln};

/// `set`'s key, value and how to store it.
#[derive(Debug, clap::Args)]
pub(crate) struct SetArgs {
    /// The key.
    key: String,
    #[command(flatten)]
    value: ValueArg,
    #[command(flatten)]
    expiry: ExpiryArgs,
    /// Client flags stored with the value (without `--type`).
    #[arg(long, default_value_t = 0, conflicts_with = "kind")]
    flags: u32,
    /// Store the value as this type, with the flags and encoding of
    /// `--value-format` (the default raw format takes string and bytes only).
    #[arg(long = "type", value_enum)]
    kind: Option<ValueType>,
}

/// KEY VALUE and an expiration time.
#[derive(Debug, clap::Args)]
pub(crate) struct StoreArgs {
    /// The key.
    key: String,
    #[command(flatten)]
    value: ValueArg,
    /// When it expires.
    #[command(flatten)]
    expiry: ExpiryArgs,
    /// Client flags stored with the value.
    #[arg(long, conflicts_with = "kind")]
    flags: Option<u32>,
    /// Store the value as this type, with the flags and encoding of
    /// `--value-format`, as `set --type` does.
    #[arg(long = "type", value_enum)]
    kind: Option<ValueType>,
}

/// KEY and the bytes `append`/`prepend` add: the item keeps its own flags
/// and expiry, so neither is given.
#[derive(Debug, clap::Args)]
pub(crate) struct AppendArgs {
    /// The key.
    key: String,
    #[command(flatten)]
    value: ValueArg,
}

/// `cas`: a conditional store with the CAS unique and the flags to store.
#[derive(Debug, clap::Args)]
pub(crate) struct CasArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The CAS unique `gets` showed.
    #[arg(long)]
    cas: u64,
}

/// The keys to delete.
#[derive(Debug, clap::Args)]
pub(crate) struct DeleteArgs {
    /// The keys.
    #[arg(required = true)]
    keys: Vec<String>,
}

/// `touch`'s key and its new expiration time.
#[derive(Debug, clap::Args)]
pub(crate) struct TouchArgs {
    /// The key.
    key: String,
    /// The new expiration: seconds, or with a unit (`90s`, `10m`, `40d`);
    /// 0 = never. Or --exptime / --exptime-at, as the stores take it.
    #[arg(
        value_name = "EXPTIME",
        value_parser = parse_ttl,
        required_unless_present_any = ["exptime", "exptime_at"],
        conflicts_with_all = ["exptime", "exptime_at"]
    )]
    ttl: Option<Expiry>,
    #[command(flatten)]
    expiry: ExpiryArgs,
}

/// `incr`/`decr`: the counter and the amount.
#[derive(Debug, clap::Args)]
pub(crate) struct CounterArgs {
    /// The key.
    key: String,
    /// The amount.
    #[arg(default_value_t = 1)]
    delta: u64,
    /// Create a missing counter with this value (the amount not applied),
    /// instead of failing: memcached's meta arithmetic `ma … N0 J<N>`. The
    /// counter then never expires.
    #[arg(long, value_name = "N")]
    initial: Option<u64>,
}

/// `set`: the value (typed with `--type`) stored in every group.
pub(crate) async fn set(args: &SetArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let client = Cluster::from_flags(flags)?.client()?;
    let data = args.value.read()?;
    let key = &args.key;
    let (data, flags) = typed(&client, args.kind, data, args.flags)?;
    let options = WriteOptions::new()
        .flags(flags)
        .expiry(args.expiry.expiry());
    let outcome = client.set(key, &data, options).await?;
    Ok(write_report(key, &outcome, Refused::NotStored))
}

/// The bytes and client flags a store sends: `data` and `flags` as given,
/// or (`--type`) the value parsed as that type and encoded, with its flags,
/// by the client's value format.
fn typed(
    client: &Client,
    kind: Option<ValueType>,
    data: Vec<u8>,
    flags: u32,
) -> Result<(Vec<u8>, u32), Failure> {
    let Some(kind) = kind else {
        return Ok((data, flags));
    };
    kind.storable(client.value_format())?;
    let (bytes, flags) = client.value_format().encode(&kind.parse(&data)?)?;
    Ok((bytes.to_vec(), flags))
}

/// The conditional stores with a whole value: `add`, `replace`, `cas`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Conditional {
    Add,
    Replace,
    Cas(u64),
}

/// `append`, or with `prepend` `prepend`: bytes added to the item as it is
/// (refused where it is missing).
pub(crate) async fn append(
    args: &AppendArgs,
    prepend: bool,
    flags: &ClusterFlags,
) -> Result<ExitCode, Failure> {
    let client = Cluster::from_flags(flags)?.client()?;
    let data = args.value.read()?;
    let key = &args.key;
    let outcome = if prepend {
        client.prepend(key, &data).await?
    } else {
        client.append(key, &data).await?
    };
    Ok(write_report(key, &outcome, Refused::Missing))
}

/// `cas`: store only if the item still has the CAS unique.
pub(crate) async fn cas(args: &CasArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    store(&args.store, Conditional::Cas(args.cas), flags).await
}

/// `add`, `replace`, `cas` (`command`): a conditional store, with the
/// item's flags and expiry.
pub(crate) async fn store(
    args: &StoreArgs,
    command: Conditional,
    flags: &ClusterFlags,
) -> Result<ExitCode, Failure> {
    let client = Cluster::from_flags(flags)?.client()?;
    let data = args.value.read()?;
    let (data, item_flags) = typed(&client, args.kind, data, args.flags.unwrap_or(0))?;
    let key = &args.key;
    let options = WriteOptions::new()
        .flags(item_flags)
        .expiry(args.expiry.expiry());
    let (outcome, refused) = match command {
        Conditional::Add => (client.add(key, &data, options).await?, Refused::Exists),
        Conditional::Replace => (client.replace(key, &data, options).await?, Refused::Missing),
        Conditional::Cas(cas) => (
            client.cas(key, &data, cas, options).await?,
            Refused::Changed,
        ),
    };
    Ok(write_report(key, &outcome, refused))
}

/// The type `set --type` stores a value as, encoded by the value format.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum ValueType {
    /// Text (UTF-8).
    String,
    /// Raw bytes.
    Bytes,
    /// A 32-bit integer (Java int).
    Int,
    /// A 64-bit integer (Java long, Python int).
    Long,
    /// true or false.
    Bool,
    /// A 64-bit float (Java double, Python float).
    Double,
}

impl ValueType {
    /// Whether `format` stores this type so that `get` reads it back: the
    /// raw format stores bytes (text and bytes only; a number or a bool
    /// would come back as its encoding's bytes).
    fn storable(self, format: ValueFormat) -> Result<(), Failure> {
        let typed = !matches!(self, ValueType::String | ValueType::Bytes);
        if typed && matches!(format, ValueFormat::Raw) {
            // The name `--type` took, as clap knows it.
            let name = clap::ValueEnum::to_possible_value(&self)
                .map_or_else(String::new, |v| v.get_name().to_string());
            return Err(Failure::Usage(format!(
                "--type {name} needs a value format that stores types (--value-format \
                 spymemcached, evcache, whalin or python-memcached); the raw format stores bytes"
            )));
        }
        Ok(())
    }

    fn parse(self, data: &[u8]) -> Result<Value, Failure> {
        let text = || {
            String::from_utf8(data.to_vec())
                .map_err(|_| Failure::Usage(format!("{self:?} value is not UTF-8 text")))
        };
        let bad = |what: &str| {
            Failure::Usage(format!("{:?} is not {what}", String::from_utf8_lossy(data)))
        };
        Ok(match self {
            ValueType::String => Value::String(text()?),
            ValueType::Bytes => data.to_value(),
            ValueType::Int => Value::Int(text()?.trim().parse().map_err(|_| bad("an int"))?),
            ValueType::Long => Value::Long(text()?.trim().parse().map_err(|_| bad("a long"))?),
            ValueType::Bool => {
                Value::Bool(text()?.trim().parse().map_err(|_| bad("true or false"))?)
            }
            ValueType::Double => {
                Value::Double(text()?.trim().parse().map_err(|_| bad("a number"))?)
            }
        })
    }
}

/// `delete`: each key from every group.
pub(crate) async fn delete(args: &DeleteArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let client = Cluster::from_flags(flags)?.client()?;
    each_key(&client, &args.keys, Refused::NotFound, |key| {
        client.delete(key)
    })
    .await
}

/// `touch`: a new expiration time in every group.
pub(crate) async fn touch(args: &TouchArgs, flags: &ClusterFlags) -> Result<ExitCode, Failure> {
    let client = Cluster::from_flags(flags)?.client()?;
    let expiry = args.ttl.unwrap_or_else(|| args.expiry.expiry());
    let outcome = client.touch(&args.key, expiry).await?;
    Ok(write_report(&args.key, &outcome, Refused::NotFound))
}

/// `incr`/`decr --initial`: one meta arithmetic command that creates the
/// counter at `initial` when it is missing; the counter's value after it.
async fn counter_or_create(
    client: &Client,
    key: &str,
    delta: u64,
    incr: bool,
    initial: u64,
) -> Result<Option<u64>, Failure> {
    let mode = if incr {
        ArithMode::Increment
    } else {
        ArithMode::Decrement
    };
    let flags = [
        MetaFlag::ArithMode(mode),
        MetaFlag::Delta(delta),
        MetaFlag::Vivify(0),
        MetaFlag::Initial(initial),
        MetaFlag::ReturnValue,
    ];
    let Some(reply) = client.meta_arith(key, &flags).await? else {
        return Ok(None);
    };
    let value = reply.value.as_deref().unwrap_or_default();
    let number = std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| {
            Failure::Op(format!(
                "{key}: the counter's value is not a number: {:?}",
                String::from_utf8_lossy(value)
            ))
        })?;
    Ok(Some(number))
}

/// `incr` (`incr` true) or `decr`: the counter's new value.
pub(crate) async fn counter(
    args: &CounterArgs,
    incr: bool,
    flags: &ClusterFlags,
) -> Result<ExitCode, Failure> {
    let json = crate::output::json();
    let client = Cluster::from_flags(flags)?.client()?;
    let (key, delta) = (&args.key, args.delta);
    let value = match (args.initial, incr) {
        (Some(initial), _) => counter_or_create(&client, key, delta, incr, initial).await?,
        (None, true) => client.incr(key, delta).await?,
        (None, false) => client.decr(key, delta).await?,
    };
    match value {
        Some(v) if json => output::record(json!({"key": key, "value": v})),
        Some(v) => outln!("{v}"),
        None => {
            if json {
                output::record(json!({"key": key, "value": null}));
            }
            output::warn(Some(key), "not found");
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}
