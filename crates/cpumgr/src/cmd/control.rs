//! What the commands that talk to a running manager share: finding its socket, sending one
//! request, and turning the reply into a result (a refused request is an error naming why).

use std::path::{Path, PathBuf};
use std::time::Duration;

use cpumgr_proto::{Conn, Reply, Request};

use crate::input::InputError;

/// The `--socket` argument, or `CPUMGR_SOCKET`, or the default path.
pub fn socket_path(arg: Option<&Path>) -> PathBuf {
    arg.map(Path::to_path_buf).unwrap_or_else(cpumgr_daemon::default_socket)
}

/// Parses a duration like `100ms`, `0.5s` or `50` (milliseconds).
pub fn duration(text: &str) -> Result<Duration, String> {
    let ms = cpumgr_core::params::parse_millis(text)
        .filter(|ms| *ms > 0.0)
        .ok_or_else(|| "not a duration (e.g. 100ms, 0.5s, 2m)".to_string())?;
    Duration::try_from_secs_f64(ms / 1000.0).map_err(|_| format!("{ms} ms is too long a duration"))
}

/// Parses a duration like `100ms`, `0.5s`, `2m` or `50` (milliseconds), for the flag `flag`.
pub fn parse_duration(flag: &str, text: &str) -> anyhow::Result<Duration> {
    duration(text).map_err(|e| InputError::new(format!("{flag} {text}: {e}")))
}

/// Connects to the manager at `socket`, with a bounded wait for replies.
pub fn connect(socket: &Path) -> anyhow::Result<Conn> {
    let conn = Conn::connect(socket).map_err(|e| {
        anyhow::anyhow!("no manager answers on {}: {e} (start one with `cpumgr daemon`)", socket.display())
    })?;
    conn.set_timeout(Some(Duration::from_secs(5)))?;
    Ok(conn)
}

/// Sends one request; a refusal becomes an error, as bad input when `refusal_is_input`.
pub fn call(socket: &Path, req: &Request, refusal_is_input: bool) -> anyhow::Result<Reply> {
    let (reply, _fds) = connect(socket)?.call(req)?;
    match reply {
        Reply::Error { message } if refusal_is_input => Err(InputError::new(message)),
        Reply::Error { message } => Err(anyhow::anyhow!("the manager refused: {message}")),
        r => Ok(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_too_long_for_the_clock_are_errors_not_panics() {
        assert_eq!(duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(duration("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)), "minutes");
        assert_eq!(duration("1.5m"), Ok(Duration::from_secs(90)));
        for text in ["1e20s", "1e30s", "18446744073709551616s", "0", "-1s", "soon"] {
            assert!(duration(text).is_err(), "{text}");
        }
    }
}
