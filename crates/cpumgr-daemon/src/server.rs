//! The socket thread: one `poll` loop over the listening socket, every client connection, and
//! the [`crate::exits`] set of every program's pidfd. A message is decoded, answered and
//! forgotten; a bad one gets an error reply and a log line; a program whose pidfd fires has
//! ended, and its CPUs go to the others at once (the scheduler is kicked rather than left to the
//! next quantum boundary). A registration that comes with a descriptor is a supervisor bringing
//! back the slot of a program it kept running while it had no manager ([`crate::adopt`]).

use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cpumgr_core::ProgramId;
use cpumgr_proto::msg::{self, Reply, Request};
use cpumgr_proto::transport::TransportError;
use cpumgr_proto::{Conn, Listener, PeerCred};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::ratelimit::{Bucket, Limiter};
use crate::Shared;

/// Most client connections at once; more are refused with an error reply.
pub const MAX_CONNECTIONS: usize = 1024;

/// A connection that never registered a program is closed after this long without a message.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

struct Client {
    conn: Conn,
    peer: PeerCred,
    last: Instant,
    registered: bool,
    /// Receives every trace event (`subscribe-events`).
    subscriber: bool,
    /// Its request budget ([`crate::ratelimit`]).
    bucket: Bucket,
}

/// How long sending an event to a subscriber may block; one that does not keep up is dropped.
pub const SUBSCRIBER_SEND_TIMEOUT: Duration = Duration::from_millis(10);

/// How long sending a reply may block. A client waits for each reply, so its queue never fills;
/// one that sends without reading would otherwise stall this thread, and every other client and
/// program exit with it, for as long as the send blocks. It is dropped instead.
pub const REPLY_SEND_TIMEOUT: Duration = Duration::from_millis(10);

/// Sends a reply; false when it could not be delivered (the connection should be closed).
fn reply(conn: &Conn, r: &Reply, fd: Option<&std::os::fd::OwnedFd>) -> bool {
    let bytes = match msg::encode(r) {
        Ok(b) => b,
        Err(e) => msg::encode(&Reply::Error { message: e.to_string() }).unwrap_or_default(),
    };
    let fds: Vec<_> = fd.iter().map(|f| f.as_fd()).collect();
    if let Err(e) = conn.send(&bytes, &fds) {
        tracing::info!("reply not delivered, closing the connection: {e}");
        return false;
    }
    true
}

/// Runs the loop until the manager shuts down.
pub fn serve(shared: Arc<Shared>, listener: Listener) {
    let mut clients: Vec<Client> = Vec::new();
    let mut limiter = Limiter::new(shared.lock().rates());
    let exits = shared.lock().exits();
    let mut keeping_events = false;
    while !shared.shutdown.load(Ordering::Acquire) {
        let mut readable = vec![false; clients.len()];
        let mut hangup = vec![false; clients.len()];
        let exited: Vec<ProgramId>;
        let accept;
        {
            let mut fds: Vec<PollFd> = Vec::with_capacity(3 + clients.len());
            fds.push(PollFd::new(listener.as_fd(), PollFlags::POLLIN));
            fds.push(PollFd::new(exits.as_fd(), PollFlags::POLLIN));
            fds.push(PollFd::new(shared.stopping.as_fd(), PollFlags::POLLIN));
            // A connection whose request budget is spent is not read until it refills (hang-ups
            // are still reported).
            let now = Instant::now();
            let ready: Vec<bool> = clients.iter_mut().map(|c| limiter.ready(&mut c.bucket, c.peer.uid, now)).collect();
            fds.extend(
                clients
                    .iter()
                    .zip(ready)
                    .map(|(c, r)| PollFd::new(c.conn.as_fd(), if r { PollFlags::POLLIN } else { PollFlags::empty() })),
            );
            if let Err(e) = poll(&mut fds, PollTimeout::from(50u16)) {
                if e != nix::errno::Errno::EINTR {
                    tracing::error!("poll: {e}");
                }
                continue;
            }
            let ev = |f: &PollFd| f.revents().unwrap_or(PollFlags::empty());
            accept = ev(&fds[0]).contains(PollFlags::POLLIN);
            exited = if ev(&fds[1]).is_empty() { Vec::new() } else { exits.ready() };
            for (i, f) in fds[3..].iter().enumerate() {
                readable[i] = ev(f).contains(PollFlags::POLLIN);
                hangup[i] = ev(f).intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL);
            }
        }
        if !exited.is_empty() {
            let mut state = shared.lock();
            let kicked = state.kick;
            for id in exited {
                state.remove(id, None);
            }
            wake_for_kick(shared.as_ref(), &state, kicked);
        }
        let mut keep = vec![true; clients.len()];
        for (i, c) in clients.iter_mut().enumerate() {
            if readable[i] {
                limiter.take(&mut c.bucket, c.peer.uid);
                keep[i] = serve_one(&shared, c);
            } else if hangup[i] {
                keep[i] = false;
            } else if !c.registered && !c.subscriber && c.last.elapsed() > IDLE_TIMEOUT {
                tracing::info!(pid = c.peer.pid, "closing an idle connection");
                keep[i] = false;
            }
        }
        let mut k = keep.into_iter();
        clients.retain(|_| k.next().unwrap_or(false));
        publish_events(&shared, &mut clients, &mut keeping_events);
        if accept {
            accept_all(&listener, &mut clients, &limiter);
        }
    }
}

fn accept_all(listener: &Listener, clients: &mut Vec<Client>, limiter: &Limiter) {
    loop {
        match listener.accept() {
            Ok(Some(conn)) => {
                let _ = conn.set_timeout(Some(REPLY_SEND_TIMEOUT));
                let Ok(peer) = conn.peer() else { continue };
                if clients.len() >= MAX_CONNECTIONS {
                    tracing::warn!(pid = peer.pid, "connection refused: {MAX_CONNECTIONS} clients already");
                    reply(&conn, &Reply::Error { message: "too many connections".into() }, None);
                    continue;
                }
                if let Err(message) = limiter.admit_connection(peer.uid, clients.iter().map(|c| c.peer.uid)) {
                    tracing::warn!(pid = peer.pid, "connection refused: {message}");
                    reply(&conn, &Reply::Error { message }, None);
                    continue;
                }
                let bucket = limiter.connection_bucket(Instant::now());
                clients.push(Client { conn, peer, last: Instant::now(), registered: false, subscriber: false, bucket });
            }
            Ok(None) => return,
            Err(e) => {
                tracing::error!("accept: {e}");
                return;
            }
        }
    }
}

/// Sends the events emitted since the last call to every subscriber, dropping those that fail;
/// with no subscriber left, the state stops keeping events. `keeping` is whether it kept them
/// after the last call: with no subscriber then or now, the state is not even locked.
fn publish_events(shared: &Shared, clients: &mut Vec<Client>, keeping: &mut bool) {
    let subscribed = clients.iter().any(|c| c.subscriber);
    if !subscribed && !*keeping {
        return;
    }
    *keeping = subscribed;
    let mut state = shared.lock();
    if !subscribed {
        state.outbox = None;
        return;
    }
    let events = state.outbox.as_mut().map(std::mem::take).unwrap_or_default();
    drop(state);
    for event in events {
        let bytes = match msg::encode(&Reply::Event { event }) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("event not sent: {e}");
                continue;
            }
        };
        clients.retain(|c| {
            let kept = !c.subscriber || c.conn.send(&bytes, &[]).is_ok();
            if !kept {
                tracing::info!(pid = c.peer.pid, "dropping an events subscriber that does not keep up");
            }
            kept
        });
    }
}

/// Wakes the scheduler when `state` was kicked while held (`kicked`: whether it already was
/// before). A scheduler already kicked wakes by itself when its kick is due: under a storm of
/// requests, waking it for each one would only have it take the lock to go back to sleep.
fn wake_for_kick(shared: &Shared, state: &crate::State, kicked: bool) {
    if state.kick && !kicked {
        shared.wake.notify_all();
    }
}

/// Reads and answers one message; false when the connection should be closed.
fn serve_one(shared: &Shared, c: &mut Client) -> bool {
    c.last = Instant::now();
    let received = match c.conn.recv() {
        Ok(r) => r,
        Err(TransportError::Closed) => return false,
        Err(TransportError::TooLong) => {
            tracing::warn!(pid = c.peer.pid, "oversized message refused");
            return reply(
                &c.conn,
                &Reply::Error { message: format!("message longer than {} bytes", msg::MAX_MESSAGE) },
                None,
            );
        }
        Err(e) => {
            tracing::warn!(pid = c.peer.pid, "receive failed: {e}");
            return false;
        }
    };
    if shared.chaos.as_ref().is_some_and(|c| c.drop_message()) {
        return false;
    }
    // The kernel's record of who connected (SO_PEERCRED), never what the message claims, is
    // checked against every request.
    let peer = c.peer;
    let req: Request = match msg::decode(&received.bytes) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(pid = peer.pid, "bad message: {e}");
            return reply(&c.conn, &Reply::Error { message: e.to_string() }, None);
        }
    };
    let subscribing = req == Request::SubscribeEvents;
    // One descriptor with a registration is the slot a supervisor kept (re-adoption); any other
    // descriptor a client sends is never used, and dropping it closes it.
    let mut fds = received.fds;
    let kept_slot = match (&req, fds.len()) {
        (Request::Register(_), 1) => fds.pop(),
        _ => None,
    };
    drop(fds);
    let (r, fd) = {
        let mut state = shared.lock();
        let kicked = state.kick;
        let out = match (req, kept_slot) {
            (Request::Register(reg), Some(slot)) => state.adopt(&peer, reg, slot),
            (req, _) => state.handle(&peer, req),
        };
        wake_for_kick(shared, &state, kicked);
        out
    };
    if subscribing && r == Reply::Ok {
        c.subscriber = true;
        let _ = c.conn.set_timeout(Some(SUBSCRIBER_SEND_TIMEOUT));
    }
    if matches!(r, Reply::Registered { .. }) {
        c.registered = true;
        shared.registrations.fetch_add(1, Ordering::Relaxed);
    }
    reply(&c.conn, &r, fd.as_ref())
}
