//! How the tool reads an expiry: `--exptime TTL` (seconds, or with a unit:
//! `90s`, `10m`, `2h`, `40d`; 0 = never) or `--exptime-at` (a Unix time,
//! or a UTC date `2027-01-01` / date and time `2027-01-01T12:00:00Z`). A bare
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
    /// Expire at this time instead: Unix seconds, a UTC date (2027-01-01)
    /// or date and time (2027-01-01T12:00:00Z); one in the past is refused.
    #[arg(long, value_name = "TIME", value_parser = parse_at)]
    exptime_at: Option<Expiry>,
}

impl ExpiryArgs {
    /// The expiry asked for: never when neither flag is given.
    pub(crate) fn expiry(&self) -> Expiry {
        self.exptime.or(self.exptime_at).unwrap_or(Expiry::Never)
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

/// A Unix time, or a UTC date (and time).
fn parse_at(text: &str) -> Result<Expiry, String> {
    let seconds = match text.parse::<u64>() {
        Ok(seconds) => seconds,
        Err(_) if text.contains('-') => utc_seconds(text).ok_or_else(|| {
            format!(
                "{text:?}: a date is YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS]Z (or +00:00), in UTC (or give Unix seconds)"
            )
        })?,
        Err(_) => {
            return Err(format!(
                "{text:?}: give Unix seconds or a UTC date (2027-01-01, 2027-01-01T12:00:00Z)"
            ));
        }
    };
    Ok(Expiry::At(UNIX_EPOCH + Duration::from_secs(seconds)))
}

/// `YYYY-MM-DD` (midnight) or `YYYY-MM-DDTHH:MM[:SS[.fff]]` ending in `Z`
/// or `+00:00` (as `date -u -Iseconds` prints it), in UTC, as Unix seconds
/// (a fraction is dropped); `None` for anything else (another offset, a day
/// the month does not have, a year before 1970).
fn utc_seconds(text: &str) -> Option<u64> {
    let (date, time) = match text.split_once(['T', 't', ' ']) {
        Some((date, time)) => {
            let time = time
                .strip_suffix(['Z', 'z'])
                .or_else(|| time.strip_suffix("+00:00"))?;
            // Whole seconds: memcached's expiry has no finer grain.
            let whole = match time.split_once('.') {
                Some((whole, fraction))
                    if !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit()) =>
                {
                    whole
                }
                Some(_) => return None,
                None => time,
            };
            (date, Some(whole))
        }
        None => (text, None),
    };
    let number = |part: &str, digits: usize| -> Option<u64> {
        (part.len() == digits && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse().ok())
            .flatten()
    };
    let mut ymd = date.split('-');
    let (year, month, day) = (
        number(ymd.next()?, 4)?,
        number(ymd.next()?, 2)?,
        number(ymd.next()?, 2)?,
    );
    if ymd.next().is_some() || year < 1970 || !(1..=12).contains(&month) {
        return None;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if day == 0 || day > month_days[month as usize - 1] {
        return None;
    }
    let mut clock = 0;
    if let Some(time) = time {
        let mut hms = time.split(':');
        let (hour, minute) = (number(hms.next()?, 2)?, number(hms.next()?, 2)?);
        let second = match hms.next() {
            Some(s) => number(s, 2)?,
            None => 0,
        };
        if hms.next().is_some() || hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        clock = hour * 3600 + minute * 60 + second;
    }
    let years = (1970..year)
        .map(|y| {
            if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) {
                366
            } else {
                365
            }
        })
        .sum::<u64>();
    let days = years + month_days[..month as usize - 1].iter().sum::<u64>() + day - 1;
    Some(days * 86_400 + clock)
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

    #[test]
    fn exptime_at_takes_unix_seconds_or_a_utc_date() {
        let at = |s: u64| Ok(Expiry::At(UNIX_EPOCH + Duration::from_secs(s)));
        assert_eq!(parse_at("1798761600"), at(1_798_761_600));
        // `date -u -d 2027-01-01 +%s`, and the same day at noon.
        assert_eq!(parse_at("2027-01-01"), at(1_798_761_600));
        assert_eq!(parse_at("2027-01-01T12:00:00Z"), at(1_798_761_600 + 43_200));
        assert_eq!(parse_at("2027-01-01T12:30Z"), at(1_798_761_600 + 45_000));
        // `date -u -Iseconds`, a fraction, lower case.
        assert_eq!(
            parse_at("2027-01-01T12:00:00+00:00"),
            at(1_798_761_600 + 43_200)
        );
        assert_eq!(
            parse_at("2027-01-01T12:00:00.750Z"),
            at(1_798_761_600 + 43_200)
        );
        assert_eq!(parse_at("2027-01-01t12:00:00z"), at(1_798_761_600 + 43_200));
        assert_eq!(parse_at("1970-01-01"), at(0));
        // A leap day, and the day after it.
        assert_eq!(parse_at("2028-02-29"), at(1_835_395_200));
        assert_eq!(parse_at("2028-03-01"), at(1_835_481_600));
        for bad in [
            "2027-02-29",
            "2027-13-01",
            "2027-1-01",
            "2027-01-01T12:00:00+02:00",
            "2027-01-01T12:00:00.Z",
            "2027-01-01T12:00:00.5x",
            "2027-01-01T12:00:00",
            "2027-01-01T24:00:00Z",
            "1969-12-31",
            "tomorrow",
            "2027-01-01-01",
        ] {
            assert!(parse_at(bad).is_err(), "{bad}");
        }
    }
}
