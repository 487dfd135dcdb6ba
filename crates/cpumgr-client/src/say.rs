//! Lines on the program's stderr that its own output never splits.
//!
//! `eprintln!` writes a formatted line piece by piece (a `write(2)` for every literal and every
//! argument: `"cpumgr: "`, the message, `"\n"`), so a line the client prints from its own thread
//! can be cut in two by the program's threads printing at the same moment (a C runtime's
//! `fprintf(stderr, …)` is one `write`), and whoever reads the log finds neither line whole. The
//! line is formatted first and written in one call.

use std::io::Write;

/// Writes `line` and a newline to stderr in one `write(2)`. Errors are ignored, as
/// `eprintln!`'s are not: a program must not fail because its stderr is closed.
pub fn say(line: std::fmt::Arguments<'_>) {
    let _ = write_line(&mut std::io::stderr().lock(), line);
}

/// Says something about cpumgr on the program's stderr, unless `CPUMGR_QUIET` is set.
pub(crate) fn note(msg: &str) {
    if std::env::var_os("CPUMGR_QUIET").is_none() {
        say(format_args!("cpumgr: {msg}"));
    }
}

/// Formats `line` and a newline, then hands the whole to `out` in one `write_all`.
fn write_line(out: &mut impl Write, line: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    let mut text = line.to_string();
    text.push('\n');
    out.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that keeps every `write` call apart, as the kernel sees them.
    #[derive(Default)]
    struct Calls(Vec<String>);

    impl Write for Calls {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(String::from_utf8_lossy(buf).into_owned());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_formatted_line_is_one_write() {
        let msg = "registered again";
        let mut whole = Calls::default();
        write_line(&mut whole, format_args!("cpumgr: {msg}")).unwrap();
        assert_eq!(whole.0, ["cpumgr: registered again\n"]);
    }
}
