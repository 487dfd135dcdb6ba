//! The live cpumgr manager: programs register over a Unix socket and get a shared-memory slot;
//! every quantum the scheduler loop snapshots them, runs the active policy and the placer, and
//! enforces the decision with CPU affinity and SIGSTOP/SIGCONT. Runs as `cpumgr daemon`, or
//! embedded in `cpumgr run` / `cpumgr launch` when no daemon answers.

#![warn(missing_docs)]

pub mod client;
pub mod manager;
pub mod procfs;
pub mod server;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use manager::{Config, Manager};

/// A running manager: its socket, its scheduler thread, and the flag that stops it.
pub struct Running {
    /// The manager.
    pub manager: Arc<Manager>,
    /// Where it listens.
    pub socket: PathBuf,
    stop: Arc<AtomicBool>,
    scheduler: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Stops the scheduler, restores every program, removes the socket.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.manager.set_quantum(self.manager.quantum());
        if let Some(t) = self.scheduler.take() {
            let _ = t.join();
        }
        self.manager.restore_all();
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Starts a manager listening on `socket`: the accept loop and the scheduler loop run on their
/// own threads. The scheduler ticks every quantum, or sooner when a CPU is released or the policy
/// asks to be woken.
pub fn start(config: Config, socket: &Path) -> std::io::Result<Running> {
    let manager = Arc::new(Manager::new(config).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?);
    let listener = server::bind(socket)?;
    let m = Arc::clone(&manager);
    std::thread::Builder::new().name("cpumgr-accept".into()).spawn(move || server::serve(m, listener))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (m, s) = (Arc::clone(&manager), Arc::clone(&stop));
    let scheduler = std::thread::Builder::new().name("cpumgr-scheduler".into()).spawn(move || {
        while !s.load(Ordering::SeqCst) {
            let next = m.tick();
            m.wait(next);
        }
    })?;
    Ok(Running { manager, socket: socket.to_path_buf(), stop, scheduler: Some(scheduler) })
}
