//! Reading cpumgr traces and showing them: [`timeline`] folds the event stream into per-program
//! segments; [`html`] renders self-contained reports with Gantt charts and a replay; [`export`]
//! writes Perfetto and Paraver traces; [`summary`] rebuilds a run's figures from its trace. The
//! live manager's and the simulator's traces are the same format, so everything here serves both.
//! A report's charts are fitted to their pixels (`fit`), so its size is bounded by its pictures,
//! not by the length of the trace.

#![warn(missing_docs)]

pub mod export;
mod fit;
pub mod html;
pub mod summary;
pub mod timeline;

pub use html::{render, Report, Table};
pub use timeline::{parse_trace, Timeline, TraceError};
