//! What a kernel prints: one result line on stdout
//! (`kernel=stencil threads=2 regions=40 seconds=0.81 checksum=1234.5 n=256 ...`) and, with
//! `CPUMGR_KERNEL_LOG=1`, one stderr line per parallel region
//! (`region kernel=stencil name=sweeps index=0 threads=2 request=2`).

use std::collections::BTreeMap;
use std::str::FromStr;

/// A line of kernel output that does not have the expected shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kernel output line {line}: field '{field}': {problem}")]
pub struct ParseError {
    /// 1-based line number in the text given to the parser.
    pub line: usize,
    /// The field at fault (or `line` for the line as a whole).
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

/// A kernel's result line.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Which kernel printed it.
    pub kernel: String,
    /// The largest team any of its parallel regions had.
    pub threads: usize,
    /// How many parallel regions it opened.
    pub regions: u64,
    /// Wall time of its timed part.
    pub seconds: f64,
    /// The checksum exactly as printed (17 significant digits): runs that computed the same
    /// values print the same text.
    pub checksum: String,
    /// The kernel-specific fields that follow (sizes, derived figures).
    pub extra: BTreeMap<String, String>,
}

/// One parallel region, from the `CPUMGR_KERNEL_LOG=1` stderr log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionRecord {
    /// Which kernel opened it.
    pub kernel: String,
    /// The region's name within the kernel.
    pub name: String,
    /// 0-based position among the kernel's regions.
    pub index: u64,
    /// `omp_get_num_threads()` inside the region: the team it got.
    pub threads: usize,
    /// The nthreads ICV its master saw (`omp_get_max_threads()`): the team it asked for.
    pub request: usize,
}

/// Parses the result line: the last non-empty line of `stdout`.
pub fn parse_summary(stdout: &str) -> Result<Summary, ParseError> {
    let (line, text) = stdout
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .last()
        .ok_or_else(|| ParseError { line: 1, field: "line".into(), problem: "no result line".into() })?;
    let mut fields = Fields::parse(line + 1, text)?;
    Ok(Summary {
        kernel: fields.take("kernel")?,
        threads: fields.take_parsed("threads")?,
        regions: fields.take_parsed("regions")?,
        seconds: fields.take_parsed("seconds")?,
        checksum: fields.take("checksum")?,
        extra: fields.rest,
    })
}

/// Parses every `region ...` line of `stderr`, in order; other lines (runtime warnings) are
/// skipped.
pub fn parse_region_log(stderr: &str) -> Result<Vec<RegionRecord>, ParseError> {
    stderr
        .lines()
        .enumerate()
        .filter_map(|(i, l)| l.strip_prefix("region ").map(|rest| (i + 1, rest)))
        .map(|(line, rest)| {
            let mut f = Fields::parse(line, rest)?;
            Ok(RegionRecord {
                kernel: f.take("kernel")?,
                name: f.take("name")?,
                index: f.take_parsed("index")?,
                threads: f.take_parsed("threads")?,
                request: f.take_parsed("request")?,
            })
        })
        .collect()
}

/// The `key=value` pairs of one line.
struct Fields {
    line: usize,
    rest: BTreeMap<String, String>,
}

impl Fields {
    fn parse(line: usize, text: &str) -> Result<Self, ParseError> {
        let mut rest = BTreeMap::new();
        for word in text.split_whitespace() {
            let (key, value) = word.split_once('=').ok_or_else(|| ParseError {
                line,
                field: word.to_string(),
                problem: "expected key=value".into(),
            })?;
            if rest.insert(key.to_string(), value.to_string()).is_some() {
                return Err(ParseError { line, field: key.to_string(), problem: "appears twice".into() });
            }
        }
        Ok(Fields { line, rest })
    }

    fn take(&mut self, key: &str) -> Result<String, ParseError> {
        self.rest.remove(key).ok_or_else(|| ParseError {
            line: self.line,
            field: key.to_string(),
            problem: "missing".into(),
        })
    }

    fn take_parsed<T: FromStr>(&mut self, key: &str) -> Result<T, ParseError> {
        let text = self.take(key)?;
        text.parse().map_err(|_| ParseError {
            line: self.line,
            field: key.to_string(),
            problem: format!("'{text}' is not a valid {}", std::any::type_name::<T>()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_keeps_named_fields_and_extras() {
        let s =
            parse_summary("\nkernel=stencil threads=2 regions=40 seconds=0.812 checksum=1234.5678 n=256\n").unwrap();
        assert_eq!(s.kernel, "stencil");
        assert_eq!(s.threads, 2);
        assert_eq!(s.regions, 40);
        assert_eq!(s.seconds, 0.812);
        assert_eq!(s.checksum, "1234.5678");
        assert_eq!(s.extra.len(), 1);
        assert_eq!(s.extra["n"], "256");
    }

    #[test]
    fn summary_errors_name_line_and_field() {
        let e = parse_summary("kernel=x threads=two regions=1 seconds=1 checksum=1").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (1, "threads"));
        let e = parse_summary("noise\nkernel=x threads=1 seconds=1 checksum=1\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "regions"));
        let e = parse_summary("kernel=x kernel=y").unwrap_err();
        assert_eq!(e.field, "kernel");
        assert!(e.problem.contains("twice"));
        let e = parse_summary("kernel=x threads").unwrap_err();
        assert_eq!(e.field, "threads");
        assert!(parse_summary("  \n").is_err());
    }

    #[test]
    fn region_log_skips_other_lines_and_keeps_order() {
        let log = "libgomp: warning\nregion kernel=epd name=phase index=0 threads=2 request=2\n\
                   region kernel=epd name=phase index=1 threads=2 request=4\n";
        let r = parse_region_log(log).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].index, r[0].request), (0, 2));
        assert_eq!((r[1].index, r[1].threads, r[1].request), (1, 2, 4));
        let e = parse_region_log("x\nregion kernel=epd name=phase index=0 threads=-1 request=1").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (2, "threads"));
    }
}
