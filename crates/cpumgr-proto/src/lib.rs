//! cpumgr's wire contract, shared by the manager (`cpumgr-daemon`) and the programs it serves
//! (the client library): the shared-memory [`slot`] layout with its seqlocks and validators, the
//! [`segment`] that holds one slot, the [`doorbell`] a program rings when it releases CPUs through
//! its slot, the control-socket [`msg`] types, and the [`transport`] that carries them (a
//! `SOCK_SEQPACKET` Unix socket with descriptor passing). `docs/PROTOCOL.md` describes all of it
//! byte by byte.

#![warn(missing_docs)]

pub mod doorbell;
pub mod msg;
pub mod segment;
pub mod slot;
pub mod transport;

pub use doorbell::Doorbell;
pub use msg::{ProgramStatus, Registration, Reply, Request, StatusReport, MAX_MESSAGE, PROTO_VERSION};
pub use segment::Segment;
pub use slot::Slot;
pub use transport::{Conn, Listener, PeerCred};

/// A slot segment that cannot be created or used.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    /// The first word is not [`slot::MAGIC`].
    #[error("not a cpumgr slot (magic {0:#x})")]
    Magic(u64),
    /// Another layout version.
    #[error("slot layout version {found}, this build understands {expected}")]
    Version {
        /// Found in the header.
        found: u32,
        /// This build's.
        expected: u32,
    },
    /// Another size.
    #[error("slot size {found} bytes, expected {expected}")]
    Size {
        /// Found.
        found: usize,
        /// Expected.
        expected: usize,
    },
    /// The system refused.
    #[error("slot segment: {0}")]
    Io(#[from] std::io::Error),
}
