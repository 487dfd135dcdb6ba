//! Fitting a timeline to a chart's pixels, so that a report's size is bounded by its pictures and
//! not by the number of events: a trace of thousands of jobs and millions of allocations must still
//! give a page that a browser opens. With a chart [`Scale::columns`] pixel columns wide:
//!
//! - the programs charts draw at most a given number of rows ([`rows`]): the programs that held
//!   the most CPU time, and one row summing the others;
//! - a row draws at most two bars per pixel column ([`bars`]): consecutive segments narrower than
//!   a pixel together become one bar showing their mean;
//! - a CPU's row draws at most one stretch per pixel column ([`owner_columns`]): per column, its
//!   longest owner there;
//! - the replay shows at most one frame per pixel column ([`frame_times`]).
//!
//! A run whose changes are all at least a pixel apart is drawn exactly as its trace says.

use std::borrow::Cow;

use cpumgr_core::{CpuSet, Nanos, ProgramId};

use crate::timeline::{Lane, Ownership, Segment, Timeline};

/// The pixel columns of a chart's time axis: how many, and how much time each covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scale {
    /// Nanoseconds per pixel column.
    pub px: f64,
    /// Pixel columns from the timeline's start (0) to its end.
    pub columns: usize,
}

impl Scale {
    /// The scale of a timeline ending at `end` drawn `columns` pixels wide.
    pub fn new(end: Nanos, columns: usize) -> Scale {
        Scale { px: end.max(1) as f64 / columns.max(1) as f64, columns: columns.max(1) }
    }

    /// When column `c` begins (column `columns` begins where the time axis ends).
    fn at(&self, c: usize) -> Nanos {
        (c as f64 * self.px).round() as Nanos
    }

    /// The first and last columns that the stretch `from..to` overlaps.
    fn columns_of(&self, from: Nanos, to: Nanos) -> (usize, usize) {
        let first = ((from as f64 / self.px) as usize).min(self.columns - 1);
        let last = ((to as f64 / self.px).ceil() as usize).saturating_sub(1).clamp(first, self.columns - 1);
        (first, last)
    }

    /// How much of column `c` the stretch `from..to` covers, in nanoseconds.
    fn overlap(&self, c: usize, from: Nanos, to: Nanos) -> f64 {
        let (lo, hi) = (c as f64 * self.px, (c + 1) as f64 * self.px);
        ((to as f64).min(hi) - (from as f64).max(lo)).max(0.0)
    }
}

/// A row of the programs charts: one program, or the others summed into one lane.
#[derive(Debug, Clone)]
pub(crate) struct Row<'a> {
    /// The program's lane, or the sum of the programs without a row of their own.
    pub lane: Cow<'a, Lane>,
    /// The lane's index in the timeline (which gives its colour); `None` for the summed row.
    pub index: Option<usize>,
}

/// CPU time a lane held while running, in CPU-nanoseconds.
fn cpu_time(lane: &Lane) -> f64 {
    lane.segments.iter().map(Segment::held).sum()
}

/// At most `max` rows (at least one): every program when there are no more than `max`; else the
/// `max - 1` programs that held the most CPU time, in arrival order, and a last row summing the
/// others, so that a trace of thousands of jobs still draws a chart a reader can take in.
pub(crate) fn rows(t: &Timeline, max: usize) -> Vec<Row<'_>> {
    let max = max.max(1);
    if t.lanes.len() <= max {
        return t.lanes.iter().enumerate().map(|(i, lane)| Row { lane: Cow::Borrowed(lane), index: Some(i) }).collect();
    }
    let mut order: Vec<usize> = (0..t.lanes.len()).collect();
    let held: Vec<f64> = t.lanes.iter().map(cpu_time).collect();
    order.sort_by(|&a, &b| held[b].total_cmp(&held[a]).then(a.cmp(&b)));
    let (kept, others) = order.split_at_mut(max - 1);
    kept.sort_unstable();
    let mut rows: Vec<Row> = kept.iter().map(|&i| Row { lane: Cow::Borrowed(&t.lanes[i]), index: Some(i) }).collect();
    rows.push(Row { lane: Cow::Owned(summed(others.iter().map(|&i| &t.lanes[i]))), index: None });
    rows
}

/// The lanes summed into one, named after how many they are: from the first arrival to the last
/// exit, its segments are the stretches in which the CPUs they held while running, together, did
/// not change (a share of a segment, [`Segment::share`], counts as that share of its CPUs: the
/// sum is the CPUs at once, rounded up, and the share of the time that gives it).
fn summed<'a>(lanes: impl Iterator<Item = &'a Lane>) -> Lane {
    let mut sum = Lane {
        id: ProgramId(0),
        name: String::new(),
        arrival: Nanos::MAX,
        exit: 0,
        status: None,
        segments: Vec::new(),
        teams: Vec::new(),
    };
    let mut steps: Vec<(Nanos, f64)> = Vec::new();
    let mut count = 0;
    for lane in lanes {
        count += 1;
        sum.arrival = sum.arrival.min(lane.arrival);
        sum.exit = sum.exit.max(lane.exit);
        for s in lane.segments.iter().filter(|s| s.running) {
            steps.extend([(s.from, s.mean_cpus()), (s.to, -s.mean_cpus())]);
        }
    }
    sum.name = format!("{count} other programs");
    steps.sort_unstable_by_key(|s| s.0);
    let mut held = 0.0;
    for changes in steps.chunk_by(|a, b| a.0 == b.0) {
        let at = changes[0].0;
        held += changes.iter().map(|c| c.1).sum::<f64>();
        // Shares added and taken away again leave float residue (1/3 and 0.1: 2.8e-17), which
        // rounded up would be a CPU held where none is: a sum within a billionth of a whole
        // number is that number.
        let whole = held.round();
        if (held - whole).abs() < 1e-9 {
            held = whole;
        }
        // Whole CPUs at once, and the share of the time that gives the sum (a repeated span's
        // shares sum to a fraction of a CPU).
        let count = held.max(0.0).ceil() as u32;
        let share = if count > 0 { (held / f64::from(count)).min(1.0) } else { 1.0 };
        match sum.segments.last_mut() {
            Some(last) if last.count == count && (last.share - share).abs() < 1e-9 => continue,
            Some(last) => last.to = at,
            None => {}
        }
        sum.segments.push(Segment {
            from: at,
            to: at,
            count,
            cpus: CpuSet::new(),
            running: count > 0,
            share,
            repeated: false,
        });
    }
    sum.segments.retain(|s| s.to > s.from);
    sum
}

/// One bar of a program's row: one segment, or consecutive segments that are narrower than a
/// pixel together, shown as their mean.
#[derive(Debug, Clone)]
pub(crate) struct Bar {
    /// Start.
    pub from: Nanos,
    /// End.
    pub to: Nanos,
    /// CPU-nanoseconds held while running.
    held: f64,
    /// The segment's index in the row's lane, when the bar is exactly one.
    pub segment: Option<usize>,
    /// How many segments it stands for.
    pub merged: usize,
}

impl Bar {
    /// The bar of segment `k`, `s`.
    fn of(k: usize, s: &Segment) -> Bar {
        Bar { from: s.from, to: s.to, held: s.held(), segment: Some(k), merged: 1 }
    }

    /// This bar and the next one (later, adjacent) as one.
    fn join(self, next: Bar) -> Bar {
        Bar {
            from: self.from,
            to: next.to,
            held: self.held + next.held,
            segment: None,
            merged: self.merged + next.merged,
        }
    }

    /// Its width in nanoseconds.
    fn width(&self) -> f64 {
        (self.to - self.from) as f64
    }

    /// CPUs held while running, averaged over the bar's time (0 for a stopped program).
    pub fn cpus(&self) -> f64 {
        self.held / self.width().max(1.0)
    }
}

/// A row's segments as bars at least `px` nanoseconds wide (a pixel), but for the last one and
/// for those just before a segment that is a pixel wide on its own: at most two bars per pixel
/// column, and exactly the segments when each is at least a pixel wide.
pub(crate) fn bars(segments: &[Segment], px: f64) -> Vec<Bar> {
    let mut out = Vec::new();
    let mut pending: Option<Bar> = None;
    for bar in segments.iter().enumerate().map(|(k, s)| Bar::of(k, s)) {
        if bar.width() >= px {
            out.extend(pending.take());
            out.push(bar);
            continue;
        }
        let joined = match pending.take() {
            Some(p) => p.join(bar),
            None => bar,
        };
        if joined.width() >= px {
            out.push(joined);
        } else {
            pending = Some(joined);
        }
    }
    out.extend(pending);
    out
}

/// Who owned one CPU (its spans, from [`Timeline::cpu_owners`]), fitted to the scale's columns:
/// per column, the span that held the CPU longest in it, or nobody when it was idle for more than
/// half the column; consecutive columns of one span make one stretch (from, to, lane index). At
/// most one stretch per column; exactly the spans when each change is a pixel apart.
pub(crate) fn owner_columns(spans: &[(Nanos, Nanos, usize)], scale: Scale) -> Ownership {
    let mut best: Vec<Option<(usize, f64)>> = vec![None; scale.columns];
    let mut held = vec![0.0; scale.columns];
    for (k, &(from, to, _)) in spans.iter().enumerate() {
        let (first, last) = scale.columns_of(from, to);
        for c in first..=last {
            let o = scale.overlap(c, from, to);
            held[c] += o;
            if best[c].is_none_or(|(_, b)| o > b) {
                best[c] = Some((k, o));
            }
        }
    }
    let shown: Vec<Option<usize>> =
        best.iter().zip(&held).map(|(b, &h)| b.filter(|_| 2.0 * h >= scale.px).map(|(k, _)| k)).collect();
    let mut out = Vec::new();
    let mut c = 0;
    for run in shown.chunk_by(|a, b| a == b) {
        if let Some(k) = run[0] {
            out.push((scale.at(c), scale.at(c + run.len()), spans[k].2));
        }
        c += run.len();
    }
    out
}

/// The times the replay shows: every time a CPU changed hands (a span of `owners`, from
/// [`Timeline::cpu_owners`], began or ended: also the sharers' turns over a repeated span, which
/// no allocation marks), thinned so that consecutive frames are at least a pixel column apart (at
/// most `columns + 1` frames).
pub(crate) fn frame_times(owners: &[(u32, Ownership)], scale: Scale) -> Vec<Nanos> {
    let mut times: Vec<Nanos> = owners.iter().flat_map(|(_, spans)| spans.iter().flat_map(|s| [s.0, s.1])).collect();
    times.sort_unstable();
    let mut kept: Vec<Nanos> = Vec::new();
    for at in times {
        if kept.last().is_none_or(|&last| (at - last) as f64 >= scale.px) {
            kept.push(at);
        }
    }
    kept
}

/// Each CPU's owner (a lane index, `None` when idle) at each of `times` (ascending): one pass over
/// each CPU's spans (from [`Timeline::cpu_owners`]).
pub(crate) fn owners_at(owners: &[(u32, Ownership)], times: &[Nanos]) -> Vec<Vec<Option<usize>>> {
    let mut passed = vec![0; owners.len()];
    times
        .iter()
        .map(|&at| {
            owners
                .iter()
                .zip(&mut passed)
                .map(|((_, spans), passed)| {
                    while spans.get(*passed).is_some_and(|s| s.1 <= at) {
                        *passed += 1;
                    }
                    spans[*passed..].iter().take_while(|s| s.0 <= at).find(|s| at < s.1).map(|s| s.2)
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::tests::sample;

    fn seg(from: Nanos, to: Nanos, count: u32, running: bool) -> Segment {
        Segment { from, to, count, cpus: CpuSet::new(), running, share: 1.0, repeated: false }
    }

    #[test]
    fn segments_a_pixel_wide_are_their_own_bars_and_narrower_ones_merge_into_their_mean() {
        let wide = [seg(0, 10, 2, true), seg(10, 30, 1, false)];
        let b = bars(&wide, 10.0);
        assert_eq!(
            b.iter().map(|b| (b.from, b.to, b.segment)).collect::<Vec<_>>(),
            vec![(0, 10, Some(0)), (10, 30, Some(1))]
        );
        let narrow: Vec<Segment> =
            (0..10).map(|k| seg(k * 2, k * 2 + 2, 2, k % 2 == 0)).chain([seg(20, 40, 4, true)]).collect();
        let b = bars(&narrow, 10.0);
        assert_eq!(
            b.iter().map(|b| (b.from, b.to, b.merged)).collect::<Vec<_>>(),
            vec![(0, 10, 5), (10, 20, 5), (20, 40, 1)]
        );
        assert!((b[0].cpus() - 1.2).abs() < 1e-9, "3 of 5 stretches ran on 2 CPUs: {}", b[0].cpus());
        assert_eq!(b[2].cpus(), 4.0);
    }

    #[test]
    fn the_summed_row_keeps_the_shares_of_a_repeated_span() {
        // Three programs that each ran an eighth of a repeated span on one CPU: 0.375 CPUs on
        // average, one at a time (not rounded away to nothing).
        let lane = |name: &str| Lane {
            id: ProgramId(1),
            name: name.into(),
            arrival: 0,
            exit: 800,
            status: None,
            segments: vec![Segment { share: 0.125, ..seg(0, 800, 1, true) }],
            teams: Vec::new(),
        };
        let lanes = [lane("a"), lane("b"), lane("c")];
        let sum = summed(lanes.iter());
        assert_eq!(sum.segments.iter().map(|s| (s.from, s.to, s.count)).collect::<Vec<_>>(), vec![(0, 800, 1)]);
        assert!((sum.segments[0].share - 0.375).abs() < 1e-12, "{:?}", sum.segments);
        assert!((cpu_time(&sum) - 3.0 * 100.0).abs() < 1e-9);
    }

    #[test]
    fn shares_that_end_leave_no_cpu_held_in_the_summed_row() {
        // A third of a CPU, then a tenth beside it, ended one after the other, leave 2.8e-17 of
        // a CPU in a float sum: the gap after them must hold nothing.
        let lane = |share: f64, from: Nanos, to: Nanos| Lane {
            id: ProgramId(1),
            name: "p".into(),
            arrival: 0,
            exit: 300,
            status: None,
            segments: vec![Segment { share, ..seg(from, to, 1, true) }, seg(200, 300, 1, true)],
            teams: Vec::new(),
        };
        let lanes = [lane(1.0 / 3.0, 0, 50), lane(0.1, 10, 100)];
        let sum = summed(lanes.iter());
        let gap: Vec<_> = sum.segments.iter().filter(|s| s.from >= 100 && s.to <= 200).map(|s| s.count).collect();
        assert_eq!(gap, vec![0], "{:?}", sum.segments);
    }

    #[test]
    fn a_row_has_at_most_two_bars_per_pixel() {
        let many: Vec<Segment> = (0..100_000).map(|k| seg(k * 3, k * 3 + 3, (k % 5) as u32, true)).collect();
        assert!(bars(&many, 300_000.0 / 800.0).len() <= 2 * 800);
    }

    #[test]
    fn beyond_the_row_limit_the_busiest_programs_keep_their_rows_and_the_others_are_summed() {
        let mut t = Timeline::from_events(&sample());
        assert_eq!(rows(&t, 2).iter().map(|r| r.index).collect::<Vec<_>>(), vec![Some(0), Some(1)]);
        let mut c = t.lanes[0].clone();
        c.name = "c".into();
        t.lanes.push(c);
        t.lanes[0].segments.truncate(1); // a: 2 CPUs for 100 ns, less than b's and c's 400 CPU-ns.
        let r = rows(&t, 2);
        assert_eq!(r.iter().map(|r| r.index).collect::<Vec<_>>(), vec![Some(1), None]);
        let other = &r[1].lane;
        assert_eq!(other.name, "2 other programs");
        assert_eq!((other.arrival, other.exit), (0, 300));
        let sums: Vec<_> = other.segments.iter().map(|s| (s.from, s.to, s.count)).collect();
        assert_eq!(sums, vec![(0, 100, 4), (100, 300, 1)], "a and c, then c alone");
    }

    #[test]
    fn a_cpu_shows_its_longest_owner_per_pixel_and_idle_when_mostly_idle() {
        let scale = Scale::new(100, 10);
        let spans = [(0, 6, 1), (6, 10, 2), (10, 30, 3), (41, 44, 4), (50, 100, 5)];
        assert_eq!(owner_columns(&spans, scale), vec![(0, 10, 1), (10, 30, 3), (50, 100, 5)]);
        let exact = Scale::new(100, 100);
        assert_eq!(owner_columns(&spans, exact), spans.to_vec());
    }

    #[test]
    fn replay_frames_are_a_pixel_apart_and_show_the_owners_then() {
        let t = Timeline::from_events(&sample());
        let owners = t.cpu_owners(1);
        assert_eq!(
            frame_times(&owners, Scale::new(t.end, 800)),
            vec![0, 100, 300, 400],
            "the last shows the CPUs idle after the exits"
        );
        assert_eq!(frame_times(&owners, Scale::new(t.end, 2)), vec![0, 300]);
        let owners = owners_at(&owners, &[0, 150, 300, 400]);
        assert_eq!(
            owners,
            vec![vec![Some(0), Some(0)], vec![Some(0), Some(1)], vec![Some(1), Some(1)], vec![None, None]]
        );
    }
}
