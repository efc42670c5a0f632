//! How the tool reads an expiry: `--exptime TTL` (seconds, or with a unit:
//! `90s`, `10m`, `2h`, `40d`; 0 = never) or `--exptime-at UNIX_TIME`. A bare
//! number is always relative seconds, whatever its size: the library sends
//! one over 30 days as the absolute time it ends at (memcached would read
//! the number itself as a date in 1970).

use std::time::{Duration, UNIX_EPOCH};

use memgroup::client::Expiry;

/// `--exptime` / `--exptime-at`, for the commands that store.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ExpiryArgs {
    /// How long the item lives: seconds, or a number with a unit (`90s`,
    /// `10m`, `2h`, `40d`); 0 = never (default).
    #[arg(
        long,
        visible_alias = "ttl",
        value_name = "TTL",
        value_parser = parse_ttl,
        conflicts_with = "exptime_at"
    )]
    exptime: Option<Expiry>,
    /// Expire at this Unix time (seconds) instead; one in the past is refused.
    #[arg(long, value_name = "UNIX_TIME", value_parser = parse_at)]
    exptime_at: Option<Expiry>,
}

impl ExpiryArgs {
    /// The expiry asked for: never when neither flag is given.
    pub(crate) fn expiry(&self) -> Expiry {
        self.exptime.or(self.exptime_at).unwrap_or(Expiry::Never)
    }

    /// Whether either flag was given.
    pub(crate) fn given(&self) -> bool {
        self.exptime.is_some() || self.exptime_at.is_some()
    }
}

/// A TTL: `300`, `90s`, `10m`, `2h`, `40d`.
pub(crate) fn parse_ttl(text: &str) -> Result<Expiry, String> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "{text:?}: a TTL is seconds or a number with s, m, h or d (90s, 10m, 40d)"
            ));
        }
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: a TTL is a whole number (with s, m, h or d)"))?;
    let seconds = n
        .checked_mul(scale)
        .ok_or_else(|| format!("{text:?}: too long"))?;
    Ok(if seconds == 0 {
        Expiry::Never
    } else {
        Expiry::After(Duration::from_secs(seconds))
    })
}

/// A Unix time.
fn parse_at(text: &str) -> Result<Expiry, String> {
    let seconds: u64 = text
        .parse()
        .map_err(|_| format!("{text:?}: a Unix time is a whole number of seconds"))?;
    Ok(Expiry::At(UNIX_EPOCH + Duration::from_secs(seconds)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_with_and_without_units() {
        let after = |s: u64| Ok(Expiry::After(Duration::from_secs(s)));
        assert_eq!(parse_ttl("300"), after(300));
        assert_eq!(parse_ttl("90s"), after(90));
        assert_eq!(parse_ttl("10m"), after(600));
        assert_eq!(parse_ttl("2h"), after(7200));
        assert_eq!(parse_ttl("40d"), after(40 * 86_400));
        assert_eq!(parse_ttl("3456000"), after(3_456_000));
        assert_eq!(parse_ttl("0"), Ok(Expiry::Never));
        for bad in ["", "d", "10w", "-5", "1.5h", "10 m"] {
            assert!(parse_ttl(bad).is_err(), "{bad}");
        }
    }
}
