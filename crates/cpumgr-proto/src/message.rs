//! Control-socket messages: one JSON object per line, each request answered by one response line.
//! Every message carries the protocol version `v`; a peer speaking another version gets a clear
//! refusal. A `register` response also carries the program's slot as a file descriptor
//! (SCM_RIGHTS) on the same `sendmsg`.

use serde::{Deserialize, Serialize};

/// The protocol version.
pub const PROTOCOL: u32 = 1;
/// The longest request line the manager reads; longer ones are refused.
pub const MAX_LINE: usize = 64 * 1024;

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Register a process (and its process group) as a program.
    Register {
        /// The process; the caller must own it (same uid) or be root.
        pid: i32,
        /// A human name.
        name: String,
        /// CPUs wanted now.
        request: u32,
        /// Fewest CPUs it can run on.
        min: u32,
        /// Most CPUs it can use.
        max: u32,
        /// Fixed process/thread count of a rigid program.
        rigid: Option<u32>,
        /// Relative weight.
        weight: f64,
    },
    /// Stop managing a program (its CPUs and state are restored).
    Unregister {
        /// The program.
        id: u64,
    },
    /// Change a program's request.
    SetRequest {
        /// The program.
        id: u64,
        /// CPUs wanted now.
        now: u32,
    },
    /// The manager's state.
    Status,
    /// Switch the policy (`name:key=value,...`).
    SetPolicy {
        /// The spec.
        policy: String,
    },
    /// Change the quantum.
    SetQuantum {
        /// Milliseconds, 1 to 10 000.
        ms: u64,
    },
}

/// A request line with its version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Protocol version.
    pub v: u32,
    /// The request.
    #[serde(flatten)]
    pub request: Request,
}

/// One program in a status reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramStatus {
    /// Its id.
    pub id: u64,
    /// Its main process.
    pub pid: i32,
    /// Its name.
    pub name: String,
    /// CPUs it wants.
    pub request: u32,
    /// CPUs it has.
    pub count: u32,
    /// Which.
    pub cpus: String,
    /// `running`, `stopped` or `waiting`.
    pub state: String,
    /// Threads seen runnable.
    pub threads: u32,
    /// CPU seconds used.
    pub cpu_seconds: f64,
}

/// The manager's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The policy spec.
    pub policy: String,
    /// The quantum in milliseconds.
    pub quantum_ms: u64,
    /// Managed CPUs.
    pub cpus: String,
    /// How decisions are enforced (`affinity`).
    pub backend: String,
    /// The manager's process.
    pub pid: i32,
    /// Registered programs.
    pub programs: Vec<ProgramStatus>,
}

/// What the manager answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Response {
    /// Done.
    Ok,
    /// Registered: the id (the slot's fd comes with this line).
    Registered {
        /// The program's id.
        id: u64,
    },
    /// The state.
    Status(Status),
    /// Refused, and why.
    Error {
        /// What was wrong.
        message: String,
    },
}

/// Parses a request line, checking the version. Errors are messages for an `Error` reply.
pub fn parse_request(line: &str) -> Result<Request, String> {
    if line.len() > MAX_LINE {
        return Err(format!("request of {} bytes is over the {MAX_LINE}-byte limit", line.len()));
    }
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    match v.get("v").and_then(|v| v.as_u64()) {
        Some(x) if x == PROTOCOL as u64 => {}
        Some(x) => return Err(format!("protocol version {x} is not supported (this manager speaks {PROTOCOL})")),
        None => return Err("missing protocol version field `v`".into()),
    }
    serde_json::from_value::<Envelope>(v).map(|e| e.request).map_err(|e| format!("bad request: {e}"))
}

/// Encodes a request line (with newline).
pub fn encode_request(request: &Request) -> String {
    let mut s = serde_json::to_string(&Envelope { v: PROTOCOL, request: request.clone() }).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_bad_lines() {
        let r = Request::SetQuantum { ms: 50 };
        assert_eq!(parse_request(encode_request(&r).trim()).unwrap(), r);
        assert!(parse_request("{\"v\":2,\"op\":\"status\"}").unwrap_err().contains("version 2"));
        assert!(parse_request("{\"op\":\"status\"}").unwrap_err().contains("`v`"));
        assert!(parse_request("{\"v\":1,\"op\":\"explode\"}").unwrap_err().starts_with("bad request"));
        assert!(parse_request("garbage").unwrap_err().starts_with("not JSON"));
        assert!(parse_request(&"x".repeat(MAX_LINE + 1)).unwrap_err().contains("limit"));
    }
}
