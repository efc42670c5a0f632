//! `--verify`: every key of the source's listings checked in a target
//! group — present, and with the value and flags copied — and a mismatch
//! re-read from the source once, so a key that changed, expired or was
//! deleted there meanwhile is not counted as lost.

use std::collections::HashMap;

use memgroup::client::Client;

use super::{Args, Copied, digest};
use crate::exit::Failure;

/// A target group and a client of it alone.
pub(super) struct Target<'a> {
    pub(super) group: &'a str,
    pub(super) client: &'a Client,
}

/// The keys of `listed` the target lacks (or holds with another value than
/// the one copied) while the source still holds them as copied, as
/// `(group, key)`.
pub(super) async fn check(
    source: &Client,
    target: &Target<'_>,
    listed: &[Vec<u8>],
    copied: &HashMap<Vec<u8>, Copied>,
    args: &Args,
) -> Result<Vec<(String, Vec<u8>)>, Failure> {
    let mut missing = Vec::new();
    for chunk in listed.chunks(args.batch.max(1)) {
        let found = super::copy::retry(args.retries, || target.client.get_multi(chunk))
            .await
            .map_err(Failure::from)?;
        let suspects: Vec<&Vec<u8>> = chunk
            .iter()
            .filter(|key| match (found.get(key), copied.get(*key)) {
                (None, _) => true,
                (Some(item), Some(&Copied::Value { digest: d, flags })) => {
                    digest(&item.value) != d || item.flags != flags
                }
                (Some(_), _) => false,
            })
            .collect();
        if suspects.is_empty() {
            continue;
        }
        // Read the source again: what changed or went away there is fine.
        let now = super::copy::retry(args.retries, || source.get_multi(&suspects))
            .await
            .map_err(Failure::from)?;
        for key in suspects {
            let lost = match (now.outcome(key), copied.get(key)) {
                // Gone from the source (expired, deleted, evicted).
                (Some(Ok(None)), _) => false,
                // Changed at the source since it was copied.
                (Some(Ok(Some(item))), Some(&Copied::Value { digest: d, flags })) => {
                    digest(&item.value) == d && item.flags == flags
                }
                // Still at the source, and never copied or absent here.
                (Some(Ok(Some(_))), _) => found.get(key).is_none(),
                // The source cannot say: count it, rather than pass it.
                _ => true,
            };
            if lost {
                missing.push((target.group.to_string(), key.clone()));
            }
        }
    }
    Ok(missing)
}
