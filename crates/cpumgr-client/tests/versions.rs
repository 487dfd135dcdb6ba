//! A client and a manager of different versions refuse each other clearly, and neither writes
//! into memory laid out for another version.
//!
//! - A client speaking another protocol version, against the real manager (`Manager::start` on a
//!   private socket): the manager answers with an error naming both versions, attaches no slot,
//!   registers nothing, and keeps serving.
//! - This build's client against a manager of another version (a real control socket and a real
//!   slot segment, answering as that manager would): the client refuses the manager's messages
//!   and a slot of another layout, runs unmanaged with its own threads, and leaves the slot's
//!   bytes untouched.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::Ordering;
use std::time::Duration;

use cpumgr_client::{Client, Mode, Options};
use cpumgr_core::CpuSet;
use cpumgr_daemon::{Manager, Settings};
use cpumgr_proto::msg::{self, PROTO_VERSION};
use cpumgr_proto::slot::{Phase, LAYOUT_VERSION};
use cpumgr_proto::transport::Listener;
use cpumgr_proto::{Conn, Reply, Request, Segment};

/// A `sleep` child: the process a registration names, so that nothing this test does can make a
/// manager manage the test process itself.
struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_manager_refuses_a_client_of_another_protocol_version() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("cpumgr.sock");
    let settings = Settings {
        policy: "equipartition".into(),
        quantum: Duration::from_millis(50),
        cpus: Some(CpuSet::parse("0-1").unwrap()),
        ..Default::default()
    };
    let manager = Manager::start(&socket, &settings).unwrap();
    let sleeper = Sleeper(Command::new("sleep").arg("60").spawn().unwrap());
    for v in [0, PROTO_VERSION + 1] {
        let conn = Conn::connect(&socket).unwrap();
        let register = format!(r#"{{"v":{v},"op":"register","name":"v{v}","pid":{},"now":1}}"#, sleeper.0.id());
        conn.send(register.as_bytes(), &[]).unwrap();
        let received = conn.recv().unwrap();
        assert!(received.fds.is_empty(), "no slot goes to a client of version {v}");
        match msg::decode::<Reply>(&received.bytes).unwrap() {
            Reply::Error { message } => assert!(
                message.contains(&format!("protocol version {v} is not supported"))
                    && message.contains(&format!("speaks {PROTO_VERSION}")),
                "the refusal names both versions: {message}"
            ),
            other => panic!("version {v} was answered {other:?}"),
        }
    }
    // Nothing was registered, and the manager still answers this version.
    match Conn::connect(&socket).unwrap().call(&Request::Status).unwrap().0 {
        Reply::Status(s) => assert!(s.programs.is_empty(), "{s:?}"),
        other => panic!("{other:?}"),
    }
    manager.shutdown();
}

/// A control socket answering every request with `answer` (and `slot`'s descriptor attached),
/// until `stop` is dropped.
fn other_manager(socket: &Path, answer: String, slot: Option<OwnedFd>) -> std::sync::mpsc::Sender<()> {
    let listener = Listener::bind(socket).unwrap();
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut conns = Vec::new();
        while let Err(std::sync::mpsc::TryRecvError::Empty) = stopped.try_recv() {
            if let Ok(Some(c)) = listener.accept() {
                c.set_timeout(Some(Duration::from_millis(10))).unwrap();
                conns.push(c);
            }
            for c in &conns {
                if c.recv().is_ok() {
                    let fds: Vec<_> = slot.iter().map(|s| s.as_fd()).collect();
                    let _ = c.send(answer.as_bytes(), &fds);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    stop
}

fn client_of(socket: PathBuf) -> Client {
    Client::init(Options { max: Some(3), mode: Some("auto".into()), socket: Some(socket), ..Default::default() })
}

#[test]
fn a_manager_of_another_protocol_version_is_refused_and_the_program_keeps_its_threads() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("other.sock");
    let answer = format!(r#"{{"v":{},"reply":"registered","id":1}}"#, PROTO_VERSION + 1);
    let _stop = other_manager(&socket, answer, None);
    let client = client_of(socket);
    assert_eq!(client.mode(), Mode::Unmanaged);
    assert_eq!(client.team(0), 3, "the program's own threads");
}

#[test]
fn a_slot_of_another_layout_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("other.sock");
    // A slot segment as a manager of the next layout version would hand it out: the header is
    // this build's, but for the version number.
    let slot = Segment::create(1).unwrap();
    slot.slot().header.version.store(LAYOUT_VERSION + 1, Ordering::Relaxed);
    let answer = String::from_utf8(msg::encode(&Reply::Slot { id: 1 }).unwrap()).unwrap();
    let _stop = other_manager(&socket, answer, Some(slot.fd().try_clone_to_owned().unwrap()));
    let client = client_of(socket);
    assert_eq!(client.mode(), Mode::Unmanaged, "a slot of layout {} is not this build's", LAYOUT_VERSION + 1);
    // What a runtime does at every region and request: none of it may reach that memory.
    client.set_request(2, 1, 3);
    client.begin_region(3);
    client.report_speedup(3, 2.5);
    client.end_region();
    assert_eq!(client.team(0), 3);
    let s = slot.slot();
    assert_eq!((s.raw_request(), s.raw_speedup(), s.raw_team(), s.raw_phase()), (None, None, 0, Phase::Unknown));
    assert_eq!(s.raw_heartbeat(), 0, "not a byte written");
}
