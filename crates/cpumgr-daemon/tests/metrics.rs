//! The metrics endpoint over real TCP connections: which requests get the exposition, which get
//! only its headers, and which are refused.

mod support;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use cpumgr_core::CpuSet;
use cpumgr_daemon::Settings;
use support::{wait_for, Live};

/// A manager on one CPU serving metrics on a free loopback port; the longest quantum, so that
/// the exposition rarely changes between two requests.
fn serve() -> (Live, SocketAddr) {
    let settings =
        Settings { quantum: Duration::from_secs(10), cpus: Some(CpuSet::parse("0").unwrap()), ..Default::default() };
    let mut live = Live::start(&settings);
    let addr = live.manager.as_mut().unwrap().serve_metrics("127.0.0.1:0".parse().unwrap(), false).unwrap();
    (live, addr)
}

/// Sends `METHOD TARGET` and returns the reply's head and body.
fn request(addr: SocketAddr, method: &str, target: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    // A reply that does not come within this is a bug (the server's own deadlines are 2 s).
    s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    write!(s, "{method} {target} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").expect("a head and a blank line");
    (head.to_string(), body.to_string())
}

/// The value of header `name` in `head`.
fn header<'a>(head: &'a str, name: &str) -> &'a str {
    head.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(": ")).unwrap_or_else(|| panic!("no {name} in {head}"))
}

#[test]
fn head_answers_with_the_headers_of_get_and_no_body() {
    let (_live, addr) = serve();
    let (head, body) = request(addr, "HEAD", "/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.is_empty(), "{body}");
    // The length announced is the exposition's: that of a GET's body when the state did not
    // change in between (retried until it did not).
    wait_for("a HEAD announcing the length of the GET that follows", || {
        let (head, _) = request(addr, "HEAD", "/metrics");
        let (got, body) = request(addr, "GET", "/metrics");
        assert_eq!(header(&head, "Content-Type"), header(&got, "Content-Type"));
        header(&head, "Content-Length") == body.len().to_string()
    });
}

#[test]
fn a_query_string_is_ignored() {
    let (_live, addr) = serve();
    let (head, body) = request(addr, "GET", "/metrics?x=1");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(request(addr, "HEAD", "/metrics?").0.starts_with("HTTP/1.1 200"));
    assert!(request(addr, "GET", "/nope?x=1").0.starts_with("HTTP/1.1 404"));
}

#[test]
fn other_methods_and_paths_are_refused() {
    let (_live, addr) = serve();
    assert!(request(addr, "GET", "/nope").0.starts_with("HTTP/1.1 404"));
    let (head, _) = request(addr, "POST", "/metrics");
    assert!(head.starts_with("HTTP/1.1 405"), "{head}");
    assert_eq!(header(&head, "Allow"), "GET, HEAD");
    let (head, body) = request(addr, "HEAD", "/nope");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    assert!(body.is_empty(), "{body}");
}
