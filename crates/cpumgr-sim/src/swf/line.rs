//! One job line of an SWF trace: its 18 fields read, checked and turned into what the simulator
//! uses of the job (or the reason the trace gives to leave it out).

use std::borrow::Cow;

use cpumgr_core::Nanos;

use super::{Omission, FIELDS};
use crate::error::InputError;
use crate::limits;

// The fields the simulator uses, as indices of [`FIELDS`].
pub(super) const JOB_NUMBER: usize = 0;
pub(super) const SUBMIT: usize = 1;
pub(super) const RUN: usize = 3;
pub(super) const ALLOCATED: usize = 4;
pub(super) const REQUESTED: usize = 7;
pub(super) const REQUESTED_TIME: usize = 8;
pub(super) const STATUS: usize = 10;
pub(super) const EXECUTABLE: usize = 13;

/// The fields read as the job's name, times or processor counts: their values are checked, where
/// the other fields need only be numbers.
pub(super) const CHECKED: [usize; 5] = [JOB_NUMBER, SUBMIT, RUN, ALLOCATED, REQUESTED];

/// The status (field 11) of a cancelled job.
pub(super) const CANCELLED: f64 = 5.0;

/// The statuses (field 11) of a partial execution of a checkpointed or swapped job: 2 (to be
/// continued), 3 (the last, the job completed), 4 (the last, the job failed). The standard gives
/// such a job a line of its own that sums it up, beside one line per partial execution.
pub(super) const PARTIAL: [f64; 3] = [2.0, 3.0, 4.0];

/// What the simulator uses of a job line.
pub(super) struct Raw {
    pub line: usize,
    /// `job` and the job number (field 1) as written.
    pub name: cpumgr_core::Name,
    pub arrival: Nanos,
    pub run: f64,
    /// The requested run time (field 9), seconds, when known (positive).
    pub requested: Option<f64>,
    pub size: u32,
    /// The field the size comes from (allocated or requested processors).
    pub size_field: usize,
    pub executable: f64,
}

/// What a job line holds.
pub(super) enum Entry {
    Job(Raw),
    Omitted(Omission),
}

/// `word` as a positive whole number (`256`, `256.0`, `2.56e2`), if it is one below 2^64.
pub(super) fn whole(word: &str) -> Option<u64> {
    whole_digits(word)?.parse().ok().filter(|&v| v >= 1)
}

/// `word`, a number in any decimal form, as the digits of the whole non-negative number it is
/// (`7`, `007`, `+7.0`, `0.7e1` are all `7`; `-0` is `0`), if it is one. Exact, from the text,
/// where a float rounds 9007199254740993 to ...992 and 1.00000000000000000001 to 1. At most 309
/// digits, as a finite float (`None` past them).
pub(super) fn whole_digits(word: &str) -> Option<Cow<'_, str>> {
    let unsigned = word.strip_prefix('+').unwrap_or(word);
    if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        let digits = unsigned.trim_start_matches('0');
        return Some(if digits.is_empty() { "0".into() } else { digits.into() });
    }
    let (negative, unsigned) = match unsigned.strip_prefix('-') {
        Some(u) => (true, u),
        None => (false, unsigned),
    };
    let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.len() + frac.len() == 0 || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let all = format!("{int}{frac}");
    let significant = all.trim_start_matches('0');
    let digits = significant.trim_end_matches('0');
    if digits.is_empty() {
        return Some("0".into());
    }
    if negative {
        return None;
    }
    // Where the decimal point falls after the leading zeros, and so how many zeros follow `digits`.
    let point = (int.len() as i64 - (all.len() - significant.len()) as i64).checked_add(exponent.parse().ok()?)?;
    let zeros = usize::try_from(point - digits.len() as i64).ok()?;
    (point <= 309).then(|| format!("{digits}{}", "0".repeat(zeros)).into())
}

/// Reads job line `n`: a job, a job left out, or an error naming the field.
pub(super) fn parse_line(file: &str, n: usize, line: &str) -> Result<Entry, InputError> {
    let bad = |i: usize, m: String| InputError::new(file, n, FIELDS[i], m);
    // Counted before they are read: a line of the wrong length is that error, whatever its fields.
    let count = line.split_whitespace().count();
    if count != FIELDS.len() {
        return Err(InputError::new(file, n, "line", format!("{count} fields, an SWF line has 18")));
    }
    let mut words = [""; 18];
    let mut fields = [0f64; 18];
    for (i, p) in line.split_whitespace().enumerate() {
        words[i] = p;
        fields[i] = p.parse().map_err(|_| bad(i, format!("{p:?} is not a number")))?;
    }
    for i in CHECKED {
        let v = fields[i];
        if !v.is_finite() {
            return Err(bad(i, format!("{v} is not a finite number")));
        }
        if v < 0.0 && v != -1.0 {
            return Err(bad(i, format!("{v} is negative (only -1, unknown, may be)")));
        }
    }
    // A count as the digits of the whole number it is; `None`: unknown (-1).
    let whole_count = |i: usize| {
        if fields[i] == -1.0 {
            return Ok(None);
        }
        whole_digits(words[i]).map(Some).ok_or_else(|| bad(i, format!("{} is not a whole number", words[i])))
    };
    let number = whole_count(JOB_NUMBER)?;
    whole_count(ALLOCATED)?;
    whole_count(REQUESTED)?;
    if let Some(reason) = omission(&fields) {
        return Ok(Entry::Omitted(reason));
    }
    let arrival = limits::nanos(fields[SUBMIT]).map_err(|m| bad(SUBMIT, m))?;
    limits::nanos(fields[RUN]).map_err(|m| bad(RUN, m))?;
    let size_field = if fields[ALLOCATED] > 0.0 { ALLOCATED } else { REQUESTED };
    let size = processors(fields[size_field]).map_err(|m| bad(size_field, m))?;
    let name = compact_str::format_compact!("job{}", number.as_deref().unwrap_or("-1"));
    let requested = Some(fields[REQUESTED_TIME]).filter(|t| t.is_finite() && *t > 0.0);
    Ok(Entry::Job(Raw {
        line: n,
        name,
        arrival,
        run: fields[RUN],
        requested,
        size,
        size_field,
        executable: fields[EXECUTABLE],
    }))
}

/// Why the trace's own values leave the job out, if they do.
fn omission(fields: &[f64; 18]) -> Option<Omission> {
    if fields[STATUS] == CANCELLED && fields[RUN] <= 0.0 {
        Some(Omission::Cancelled)
    } else if PARTIAL.contains(&fields[STATUS]) {
        Some(Omission::PartialExecution)
    } else if fields[SUBMIT] < 0.0 {
        Some(Omission::UnknownSubmit)
    } else if fields[RUN] < 0.0 {
        Some(Omission::UnknownRunTime)
    } else if fields[ALLOCATED] <= 0.0 && fields[REQUESTED] <= 0.0 {
        Some(Omission::UnknownSize)
    } else {
        None
    }
}

/// A positive whole processor count as a job size, if a machine can have that many. The count is
/// whole ([`parse_line`] checks it first): a fraction such as `.6` would truncate to no CPU.
fn processors(v: f64) -> Result<u32, String> {
    if v > limits::MAX_CPUS as f64 {
        return Err(format!("{v} processors: a simulated machine has at most {}", limits::MAX_CPUS));
    }
    Ok(v as u32)
}
