//! Bad input in a workload or trace file: always names the file, the line and the field.

/// A workload file, SWF trace or preset that cannot be used, located at `file:line` and naming
/// the offending `field`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: field `{field}`: {message}")]
pub struct InputError {
    /// The file (or `preset:NAME`, `generator`).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// The field at fault.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl InputError {
    /// An error at `file:line` in `field`.
    pub fn new(file: impl Into<String>, line: usize, field: impl Into<String>, message: impl Into<String>) -> Self {
        InputError { file: file.into(), line, field: field.into(), message: message.into() }
    }
}
