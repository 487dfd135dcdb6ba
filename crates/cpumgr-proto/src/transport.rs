//! The control socket: a Unix `SOCK_SEQPACKET` socket, so every message arrives whole or not at
//! all (no framing to get wrong), with file descriptors passed alongside (`SCM_RIGHTS`) and the
//! peer's pid and uid known from the kernel (`SO_PEERCRED`), never from what the peer says.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{
    self, sockopt, AddressFamily, Backlog, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, UnixAddr,
};
use nix::sys::time::TimeVal;

use crate::msg::{self, MsgError, Reply, Request, MAX_MESSAGE};

/// Who is on the other end of a connection, as the kernel says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    /// Process id.
    pub pid: i32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

/// A failed exchange on the control socket.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The system call failed.
    #[error("control socket: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection.
    #[error("the manager closed the connection")]
    Closed,
    /// A message longer than [`MAX_MESSAGE`] arrived (and was cut).
    #[error("a message longer than {MAX_MESSAGE} bytes arrived")]
    TooLong,
    /// The message could not be decoded.
    #[error(transparent)]
    Msg(#[from] MsgError),
}

fn io(e: Errno) -> TransportError {
    TransportError::Io(e.into())
}

/// One connection, either end.
#[derive(Debug)]
pub struct Conn {
    fd: OwnedFd,
}

/// A message received: its bytes and the descriptors that came with it.
#[derive(Debug)]
pub struct Received {
    /// The payload.
    pub bytes: Vec<u8>,
    /// Descriptors passed with it.
    pub fds: Vec<OwnedFd>,
}

impl Conn {
    /// Connects to the manager's socket at `path`.
    pub fn connect(path: &Path) -> std::io::Result<Conn> {
        let fd = socket::socket(AddressFamily::Unix, SockType::SeqPacket, SockFlag::SOCK_CLOEXEC, None)?;
        let addr = UnixAddr::new(path)?;
        socket::connect(fd.as_raw_fd(), &addr)?;
        Ok(Conn { fd })
    }

    /// Wraps an accepted descriptor.
    fn from_owned(fd: OwnedFd) -> Conn {
        Conn { fd }
    }

    /// The kernel's record of the peer.
    pub fn peer(&self) -> std::io::Result<PeerCred> {
        let c = socket::getsockopt(&self.fd, sockopt::PeerCredentials)?;
        Ok(PeerCred { pid: c.pid(), uid: c.uid(), gid: c.gid() })
    }

    /// Bounds how long [`Conn::recv`] and [`Conn::send`] block; `None` for no bound.
    pub fn set_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        let tv = TimeVal::from(match t {
            Some(d) => libc_timeval(d),
            None => libc_timeval(Duration::ZERO),
        });
        socket::setsockopt(&self.fd, sockopt::ReceiveTimeout, &tv)?;
        socket::setsockopt(&self.fd, sockopt::SendTimeout, &tv)?;
        Ok(())
    }

    /// Sends one message with `fds` attached.
    pub fn send(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> Result<(), TransportError> {
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let cmsgs: Vec<ControlMessage> = if raw.is_empty() { vec![] } else { vec![ControlMessage::ScmRights(&raw)] };
        socket::sendmsg::<()>(self.fd.as_raw_fd(), &[IoSlice::new(bytes)], &cmsgs, MsgFlags::MSG_NOSIGNAL, None)
            .map_err(io)?;
        Ok(())
    }

    /// Receives one message. A message longer than [`MAX_MESSAGE`] is cut by the kernel and
    /// reported as [`TransportError::TooLong`]; descriptors that came with it are closed.
    pub fn recv(&self) -> Result<Received, TransportError> {
        let mut buf = vec![0u8; MAX_MESSAGE + 1];
        let mut cmsg = nix::cmsg_space!([RawFd; 4]);
        let (n, flags, fds) = {
            let mut iov = [IoSliceMut::new(&mut buf)];
            let m = socket::recvmsg::<()>(self.fd.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC)
                .map_err(io)?;
            let mut fds = Vec::new();
            if let Ok(it) = m.cmsgs() {
                for c in it {
                    if let ControlMessageOwned::ScmRights(list) = c {
                        // SAFETY: the kernel just installed these descriptors in our table; we
                        // are their only owner.
                        fds.extend(list.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
                    }
                }
            }
            (m.bytes, m.flags, fds)
        };
        if n == 0 && fds.is_empty() {
            return Err(TransportError::Closed);
        }
        if flags.contains(MsgFlags::MSG_TRUNC) || n > MAX_MESSAGE {
            return Err(TransportError::TooLong);
        }
        buf.truncate(n);
        Ok(Received { bytes: buf, fds })
    }

    /// Sends a request and waits for the reply (client side).
    pub fn call(&self, req: &Request) -> Result<(Reply, Vec<OwnedFd>), TransportError> {
        self.call_with(req, &[])
    }

    /// Sends a request with descriptors attached (a re-registration hands its slot back) and
    /// waits for the reply, waiting again when a signal interrupts the wait: a managed program
    /// may be stopped and continued (`SIGSTOP`/`SIGCONT`) at any time, which makes a receive with
    /// a timeout fail with `EINTR` while the reply is still on its way. Giving up then would leave
    /// that reply to be read as the answer to the next request.
    pub fn call_with(&self, req: &Request, fds: &[BorrowedFd<'_>]) -> Result<(Reply, Vec<OwnedFd>), TransportError> {
        self.send(&msg::encode(req)?, fds)?;
        let mut tries = 0;
        let r = loop {
            match self.recv() {
                Err(TransportError::Io(e))
                    if e.kind() == std::io::ErrorKind::Interrupted && tries < INTERRUPTED_RETRIES =>
                {
                    tries += 1
                }
                other => break other?,
            }
        };
        Ok((msg::decode(&r.bytes)?, r.fds))
    }
}

/// Most times [`Conn::call_with`] waits again for a reply after a signal interrupted the wait.
const INTERRUPTED_RETRIES: u32 = 100;

fn libc_timeval(d: Duration) -> nix::libc::timeval {
    nix::libc::timeval { tv_sec: d.as_secs() as _, tv_usec: d.subsec_micros() as _ }
}

impl AsFd for Conn {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The manager's listening socket.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
}

impl Listener {
    /// Binds and listens at `path` (which must not exist), readable and writable by everyone: the
    /// manager checks each peer's credentials itself.
    pub fn bind(path: &Path) -> std::io::Result<Listener> {
        let fd = socket::socket(
            AddressFamily::Unix,
            SockType::SeqPacket,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            None,
        )?;
        let addr = UnixAddr::new(path)?;
        socket::bind(fd.as_raw_fd(), &addr)?;
        socket::listen(&fd, Backlog::new(128).map_err(std::io::Error::from)?)?;
        Ok(Listener { fd })
    }

    /// Accepts one connection, if one is waiting (the listener does not block).
    pub fn accept(&self) -> std::io::Result<Option<Conn>> {
        match socket::accept4(self.fd.as_raw_fd(), SockFlag::SOCK_CLOEXEC) {
            // SAFETY: accept4 returned a fresh descriptor that nothing else owns.
            Ok(fd) => Ok(Some(Conn::from_owned(unsafe { OwnedFd::from_raw_fd(fd) }))),
            Err(Errno::EAGAIN) | Err(Errno::ECONNABORTED) | Err(Errno::EINTR) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The default control socket: `$CPUMGR_SOCKET` when set; `/run/cpumgr/cpumgr.sock` for root;
/// `$XDG_RUNTIME_DIR/cpumgr.sock`; else `/tmp/cpumgr-UID/cpumgr.sock`.
pub fn default_socket() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("CPUMGR_SOCKET").filter(|p| !p.is_empty()) {
        return std::path::PathBuf::from(p);
    }
    let uid = nix::unistd::geteuid().as_raw();
    if uid == 0 {
        return std::path::Path::new("/run/cpumgr").join("cpumgr.sock");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
        Some(d) => std::path::PathBuf::from(d).join("cpumgr.sock"),
        None => std::path::PathBuf::from(format!("/tmp/cpumgr-{uid}")).join("cpumgr.sock"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{decode, encode};
    use crate::segment::Segment;

    #[test]
    fn messages_descriptors_and_credentials_cross_the_socket() {
        let dir = std::env::temp_dir().join(format!("cpumgr-proto-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sock");
        let _ = std::fs::remove_file(&path);
        let l = Listener::bind(&path).unwrap();
        let client = Conn::connect(&path).unwrap();
        let server = loop {
            if let Some(c) = l.accept().unwrap() {
                break c;
            }
        };
        let peer = server.peer().unwrap();
        assert_eq!(peer.pid, std::process::id() as i32);

        client.send(&encode(&Request::Status).unwrap(), &[]).unwrap();
        let got = server.recv().unwrap();
        assert_eq!(decode::<Request>(&got.bytes).unwrap(), Request::Status);

        let seg = Segment::create(5).unwrap();
        server.send(&encode(&Reply::Registered { id: 5 }).unwrap(), &[seg.fd()]).unwrap();
        let got = client.recv().unwrap();
        assert_eq!(got.fds.len(), 1);
        let mapped = Segment::open(got.fds.into_iter().next().unwrap()).unwrap();
        seg.slot().publish(1, 3, true, &cpumgr_core::CpuSet::first_n(3));
        assert_eq!(mapped.slot().allocated_count(), 3);

        client.send(&vec![b'x'; MAX_MESSAGE + 10], &[]).unwrap();
        assert!(matches!(server.recv(), Err(TransportError::TooLong)));
        drop(client);
        assert!(matches!(server.recv(), Err(TransportError::Closed)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
