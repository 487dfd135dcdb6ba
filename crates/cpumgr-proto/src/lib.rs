//! The contracts between the cpumgr manager and the programs it manages: the shared-memory
//! [`slot`] each program has, and the control-socket [`message`]s. Both sides link this crate, so
//! the layout and the protocol have one definition. See `docs/PROTOCOL.md`.

#![warn(missing_docs)]

pub mod message;
pub mod slot;
