//! The control socket: a Unix stream socket in the runtime directory. Each connection is served by
//! its own thread, one JSON request per line, one response per line; the peer's credentials
//! (SO_PEERCRED) decide what it may see and change. A bad line gets an error reply and never
//! brings the manager down; an idle or flooding client is cut off.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cpumgr_proto::message::{parse_request, Request, Response, MAX_LINE};
use cpumgr_proto::slot::RequestView;
use nix::sys::socket::{getsockopt, sendmsg, sockopt::PeerCredentials, ControlMessage, MsgFlags};

use crate::manager::Manager;

/// Most connections served at once; more are refused.
pub const MAX_CONNECTIONS: usize = 256;
/// A connection that sends nothing for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The default socket path: `$CPUMGR_SOCKET`, else `/run/cpumgr/cpumgr.sock` as root, else
/// `$XDG_RUNTIME_DIR/cpumgr.sock`, else `/tmp/cpumgr-UID.sock`.
pub fn default_socket() -> PathBuf {
    if let Some(p) = std::env::var_os("CPUMGR_SOCKET") {
        return p.into();
    }
    let uid = nix::unistd::getuid();
    if uid.is_root() {
        return "/run/cpumgr/cpumgr.sock".into();
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => Path::new(&d).join("cpumgr.sock"),
        None => format!("/tmp/cpumgr-{uid}.sock").into(),
    }
}

/// Binds the socket at `path`. A stale socket file (no manager answers) is replaced; a live one
/// is an error (`AddrInUse`).
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, format!("a manager already answers on {}", path.display())));
        }
        std::fs::remove_file(path)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let listener = UnixListener::bind(path)?;
    // Root serves every user (each request is checked against its peer's credentials); a user's
    // manager serves only that user.
    use std::os::unix::fs::PermissionsExt;
    let mode = if nix::unistd::getuid().is_root() { 0o666 } else { 0o600 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(listener)
}

/// Serves connections until the listener fails; each connection on its own thread.
pub fn serve(manager: Arc<Manager>, listener: UnixListener) {
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            let _ = reply(&stream, &Response::Error { message: "too many connections".into() }, None);
            continue;
        }
        let (m, a) = (Arc::clone(&manager), Arc::clone(&active));
        std::thread::spawn(move || {
            handle(&m, stream);
            a.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

fn reply(stream: &UnixStream, response: &Response, fd: Option<&OwnedFd>) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(response).map_err(std::io::Error::other)?;
    line.push(b'\n');
    match fd {
        None => (&*stream).write_all(&line),
        Some(fd) => {
            let fds = [fd.as_fd().as_raw_fd()];
            let iov = [std::io::IoSlice::new(&line)];
            let sent = sendmsg::<()>(stream.as_raw_fd(), &iov, &[ControlMessage::ScmRights(&fds)], MsgFlags::empty(), None).map_err(std::io::Error::from)?;
            (&*stream).write_all(&line[sent..])
        }
    }
}

/// Serves one connection.
fn handle(manager: &Manager, stream: UnixStream) {
    let Ok(cred) = getsockopt(&stream, PeerCredentials) else { return };
    let uid = cred.uid();
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let Ok(read_half) = stream.try_clone() else { return };
    let mut reader = BufReader::new(read_half);
    loop {
        let mut line = Vec::new();
        match reader.by_ref().take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() > MAX_LINE {
            let _ = reply(&stream, &Response::Error { message: format!("request over {MAX_LINE} bytes") }, None);
            return;
        }
        let text = String::from_utf8_lossy(&line);
        let (response, fd) = match parse_request(text.trim()) {
            Err(message) => {
                tracing::warn!(uid, message, "bad request");
                (Response::Error { message }, None)
            }
            Ok(req) => execute(manager, uid, req),
        };
        if reply(&stream, &response, fd.as_ref()).is_err() {
            return;
        }
    }
}

fn execute(manager: &Manager, uid: u32, req: Request) -> (Response, Option<OwnedFd>) {
    let err = |e: crate::manager::ManagerError| (Response::Error { message: e.to_string() }, None);
    match req {
        Request::Register { pid, name, request, min, max, rigid, weight } => {
            let name: String = name.chars().take(64).collect();
            match manager.register(uid, pid, &name, RequestView { now: request, min, max }, rigid, weight) {
                Ok((id, fd)) => (Response::Registered { id }, Some(fd)),
                Err(e) => err(e),
            }
        }
        Request::Unregister { id } => manager.unregister(Some(uid), id).map_or_else(err, |_| (Response::Ok, None)),
        Request::SetRequest { id, now } => manager.set_request(uid, id, now).map_or_else(err, |_| (Response::Ok, None)),
        Request::Status => (Response::Status(manager.status(uid)), None),
        Request::SetPolicy { .. } | Request::SetQuantum { .. } if uid != 0 && uid != nix::unistd::getuid().as_raw() => {
            (Response::Error { message: "only root or the manager's owner may change the policy or quantum".into() }, None)
        }
        Request::SetPolicy { policy } => manager.set_policy(&policy).map_or_else(err, |_| (Response::Ok, None)),
        Request::SetQuantum { ms } if (1..=10_000).contains(&ms) => {
            manager.set_quantum(Duration::from_millis(ms));
            (Response::Ok, None)
        }
        Request::SetQuantum { ms } => (Response::Error { message: format!("quantum {ms} ms is not in 1..=10000 ms") }, None),
    }
}
