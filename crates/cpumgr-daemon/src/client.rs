//! The client side of the control socket: what `cpumgr run`, `status`, `policy` and `quantum`
//! (and later the runtimes) use to talk to a manager.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use cpumgr_proto::message::{encode_request, Request, Response};
use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};

/// A connection to a manager.
pub struct Client {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
}

impl Client {
    /// Connects to the manager at `path`.
    pub fn connect(path: &Path) -> std::io::Result<Client> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Client { stream, reader })
    }

    /// Sends a request and reads its response.
    pub fn request(&mut self, request: &Request) -> std::io::Result<Response> {
        self.stream.write_all(encode_request(request).as_bytes())?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the manager closed the connection"));
        }
        serde_json::from_str(&line).map_err(std::io::Error::other)
    }

    /// Sends a `register` request and receives the response with the slot's file descriptor.
    pub fn register(&mut self, request: &Request) -> std::io::Result<(Response, Option<OwnedFd>)> {
        self.stream.write_all(encode_request(request).as_bytes())?;
        let mut buf = vec![0u8; 4096];
        let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 1]);
        let (n, fd) = {
            let mut iov = [std::io::IoSliceMut::new(&mut buf)];
            let msg = recvmsg::<()>(self.stream.as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC).map_err(std::io::Error::from)?;
            let mut fd = None;
            for c in msg.cmsgs().map_err(std::io::Error::from)? {
                if let ControlMessageOwned::ScmRights(fds) = c {
                    // SAFETY: the kernel just installed these descriptors for us; we own them.
                    fd = fds.first().map(|&f| unsafe { OwnedFd::from_raw_fd(f) });
                }
            }
            (msg.bytes, fd)
        };
        let mut line = buf[..n].to_vec();
        while !line.ends_with(b"\n") {
            let mut more = Vec::new();
            if self.reader.read_until(b'\n', &mut more)? == 0 {
                break;
            }
            line.extend(more);
        }
        let response = serde_json::from_slice(&line).map_err(std::io::Error::other)?;
        Ok((response, fd))
    }
}
