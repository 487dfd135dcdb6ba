//! cpumgr's C/OpenMP test kernels, seen from Rust: [`build`] compiles them with make (gcc and
//! libgomp, or clang and LLVM libomp), [`catalog`] says what each kernel models and with which
//! arguments it runs for a test (about a second) or a benchmark (about ten), and [`output`]
//! parses the result line and the per-region log they print.
//!
//! The kernels live in `kernels/` at the workspace root as plain C so that they are what the
//! manager will meet in the field: unmodified OpenMP binaries. Nothing is built by a build
//! script; callers (tests, `cpumgr demo`) build into a directory of their choice when needed.

#![warn(missing_docs)]

pub mod catalog;
pub mod figures;
pub mod make;
pub mod output;

pub use catalog::{find, Kernel, Size, KERNELS};
pub use figures::{figure, median};
pub use make::{build, compiler_present, probe, source_dir, BuildError};
pub use output::{parse_region_log, parse_summary, ParseError, RegionRecord, Summary};
