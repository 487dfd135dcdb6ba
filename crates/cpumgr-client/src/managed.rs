//! The state of a managed client: the mapped slot and the link to the manager (connection,
//! registration id, doorbell), shared by the [`crate::client`] and the thread that registers a
//! self-registered program again with a restarted manager ([`crate::rejoin`]).

use std::sync::Mutex;

use cpumgr_proto::{Conn, Doorbell, Reply, Request, Segment};

/// The managed state: the mapped slot and the link to the manager.
pub(crate) struct Managed {
    /// Whether this client registered the program (and so unregisters it at the end).
    pub(crate) owned: bool,
    pub(crate) segment: Segment,
    link: Mutex<Link>,
}

/// What changes when the program registers again with another manager.
pub(crate) struct Link {
    pub(crate) conn: Conn,
    pub(crate) id: u64,
    /// The work-list doorbell, rung after a request change so the manager acts at once; `None`
    /// when the manager does not hand one out.
    pub(crate) doorbell: Option<Doorbell>,
    /// The client is ending: nothing may register the program again.
    pub(crate) closing: bool,
}

impl Managed {
    /// The state of a registration: `owned` when this client made it.
    pub(crate) fn new(owned: bool, segment: Segment, link: Link) -> Managed {
        Managed { owned, segment, link: Mutex::new(link) }
    }

    /// The link, locked (a poisoned lock is taken over: the link stays consistent).
    pub(crate) fn link(&self) -> std::sync::MutexGuard<'_, Link> {
        self.link.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Rings the manager's doorbell, if it handed one out. `try_lock`: the ring only hastens what
    /// the next quantum does anyway, so a runtime thread never waits for the rejoin thread (nor
    /// deadlocks in a child forked while it held the lock).
    pub(crate) fn ring(&self) {
        if let Ok(link) = self.link.try_lock() {
            if let Some(d) = &link.doorbell {
                d.ring();
            }
        }
    }

    /// Whether the client is ending.
    pub(crate) fn closing(&self) -> bool {
        self.link().closing
    }

    /// Makes a new registration the client's: its connection, id and doorbell. When the client
    /// is ending (its `Drop` already unregistered through the old connection), nothing changes and
    /// the new registration is undone through `conn`, so no registration outlives the client.
    /// False then.
    pub(crate) fn relink(&self, conn: Conn, id: u64, doorbell: Option<Doorbell>) -> bool {
        let mut link = self.link();
        if link.closing {
            let _ = conn.call(&Request::Unregister { id });
            return false;
        }
        *link = Link { conn, id, doorbell, closing: false };
        true
    }
}

/// Program `id`'s work-list doorbell, when the manager hands one out.
pub(crate) fn open_doorbell(conn: &Conn, id: u64) -> Option<Doorbell> {
    match conn.call(&Request::OpenDoorbell { id: Some(id) }) {
        Ok((Reply::Doorbell { .. }, fds)) => fds.into_iter().next().map(Doorbell::from_fd),
        _ => None,
    }
}
