//! Bad input: errors that name the file, line and field, and map to exit code 2.

use std::fmt;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

/// Input the user gave that cpumgr cannot use: a malformed file, list, spec or parameter. The
/// message names where (file, line, field) and what is wrong; `main` exits with code 2 for it.
#[derive(Debug)]
pub struct InputError(pub String);

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

impl InputError {
    /// An error about the command line or a value given on it, already wrapped for `?`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(msg: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(InputError(msg.into()))
    }

    /// An error at `file:line` in `field`.
    pub fn at(file: &Path, line: usize, field: &str, msg: impl fmt::Display) -> anyhow::Error {
        Self::new(format!("{}:{line}: field `{field}`: {msg}", file.display()))
    }
}

/// Reads a whole input file, as an [`InputError`] when it cannot be read.
pub fn read_file(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).map_err(|e| InputError::new(format!("{}: {e}", path.display())))
}

/// Opens an input file to be read a line at a time, as an [`InputError`] when it cannot be
/// opened.
pub fn open_file(path: &Path) -> anyhow::Result<BufReader<File>> {
    File::open(path).map(BufReader::new).map_err(|e| InputError::new(format!("{}: {e}", path.display())))
}

/// The 1-based line of a byte offset in `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// A TOML parse error as an [`InputError`] naming the file, the line, and the field on that line
/// when there is one (`key = value`).
pub fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> anyhow::Error {
    let line = e.span().map_or(1, |s| line_of(text, s.start));
    let key = text
        .lines()
        .nth(line - 1)
        .and_then(|l| l.split_once('='))
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    match key {
        Some(k) => InputError::new(format!("{}:{line}: field `{k}`: {}", path.display(), e.message())),
        None => InputError::new(format!("{}:{line}: {}", path.display(), e.message())),
    }
}
