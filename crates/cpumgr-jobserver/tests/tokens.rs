//! The server's tokens against a real client (the `jobserver` crate, which cargo and rustc
//! use), in both styles, with an allocation the test sets.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cpumgr_jobserver::{Jobserver, Style};

/// The clients read `MAKEFLAGS` from this process's environment: one test at a time.
static ENV: Mutex<()> = Mutex::new(());

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A server following `cpus`, and a client of it.
fn server(style: Style, cap: Option<u32>, cpus: &Arc<AtomicU32>) -> (Jobserver, jobserver::Client) {
    let mut js = Jobserver::new(style, cap).unwrap();
    let c = cpus.clone();
    js.follow(Box::new(move || Some(c.load(Ordering::Relaxed))), 1);
    std::env::set_var("MAKEFLAGS", js.makeflags(None));
    // SAFETY: the descriptors MAKEFLAGS names are the server's, open for its whole life.
    let client = unsafe { jobserver::Client::from_env() }.expect("a client of the server's MAKEFLAGS");
    (js, client)
}

/// Takes every token the client can get now (after the server has had time to hand them out).
fn take_all(client: &jobserver::Client) -> Vec<jobserver::Acquired> {
    std::thread::sleep(Duration::from_millis(50));
    std::iter::from_fn(|| client.try_acquire().unwrap()).collect()
}

fn tokens_follow_the_allocation(style: Style) {
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let cpus = Arc::new(AtomicU32::new(4));
    let (js, client) = server(style, None, &cpus);
    wait_for("3 tokens out", || js.tokens_out() == 3);
    let mut held = take_all(&client);
    assert_eq!(held.len(), 3, "4 CPUs: 3 tokens and the implicit job");

    // Down to 2 CPUs while all 3 are held: nothing is taken from the jobs; as two end, their
    // tokens are withheld, and the third stays with its job.
    cpus.store(2, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(js.tokens_out(), 3, "tokens held by jobs stay theirs");
    held.truncate(1);
    wait_for("the returned tokens withheld", || js.tokens_out() == 1);
    assert_eq!(take_all(&client).len(), 0, "no token for a new job while the one held fills the allocation");

    // Down to 1 CPU and back up: the held token comes back and is withheld, then 3 go out.
    cpus.store(1, Ordering::Relaxed);
    held.clear();
    wait_for("no token out", || js.tokens_out() == 0);
    assert_eq!(take_all(&client).len(), 0, "1 CPU: the implicit job only");
    cpus.store(4, Ordering::Relaxed);
    assert_eq!(take_all(&client).len(), 3, "back to 4 CPUs: 3 tokens");
}

#[test]
fn pipe_tokens_follow_the_allocation() {
    tokens_follow_the_allocation(Style::Pipe);
}

#[test]
fn fifo_tokens_follow_the_allocation() {
    tokens_follow_the_allocation(Style::Fifo);
}

#[test]
fn idle_tokens_are_taken_back_at_once() {
    let _env = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let cpus = Arc::new(AtomicU32::new(8));
    let (js, client) = server(Style::Pipe, Some(3), &cpus);
    assert_eq!(take_all(&client).len(), 2, "-j3 caps 8 CPUs at 2 tokens");
    cpus.store(1, Ordering::Relaxed);
    wait_for("the idle tokens taken back", || js.tokens_out() == 0);
    assert_eq!(take_all(&client).len(), 0);
}

#[test]
fn makeflags_keep_the_callers_flags_and_replace_its_jobserver() {
    let js = Jobserver::new(Style::Fifo, Some(64)).unwrap();
    let flags = js.makeflags(Some("-k -j8 --jobserver-auth=3,4 --no-print-directory"));
    assert!(flags.starts_with("-k --no-print-directory -j64 --jobserver-auth=fifo:"), "{flags}");
}
