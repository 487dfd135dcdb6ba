//! Which commands get a jobserver, in which style, and how their own `-j` is taken out.
//!
//! GNU make and ninja both ignore an inherited jobserver when their command line says `-jN`
//! (make 4.3 warns "-jN forced in submake: resetting jobserver mode" and makes its own; ninja
//! 1.13 just runs N jobs). So the `-j` a user typed is taken out of the command line and kept as
//! the build's cap: `make -j4` under cpumgr runs at most 4 jobs, and fewer when the allocation is
//! smaller. `make` without `-j` asked for one job at a time and gets no jobserver. cargo joins
//! an inherited jobserver whatever its `-j`, which stays a cap there, so its line is kept.

use std::path::Path;

/// How the jobserver is passed to the build (`--jobserver-auth` in `MAKEFLAGS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Two inherited descriptors, `R,W`: what every GNU make (4.3 here), cargo and the jobserver
    /// crate read. The server reads returned tokens from `W`'s own pipe, so it never races the
    /// build for them.
    Pipe,
    /// A named pipe, `fifo:PATH`: GNU make ≥ 4.4 and ninja ≥ 1.13 (which reads no other style).
    Fifo,
}

/// What `cpumgr run` does for a build command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The command line to run (the original, less its `-j` for make and ninja).
    pub args: Vec<String>,
    pub style: Style,
    /// The most jobs the command line asked for (`-jN`), if it said.
    pub cap: Option<u32>,
}

/// The kind of build tool a command is, by its program's file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Make,
    Ninja,
    Cargo,
    Other,
}

fn tool(program: &str) -> Tool {
    match Path::new(program).file_name().and_then(|n| n.to_str()).unwrap_or("") {
        "make" | "gmake" => Tool::Make,
        "ninja" => Tool::Ninja,
        "cargo" => Tool::Cargo,
        _ => Tool::Other,
    }
}

/// The plan for `cmd`: `force` is `Some(true)` for `--jobserver` (any command gets one, in the
/// pipe style unless it is ninja), `Some(false)` for `--no-jobserver`, `None` to decide by the
/// command (make with `-j`, ninja, cargo).
pub fn plan(cmd: &[String], force: Option<bool>) -> Option<Plan> {
    let program = cmd.first()?;
    if force == Some(false) {
        return None;
    }
    let t = tool(program);
    let (rest, jobs) = match t {
        Tool::Make => strip_jobs(&cmd[1..], MAKE),
        Tool::Ninja => strip_jobs(&cmd[1..], NINJA),
        Tool::Cargo | Tool::Other => (cmd[1..].to_vec(), None),
    };
    let wanted = match t {
        Tool::Make => jobs.is_some(),
        Tool::Ninja | Tool::Cargo => true,
        Tool::Other => false,
    };
    if !(wanted || force == Some(true)) {
        return None;
    }
    let style = if t == Tool::Ninja { Style::Fifo } else { Style::Pipe };
    let mut args = vec![program.clone()];
    args.extend(rest);
    Some(Plan { args, style, cap: jobs.flatten() })
}

/// A tool's option syntax, as far as finding its `-j` needs.
struct Syntax {
    /// Short options that take an argument (attached, or the next word).
    with_arg: &'static str,
    /// Short options whose argument is optional and attached only (besides `-j`).
    optional_arg: &'static str,
    /// Whether `-j` may stand alone (make: any number of jobs) and takes a following number.
    bare_j: bool,
    /// The long form of `-j`, if any.
    long: Option<&'static str>,
}

const MAKE: Syntax = Syntax { with_arg: "CEfIoW", optional_arg: "lO", bare_j: true, long: Some("--jobs") };
const NINJA: Syntax = Syntax { with_arg: "dfklmtwC", optional_arg: "", bare_j: false, long: None };

/// Takes every `-j` (alone, `-jN`, `-j N`, inside a cluster such as `-kj8`, `--jobs[=N]`) out of
/// `args`; returns the rest and the last one's value: `None` without any, `Some(None)` for a `-j`
/// without a number.
fn strip_jobs(args: &[String], syn: Syntax) -> (Vec<String>, Option<Option<u32>>) {
    let mut out = Vec::with_capacity(args.len());
    let mut jobs = None;
    let mut i = 0;
    let number = |s: &str| s.parse::<u32>().ok().filter(|n| *n > 0);
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            out.extend(args[i - 1..].iter().cloned());
            break;
        }
        if let Some(long) = syn.long.filter(|l| a.starts_with(l)) {
            match &a[long.len()..] {
                "" => {
                    let n = args.get(i).and_then(|s| number(s));
                    i += n.is_some() as usize;
                    jobs = Some(n);
                    continue;
                }
                v if v.starts_with('=') => {
                    jobs = Some(number(&v[1..]));
                    continue;
                }
                _ => {}
            }
        }
        if !a.starts_with('-') || a.starts_with("--") || a.len() < 2 {
            out.push(a.clone());
            continue;
        }
        // A cluster of short options: keep all but `-j` and its number.
        let mut kept = String::from("-");
        let mut rest = &a[1..];
        let mut takes_next = false;
        while let Some(c) = rest.chars().next() {
            let after = &rest[c.len_utf8()..];
            if c == 'j' {
                let digits: &str = &after[..after.find(|ch: char| !ch.is_ascii_digit()).unwrap_or(after.len())];
                if digits.is_empty() && after.is_empty() {
                    let n = args.get(i).and_then(|s| number(s));
                    if n.is_none() && !syn.bare_j {
                        // ninja's `-j` always takes the next word.
                        jobs = Some(args.get(i).and_then(|s| number(s)));
                        i += 1;
                    } else {
                        i += n.is_some() as usize;
                        jobs = Some(n);
                    }
                } else {
                    jobs = Some(number(digits));
                }
                rest = &after[digits.len()..];
                continue;
            }
            kept.push(c);
            if syn.with_arg.contains(c) {
                kept.push_str(after);
                takes_next = after.is_empty();
                break;
            }
            if syn.optional_arg.contains(c) {
                kept.push_str(after);
                break;
            }
            rest = after;
        }
        if kept.len() > 1 {
            out.push(kept);
        }
        if takes_next {
            if let Some(next) = args.get(i) {
                out.push(next.clone());
                i += 1;
            }
        }
    }
    (out, jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn planned(s: &str) -> Option<(String, Style, Option<u32>)> {
        plan(&words(s), None).map(|p| (p.args.join(" "), p.style, p.cap))
    }

    #[test]
    fn make_with_j_gets_a_pipe_jobserver_and_loses_its_j() {
        assert_eq!(planned("make -j64"), Some(("make".into(), Style::Pipe, Some(64))));
        assert_eq!(planned("make -j 8 all"), Some(("make all".into(), Style::Pipe, Some(8))));
        assert_eq!(planned("make -j all"), Some(("make all".into(), Style::Pipe, None)));
        assert_eq!(
            planned("/usr/bin/make --jobs=3 -C dir"),
            Some(("/usr/bin/make -C dir".into(), Style::Pipe, Some(3)))
        );
        assert_eq!(planned("gmake --jobs 5 x"), Some(("gmake x".into(), Style::Pipe, Some(5))));
        assert_eq!(planned("make -kj8 V=1"), Some(("make -k V=1".into(), Style::Pipe, Some(8))));
        assert_eq!(planned("make -j4k"), Some(("make -k".into(), Style::Pipe, Some(4))));
    }

    #[test]
    fn a_j_inside_an_option_argument_is_kept() {
        assert_eq!(planned("make -Cproj -j2"), Some(("make -Cproj".into(), Style::Pipe, Some(2))));
        assert_eq!(planned("make -C -j -j2"), Some(("make -C -j".into(), Style::Pipe, Some(2))));
        assert_eq!(planned("make -fj.mk -j"), Some(("make -fj.mk".into(), Style::Pipe, None)));
        assert_eq!(planned("make -j2 -- -j3"), Some(("make -- -j3".into(), Style::Pipe, Some(2))));
    }

    #[test]
    fn serial_make_and_other_commands_get_none() {
        assert_eq!(planned("make all"), None);
        assert_eq!(planned("sh -c make"), None);
        assert_eq!(planned("make-j4"), None);
    }

    #[test]
    fn ninja_gets_a_fifo_and_cargo_keeps_its_line() {
        assert_eq!(planned("ninja -j 64 -C out"), Some(("ninja -C out".into(), Style::Fifo, Some(64))));
        assert_eq!(planned("ninja -vj8"), Some(("ninja -v".into(), Style::Fifo, Some(8))));
        assert_eq!(planned("ninja"), Some(("ninja".into(), Style::Fifo, None)));
        assert_eq!(planned("cargo build -j 4"), Some(("cargo build -j 4".into(), Style::Pipe, None)));
    }

    #[test]
    fn the_flags_force_either_way() {
        assert_eq!(plan(&words("sh build.sh"), Some(true)).map(|p| p.style), Some(Style::Pipe));
        assert_eq!(plan(&words("make -j4"), Some(false)), None);
        assert_eq!(plan(&words("make all"), Some(true)).map(|p| p.cap), Some(None));
    }
}
