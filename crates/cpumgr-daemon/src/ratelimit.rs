//! Flood control for the control socket: a token bucket per connection and one per user (uid),
//! and a cap on each user's open connections.
//!
//! The socket thread reads a connection only while both its buckets hold a token; otherwise it
//! leaves the connection out of its `poll` until they refill. A flooding client is not answered
//! with errors (that would still cost the manager a reply per message): its messages wait in the
//! kernel's socket buffer, its own sends block once that is full, and the manager spends nothing
//! on it beyond the configured rate. Other users' connections have buckets of their own, so a
//! flood hurts only the user who sends it.

use std::collections::HashMap;
use std::time::Instant;

/// The limits, each a rate in requests per second with a burst of one second's worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rates {
    /// Requests per second one connection may send.
    pub per_connection: u32,
    /// Requests per second all the connections of one user may send together.
    pub per_user: u32,
    /// Connections one user may hold open at once.
    pub connections_per_user: usize,
}

impl Default for Rates {
    fn default() -> Self {
        Rates { per_connection: 1000, per_user: 5000, connections_per_user: 256 }
    }
}

impl Rates {
    /// Checks the limits themselves: every one at least 1.
    pub fn check(&self) -> Result<(), String> {
        if self.per_connection == 0 || self.per_user == 0 || self.connections_per_user == 0 {
            return Err("request rates and connections per user must be at least 1".into());
        }
        Ok(())
    }
}

/// A token bucket: up to `rate` tokens, refilled at `rate` per second.
#[derive(Debug, Clone)]
pub struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket for `rate` requests per second.
    pub fn full(rate: u32, now: Instant) -> Bucket {
        Bucket { tokens: rate as f64, at: now }
    }

    fn refill(&mut self, rate: u32, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * rate as f64).min(rate as f64);
        self.at = now;
    }
}

/// The per-user buckets and the limits; each connection carries its own [`Bucket`].
#[derive(Debug)]
pub struct Limiter {
    rates: Rates,
    users: HashMap<u32, Bucket>,
}

impl Limiter {
    /// A limiter with no user seen yet.
    pub fn new(rates: Rates) -> Limiter {
        Limiter { rates, users: HashMap::new() }
    }

    /// The bucket of a new connection, full.
    pub fn connection_bucket(&self, now: Instant) -> Bucket {
        Bucket::full(self.rates.per_connection, now)
    }

    /// Whether a connection of `uid` with bucket `conn` may be read now: both buckets, refilled
    /// to `now`, hold a whole token.
    pub fn ready(&mut self, conn: &mut Bucket, uid: u32, now: Instant) -> bool {
        conn.refill(self.rates.per_connection, now);
        let rate = self.rates.per_user;
        let user = self.users.entry(uid).or_insert_with(|| Bucket::full(rate, now));
        user.refill(rate, now);
        conn.tokens >= 1.0 && user.tokens >= 1.0
    }

    /// Charges one request to the connection and its user. Several connections of one user found
    /// ready together may take the user's bucket a little below zero; it refills from there.
    pub fn take(&mut self, conn: &mut Bucket, uid: u32) {
        conn.tokens -= 1.0;
        if let Some(u) = self.users.get_mut(&uid) {
            u.tokens -= 1.0;
        }
    }

    /// Refuses a new connection of `uid` when the users of the open ones (`open`) already
    /// include [`Rates::connections_per_user`] of its own.
    pub fn admit_connection(&self, uid: u32, open: impl Iterator<Item = u32>) -> Result<(), String> {
        if open.filter(|&u| u == uid).count() >= self.rates.connections_per_user {
            return Err(format!("user {uid} already has {} connections open", self.rates.connections_per_user));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rates(conn: u32, user: u32) -> Rates {
        Rates { per_connection: conn, per_user: user, connections_per_user: 2 }
    }

    /// How many requests a connection gets through by `now` if it asks without pause.
    fn drain(l: &mut Limiter, b: &mut Bucket, uid: u32, now: Instant) -> u32 {
        let mut n = 0;
        while l.ready(b, uid, now) {
            l.take(b, uid);
            n += 1;
        }
        n
    }

    #[test]
    fn a_connection_gets_its_burst_then_its_rate() {
        let t0 = Instant::now();
        let mut l = Limiter::new(rates(10, 1000));
        let mut b = l.connection_bucket(t0);
        assert_eq!(drain(&mut l, &mut b, 5, t0), 10);
        assert_eq!(drain(&mut l, &mut b, 5, t0 + Duration::from_millis(50)), 0);
        assert_eq!(drain(&mut l, &mut b, 5, t0 + Duration::from_millis(300)), 3);
        // The burst is bounded: a long pause refills one second's worth, no more.
        assert_eq!(drain(&mut l, &mut b, 5, t0 + Duration::from_secs(60)), 10);
    }

    #[test]
    fn a_users_connections_share_its_bucket_and_other_users_keep_theirs() {
        let t0 = Instant::now();
        let mut l = Limiter::new(rates(100, 30));
        let (mut a1, mut a2, mut b) = (l.connection_bucket(t0), l.connection_bucket(t0), l.connection_bucket(t0));
        assert_eq!(drain(&mut l, &mut a1, 1000, t0), 30);
        assert_eq!(drain(&mut l, &mut a2, 1000, t0), 0, "user 1000's second connection shares its spent bucket");
        assert_eq!(drain(&mut l, &mut b, 1001, t0), 30, "user 1001 is not slowed by user 1000");
    }

    #[test]
    fn connections_per_user_are_capped() {
        let l = Limiter::new(rates(1, 1));
        assert!(l.admit_connection(7, [7, 8, 8].into_iter()).is_ok());
        assert_eq!(l.admit_connection(8, [7, 8, 8].into_iter()).unwrap_err(), "user 8 already has 2 connections open");
        assert!(Rates { per_user: 0, ..Rates::default() }.check().is_err());
    }
}
