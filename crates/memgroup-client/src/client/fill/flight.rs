//! One fill per key within the process: concurrent callers of
//! `get_or_fill` for the same key share the first one's work (its requests
//! and its fill) and its answer.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;

use super::Filled;
use crate::error::Error;

/// A flight's answer, once it lands.
type Answer = Option<Result<Filled, Error>>;

/// The flights in the air, by wire key.
#[derive(Debug, Default)]
pub(crate) struct Flights {
    flying: Mutex<HashMap<Box<[u8]>, watch::Receiver<Answer>>>,
}

/// What a caller of `get_or_fill` is for its key.
pub(super) enum Role {
    /// The first: it does the work and lands the answer for everyone.
    Leader(Leader),
    /// Another caller's flight is in the air: wait for its answer.
    Follower(watch::Receiver<Answer>),
}

/// The leader's hold on its flight: lands the answer, and takes the flight
/// off the map however the leader ends (a cancelled leader's followers see
/// the flight end without an answer and start over).
pub(super) struct Leader {
    flights: Arc<Flights>,
    key: Box<[u8]>,
    answer: watch::Sender<Answer>,
}

impl Flights {
    /// Joins the flight for `key`, or starts one.
    pub(super) fn join(self: &Arc<Self>, key: &[u8]) -> Role {
        let mut flying = self.flying.lock();
        if let Some(flight) = flying.get(key) {
            return Role::Follower(flight.clone());
        }
        let (answer, waiting) = watch::channel(None);
        flying.insert(key.into(), waiting);
        Role::Leader(Leader {
            flights: self.clone(),
            key: key.into(),
            answer,
        })
    }

    /// Flights in the air (for tests and status).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.flying.lock().len()
    }
}

impl Leader {
    /// Lands the answer for the followers.
    pub(super) fn land(self, answer: &Result<Filled, Error>) {
        // Taken off the map first: a caller arriving after this starts anew
        // rather than reading an answer that may be old by then.
        self.flights.flying.lock().remove(&self.key);
        self.answer.send_replace(Some(answer.clone()));
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        let mut flying = self.flights.flying.lock();
        if flying
            .get(&self.key)
            .is_some_and(|w| w.same_channel(&self.answer.subscribe()))
        {
            flying.remove(&self.key);
        }
    }
}

/// A follower's wait: the leader's answer, or `None` when the leader ended
/// without one (cancelled): then the caller starts over.
pub(super) async fn follow(mut flight: watch::Receiver<Answer>) -> Option<Result<Filled, Error>> {
    match flight.wait_for(Option::is_some).await {
        Ok(answer) => answer.clone(),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Flights, Role, follow};
    use crate::client::fill::{Filled, Freshness};
    use crate::item::Item;

    fn filled() -> Filled {
        Filled {
            item: Item {
                value: "v".into(),
                flags: 0,
                cas: None,
            },
            freshness: Freshness::Filled,
        }
    }

    /// Followers get the leader's answer; a cancelled leader frees the key,
    /// and its followers learn they must start over.
    #[tokio::test]
    async fn followers_share_the_answer_or_start_over() {
        let flights = Arc::new(Flights::default());
        let Role::Leader(leader) = flights.join(b"k") else {
            panic!("the first caller leads");
        };
        let Role::Follower(waiting) = flights.join(b"k") else {
            panic!("the second follows");
        };
        assert!(matches!(flights.join(b"other"), Role::Leader(_)));
        leader.land(&Ok(filled()));
        assert_eq!(flights.len(), 0);
        let answer = follow(waiting).await.unwrap().unwrap();
        assert_eq!(answer.freshness, Freshness::Filled);

        let Role::Leader(leader) = flights.join(b"k") else {
            panic!("a landed flight is gone");
        };
        let Role::Follower(waiting) = flights.join(b"k") else {
            panic!("follows");
        };
        drop(leader);
        assert_eq!(flights.len(), 0);
        assert!(follow(waiting).await.is_none());
    }
}
