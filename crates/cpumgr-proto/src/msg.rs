//! Control-socket messages: one JSON object per socket message (the socket keeps message
//! boundaries), at most [`MAX_MESSAGE`] bytes, every one carrying the protocol version `v`.
//!
//! A request names its operation in `op`: `{"v":1,"op":"set-request","id":3,"wanted":2}`. A reply
//! names its kind in `reply`: `{"v":1,"reply":"ok"}`, `{"v":1,"reply":"error","message":"..."}`.
//! A registration reply comes with the slot segment's descriptor attached (`SCM_RIGHTS`).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use cpumgr_core::trace::Event;
use cpumgr_core::CpuSet;

/// The protocol version this build speaks.
pub const PROTO_VERSION: u32 = 1;

/// The largest message, in bytes, either way.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// A message with its version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope<T> {
    /// Protocol version.
    pub v: u32,
    /// The message.
    #[serde(flatten)]
    pub body: T,
}

/// What a client asks the manager.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// Register a program; the reply carries its slot segment.
    Register(Registration),
    /// Forget a program: its CPUs go back to the others, its threads are unpinned and continued.
    Unregister {
        /// The program.
        id: u64,
    },
    /// Change a program's request (for programs that do not write their slot).
    SetRequest {
        /// The program.
        id: u64,
        /// CPUs wanted at present (read under `now` too).
        #[serde(alias = "now")]
        wanted: u32,
        /// New minimum, if it changes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<u32>,
        /// New maximum, if it changes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u32>,
    },
    /// Get another descriptor of a program's slot (a process of the program's process group asks,
    /// e.g. the client library inside a program that `cpumgr run` registered).
    OpenSlot {
        /// The program; when absent, the program the asking process belongs to (its own pid or its
        /// process group's leader is the program's leader).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<u64>,
    },
    /// Get the program's work-list doorbell (an `eventfd`, [`crate::Doorbell`]) to ring after it
    /// releases CPUs through its slot, so the manager schedules at once. Asked like
    /// [`Request::OpenSlot`], by a process of the program.
    OpenDoorbell {
        /// The program; when absent, the program the asking process belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<u64>,
    },
    /// Describe the manager and its programs.
    Status,
    /// Switch the active policy (`name:key=value,...`).
    SetPolicy {
        /// The policy spec.
        spec: String,
    },
    /// Change the quantum.
    SetQuantum {
        /// The new quantum in milliseconds.
        ms: f64,
    },
    /// Turn this connection into a feed of trace events: after the `ok` reply, every event the
    /// manager emits arrives as an `event` reply (the manager's owner or root only).
    SubscribeEvents,
}

/// A program to register.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Registration {
    /// The program's process (the leader of its process group); the sender's own pid when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// A human name.
    #[serde(default)]
    pub name: String,
    /// CPUs wanted at present (read under `now` too); all managed CPUs when absent.
    #[serde(default, alias = "now", skip_serializing_if = "Option::is_none")]
    pub wanted: Option<u32>,
    /// Fewest CPUs it can run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u32>,
    /// Most CPUs it can use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    /// A rigid program's fixed process or thread count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rigid: Option<u32>,
    /// Relative weight (1.0 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

/// What the manager answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "kebab-case")]
pub enum Reply {
    /// A program is registered; its slot's descriptor is attached.
    Registered {
        /// Its id.
        id: u64,
    },
    /// A slot descriptor is attached.
    Slot {
        /// The program.
        id: u64,
    },
    /// The program's doorbell descriptor is attached.
    Doorbell {
        /// The program.
        id: u64,
    },
    /// Done.
    Ok,
    /// The manager's state.
    Status(StatusReport),
    /// The request was refused.
    Error {
        /// Why.
        message: String,
    },
    /// A trace event, sent unasked to a connection that subscribed.
    Event {
        /// The event.
        event: Event,
    },
}

/// The manager's state, as `cpumgr status --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// The active policy spec.
    pub policy: String,
    /// The quantum in milliseconds.
    pub quantum_ms: f64,
    /// The enforcement backend: `affinity`, `cpuset-v1` or `cpuset-v2`.
    pub backend: String,
    /// The managed CPUs.
    pub cpus: CpuSet,
    /// The manager's process.
    pub pid: i32,
    /// Scheduler steps run so far (boundary and kicked).
    #[serde(alias = "ticks")]
    pub steps: u64,
    /// The programs the asker may see, in id order.
    pub programs: Vec<ProgramStatus>,
}

/// One program in a [`StatusReport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramStatus {
    /// Id.
    pub id: u64,
    /// Leader process.
    pub pid: i32,
    /// Name.
    pub name: String,
    /// CPUs it wants at present.
    pub request: u32,
    /// CPUs allocated.
    pub count: u32,
    /// Which.
    pub cpus: CpuSet,
    /// `running`, `stopped` or `waiting`.
    pub state: String,
    /// Its runnable threads, as last seen in `/proc` or reported by its runtime.
    pub threads: Option<u32>,
    /// How its team runs, as its runtime says: `serial`, `rigid` (a parallel team run whole:
    /// it spins, or is not judged yet), `folding` (a team that folds onto its CPUs, sleeping at
    /// barriers when it has fewer CPUs than threads), `idle`; empty when it does not say.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub team: String,
    /// A folding team's cost of folding, as its runtime measured it: how many times the CPU time
    /// per barrier its threads take whole they take folded. The manager runs a team whose cost
    /// outweighs what the others lose to its gang whole in turns instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fold_cost: Option<f64>,
    /// CPU time used since registration, milliseconds.
    pub cpu_ms: u64,
    /// Its newest speedup report (speedup against one CPU), when its runtime sends them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// The CPUs it is allowed (its processes' affinity when first seen: a batch system's binding,
    /// `taskset`), when they are not every managed CPU: the outer bound of its CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<CpuSet>,
    /// How its CPUs are enforced once they are: `cpuset` (a cgroup of the manager's tree) or
    /// `affinity` (the affinity backend, or a program in a cgroup someone else made, such as a
    /// Slurm step's, which it is never moved out of); absent before the manager confines it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confined_by: Option<String>,
}

/// A message that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MsgError {
    /// Longer than [`MAX_MESSAGE`].
    #[error("message of {0} bytes exceeds the limit of {MAX_MESSAGE}")]
    TooLong(usize),
    /// Not the expected JSON.
    #[error("malformed message: {0}")]
    Malformed(#[from] serde_json::Error),
    /// Another protocol version.
    #[error("protocol version {0} is not supported (this build speaks {PROTO_VERSION})")]
    Version(u32),
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

/// Encodes a message with its version.
pub fn encode<T: Serialize + Clone>(body: &T) -> Result<Vec<u8>, MsgError> {
    let bytes = serde_json::to_vec(&Envelope { v: PROTO_VERSION, body: body.clone() })?;
    if bytes.len() > MAX_MESSAGE {
        return Err(MsgError::TooLong(bytes.len()));
    }
    Ok(bytes)
}

/// Decodes a message, checking its size and version first.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, MsgError> {
    if bytes.len() > MAX_MESSAGE {
        return Err(MsgError::TooLong(bytes.len()));
    }
    let v: VersionOnly = serde_json::from_slice(bytes)?;
    if v.v != PROTO_VERSION {
        return Err(MsgError::Version(v.v));
    }
    let env: Envelope<T> = serde_json::from_slice(bytes)?;
    Ok(env.body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_with_their_version() {
        let reqs = [
            Request::Register(Registration { pid: Some(12), name: "a".into(), wanted: Some(2), ..Default::default() }),
            Request::SetRequest { id: 3, wanted: 1, min: None, max: Some(4) },
            Request::Status,
            Request::OpenDoorbell { id: Some(4) },
            Request::SetPolicy { spec: "gang:fill=false".into() },
            Request::SetQuantum { ms: 50.0 },
            Request::SubscribeEvents,
        ];
        for r in reqs {
            let bytes = encode(&r).unwrap();
            assert_eq!(decode::<Request>(&bytes).unwrap(), r);
        }
        let text = String::from_utf8(encode(&Request::Unregister { id: 9 }).unwrap()).unwrap();
        assert_eq!(text, r#"{"v":1,"op":"unregister","id":9}"#);
    }

    #[test]
    fn a_request_count_sent_as_now_is_read_as_wanted() {
        let set = decode::<Request>(br#"{"v":1,"op":"set-request","id":3,"now":2}"#).unwrap();
        assert_eq!(set, Request::SetRequest { id: 3, wanted: 2, min: None, max: None });
        let reg = decode::<Request>(br#"{"v":1,"op":"register","name":"a","now":2}"#).unwrap();
        assert_eq!(reg, Request::Register(Registration { name: "a".into(), wanted: Some(2), ..Default::default() }));
        let e: Event = serde_json::from_str(r#"{"t":1,"program":2,"kind":"request","now":3}"#).unwrap();
        assert_eq!(e.kind, cpumgr_core::trace::EventKind::Request { wanted: 3 });
        let text = String::from_utf8(encode(&set).unwrap()).unwrap();
        assert_eq!(text, r#"{"v":1,"op":"set-request","id":3,"wanted":2}"#);
    }

    #[test]
    fn bad_messages_are_errors() {
        assert!(matches!(decode::<Request>(b"{\"v\":2,\"op\":\"status\"}"), Err(MsgError::Version(2))));
        assert!(matches!(decode::<Request>(b"{\"v\":1,\"op\":\"reboot\"}"), Err(MsgError::Malformed(_))));
        assert!(matches!(decode::<Request>(b"\xff\x00garbage"), Err(MsgError::Malformed(_))));
        assert!(matches!(decode::<Request>(b"{\"op\":\"status\"}"), Err(MsgError::Malformed(_))));
        let big = vec![b' '; MAX_MESSAGE + 1];
        assert!(matches!(decode::<Request>(&big), Err(MsgError::TooLong(_))));
        let huge = Request::SetPolicy { spec: "x".repeat(MAX_MESSAGE) };
        assert!(matches!(encode(&huge), Err(MsgError::TooLong(_))));
    }

    #[test]
    fn replies_round_trip() {
        let r = Reply::Error { message: "no such program 4".into() };
        assert_eq!(decode::<Reply>(&encode(&r).unwrap()).unwrap(), r);
        let e = Reply::Event {
            event: Event {
                t: 5,
                program: Some(cpumgr_core::ProgramId(2)),
                kind: cpumgr_core::trace::EventKind::Request { wanted: 3 },
            },
        };
        assert_eq!(decode::<Reply>(&encode(&e).unwrap()).unwrap(), e);
    }
}
