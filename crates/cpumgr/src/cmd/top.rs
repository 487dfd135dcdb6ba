//! `cpumgr top`: a live terminal view of the manager, polling its `status` over the socket.
//!
//! A header with the policy, quantum, backend and steps taken; the managed CPUs drawn along the
//! machine's topology (one line per package, cores bracketed), each CPU coloured by the program
//! that owns it; a table of programs (id, name, pid, request, allocation, CPU set, state, CPU time,
//! speedup when the runtime reports one), with a second line under the CPU set and state of a
//! program that has a bound: the CPUs it is allowed when not all (`in 0-3`: a batch system's
//! binding), and `affinity` when a cpuset backend confines it by affinity (its cgroup is someone
//! else's, a Slurm step's say). Keys: `q` quit, `s` cycle the sort column, `p` switch to
//! the next policy of the catalog (`set-policy`), `+`/`-` double or halve the quantum. Fits 80×24,
//! so it works over SSH. `--once` prints one frame as plain text, for scripts.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use cpumgr_core::{Level, Topology};
use cpumgr_proto::msg::{ProgramStatus, StatusReport};
use cpumgr_proto::{Reply, Request};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, Wrap};
use ratatui::{Frame, Terminal};

use super::control::{call, duration, socket_path};

/// Arguments of `cpumgr top`.
#[derive(Debug, Parser)]
pub struct Args {
    /// Control socket.
    #[arg(long, env = "CPUMGR_SOCKET")]
    pub socket: Option<PathBuf>,
    /// How often to poll the manager (`500ms`, `1s`).
    #[arg(long, default_value = "500ms")]
    pub interval: String,
    /// Print one 80×24 frame as plain text and exit.
    #[arg(long)]
    pub once: bool,
}

/// Program colours, by program id.
const PALETTE: [Color; 6] = [Color::Blue, Color::Green, Color::Magenta, Color::Cyan, Color::Yellow, Color::Red];

/// The colour of program `id`.
fn colour(id: u64) -> Color {
    PALETTE[(id as usize).wrapping_sub(1) % PALETTE.len()]
}

/// The table column programs are sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// Registration order.
    Id,
    /// Name.
    Name,
    /// Most allocated CPUs first.
    Alloc,
    /// Most CPU time first.
    CpuTime,
    /// Running, then waiting, then stopped.
    State,
}

impl Sort {
    /// The next column in the cycle.
    fn next(self) -> Sort {
        match self {
            Sort::Id => Sort::Name,
            Sort::Name => Sort::Alloc,
            Sort::Alloc => Sort::CpuTime,
            Sort::CpuTime => Sort::State,
            Sort::State => Sort::Id,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Sort::Id => "id",
            Sort::Name => "name",
            Sort::Alloc => "alloc",
            Sort::CpuTime => "cpu time",
            Sort::State => "state",
        }
    }

    fn order(self, v: &mut [ProgramStatus]) {
        match self {
            Sort::Id => v.sort_by_key(|p| p.id),
            Sort::Name => v.sort_by(|a, b| a.name.cmp(&b.name)),
            Sort::Alloc => v.sort_by_key(|p| std::cmp::Reverse(p.count)),
            Sort::CpuTime => v.sort_by_key(|p| std::cmp::Reverse(p.cpu_ms)),
            Sort::State => v.sort_by_key(|p| ["running", "waiting", "stopped"].iter().position(|s| *s == p.state)),
        }
    }
}

/// The managed CPUs grouped as the machine is: packages, each a list of cores, each its CPUs.
pub type Groups = Vec<Vec<Vec<u32>>>;

/// Groups `cpus` by package and core of `topology`; CPUs it does not know form one group each.
pub fn groups(topology: &Topology, cpus: &cpumgr_core::CpuSet) -> Groups {
    let mut out: Groups = topology
        .level(Level::Package)
        .map(|pkg| {
            topology
                .level(Level::Core)
                .filter(|core| core.cpus.is_subset(&pkg.cpus))
                .map(|core| core.cpus.intersection(cpus).iter().collect::<Vec<u32>>())
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
        })
        .filter(|p| !p.is_empty())
        .collect();
    let unknown: Vec<Vec<u32>> = cpus.difference(topology.cpus()).iter().map(|c| vec![c]).collect();
    if !unknown.is_empty() {
        out.push(unknown);
    }
    out
}

/// What the view shows: the last status, how it is sorted, the CPU groups, a message line.
#[derive(Debug)]
pub struct View {
    /// The manager's last status.
    pub status: StatusReport,
    /// The sort column.
    pub sort: Sort,
    /// The managed CPUs along the topology.
    pub groups: Groups,
    /// The outcome of the last key action, or an error.
    pub message: String,
}

/// Draws the whole view.
pub fn draw(f: &mut Frame, v: &View) {
    let s = &v.status;
    let map = cpu_map(v);
    let map_height = (map.len() as u16).clamp(1, 6) + 2;
    let [header, cpus, table, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(map_height),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let title =
        format!(" cpumgr · policy {} · quantum {} ms · {} · steps {}", s.policy, s.quantum_ms, s.backend, s.steps);
    f.render_widget(Paragraph::new(title).style(Style::new().add_modifier(Modifier::REVERSED)), header);
    f.render_widget(
        Paragraph::new(map).block(Block::bordered().title(format!(" CPUs {} ", s.cpus))).wrap(Wrap { trim: false }),
        cpus,
    );
    f.render_widget(program_table(v), table);
    let keys = format!(" q quit  s sort ({})  p next policy  +/- quantum  {}", v.sort.label(), v.message);
    f.render_widget(Paragraph::new(keys).style(Style::new().add_modifier(Modifier::DIM)), footer);
}

/// One line per package: `pkg0 [ 0  1 ][ 2  3 ]`, each CPU on its owner's colour.
fn cpu_map(v: &View) -> Vec<Line<'static>> {
    v.groups
        .iter()
        .enumerate()
        .map(|(i, pkg)| {
            let mut spans = vec![Span::raw(format!("pkg{i} "))];
            for core in pkg {
                spans.push(Span::raw("["));
                for &cpu in core {
                    let owner = v.status.programs.iter().find(|p| p.cpus.contains(cpu));
                    let style = match owner {
                        Some(p) => Style::new().bg(colour(p.id)).fg(Color::Black),
                        None => Style::new().fg(Color::DarkGray),
                    };
                    spans.push(Span::styled(format!("{cpu:>3}"), style));
                }
                spans.push(Span::raw("]"));
            }
            Line::from(spans)
        })
        .collect()
}

/// Its team's threads and how they run: `2 folded` when a folding team has fewer CPUs than
/// threads, `2 rigid`, `serial`, or `-` when its runtime does not say; a folding team's cost of
/// folding after it (`2 folded x1.4`).
fn team_cell(p: &ProgramStatus) -> String {
    let cell = match (p.team.as_str(), p.threads) {
        ("", _) => "-".into(),
        ("folding", Some(t)) if t > p.count => format!("{t} folded"),
        ("folding" | "rigid", Some(t)) => format!("{t} {}", p.team),
        (mode, _) => mode.into(),
    };
    match p.fold_cost {
        Some(c) => format!("{cell} x{c:.1}"),
        None => cell,
    }
}

/// A program's bounds, for the second line of its row: the CPUs it is allowed when not all
/// (`in 0-3`), and `affinity` when the manager's backend is a cpuset one but confines it by
/// affinity. `None` when it has neither (its row is one line).
fn bounds(p: &ProgramStatus, backend: &str) -> Option<(String, String)> {
    let allowed = p.allowed.as_ref().map(|a| format!("in {a}"));
    let by = p.confined_by.as_deref().filter(|by| !backend.starts_with(by)).map(str::to_string);
    (allowed.is_some() || by.is_some()).then(|| (allowed.unwrap_or_default(), by.unwrap_or_default()))
}

fn program_table(v: &View) -> Table<'static> {
    let mut programs = v.status.programs.clone();
    v.sort.order(&mut programs);
    let rows = programs.into_iter().map(|p| {
        let (mut cpus, mut state) = (Text::from(p.cpus.to_string()), Text::from(p.state.clone()));
        let bound = bounds(&p, &v.status.backend);
        if let Some((allowed, by)) = &bound {
            cpus.push_line(allowed.clone());
            state.push_line(by.clone());
        }
        Row::new(vec![
            Cell::from(p.id.to_string()),
            Cell::from(p.name.clone()),
            Cell::from(p.pid.to_string()),
            Cell::from(p.request.to_string()),
            Cell::from(p.count.to_string()),
            Cell::from(cpus),
            Cell::from(state),
            Cell::from(team_cell(&p)),
            Cell::from(format!("{:.1}s", p.cpu_ms as f64 / 1000.0)),
            Cell::from(p.speedup.map_or("-".into(), |s| format!("{s:.2}"))),
        ])
        .height(if bound.is_some() { 2 } else { 1 })
        .style(Style::new().fg(colour(p.id)))
    });
    let widths = [
        Constraint::Length(3),
        Constraint::Min(10),
        Constraint::Length(7),
        Constraint::Length(3),
        Constraint::Length(5),
        Constraint::Length(9),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(5),
    ];
    let header = Row::new(["id", "name", "pid", "req", "alloc", "cpus", "state", "team", "cpu time", "spdup"])
        .style(Style::new().add_modifier(Modifier::BOLD));
    Table::new(rows, widths).header(header).block(Block::bordered().title(format!(" programs, by {} ", v.sort.label())))
}

/// The policy after `spec`'s in the catalog (`os` and the ones needing parameters included; the
/// manager refuses what it cannot build, and the message line says so).
fn next_policy(spec: &str) -> &'static str {
    let names: Vec<&str> = cpumgr_core::policies::CATALOG.iter().map(|i| i.name).collect();
    let name = spec.split(':').next().unwrap_or(spec);
    let at = names.iter().position(|n| *n == name).map_or(0, |i| i + 1);
    names[at % names.len()]
}

/// What a key press leads to.
enum Outcome {
    /// Leave.
    Quit,
    /// The manager was asked to change: fetch its status now.
    Refresh,
    /// Only the view changed.
    Redraw,
}

/// Acts on one key: `q`/Esc quit, `s` sort, `p` next policy, `+`/`-` double or halve the quantum.
fn on_key(v: &mut View, socket: &std::path::Path, code: KeyCode) -> Outcome {
    let (req, what) = match code {
        KeyCode::Char('q') | KeyCode::Esc => return Outcome::Quit,
        KeyCode::Char('s') => {
            v.sort = v.sort.next();
            return Outcome::Redraw;
        }
        KeyCode::Char('p') => {
            let next = next_policy(&v.status.policy);
            (Request::SetPolicy { spec: next.into() }, format!("policy -> {next}"))
        }
        KeyCode::Char(c @ ('+' | '-')) => {
            let ms = if c == '+' { v.status.quantum_ms * 2.0 } else { v.status.quantum_ms / 2.0 };
            (Request::SetQuantum { ms }, format!("quantum -> {ms} ms"))
        }
        _ => return Outcome::Redraw,
    };
    v.message = match call(socket, &req, false) {
        Ok(_) => what,
        Err(e) => format!("{e:#}"),
    };
    Outcome::Refresh
}

/// Asks the manager for its status.
fn fetch(socket: &std::path::Path) -> anyhow::Result<StatusReport> {
    match call(socket, &Request::Status, false)? {
        Reply::Status(s) => Ok(s),
        r => anyhow::bail!("the manager answered {r:?} to status"),
    }
}

/// The text of a buffer, one line per row, without styles. A wide character fills two cells, the
/// second of which the text leaves out, so that a line is as wide as the screen's.
fn plain(buf: &ratatui::buffer::Buffer) -> String {
    use unicode_width::UnicodeWidthStr;
    let area = buf.area;
    let mut out = String::new();
    for y in 0..area.height {
        let mut line = String::new();
        let mut x = 0;
        while x < area.width {
            let symbol = buf[(x, y)].symbol();
            line.push_str(symbol);
            x += symbol.width().max(1) as u16;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Runs the live view until `q` (or prints one frame with `--once`).
pub fn run(args: Args) -> anyhow::Result<()> {
    let socket = socket_path(args.socket.as_deref());
    let interval = duration(&args.interval)
        .map_err(|e| crate::input::InputError::new(format!("--interval {}: {e}", args.interval)))?;
    let status = fetch(&socket)?;
    let topology = cpumgr_daemon::state::host_topology()
        .unwrap_or_else(|_| Topology::flat(status.cpus.iter().max().map_or(1, |m| m + 1)));
    let mut view = View { groups: groups(&topology, &status.cpus), status, sort: Sort::Id, message: String::new() };
    if args.once {
        let mut t = Terminal::new(TestBackend::new(80, 24))?;
        t.draw(|f| draw(f, &view))?;
        print!("{}", plain(t.backend().buffer()));
        return Ok(());
    }
    let mut terminal = ratatui::init();
    let result = (|| -> anyhow::Result<()> {
        let mut polled = Instant::now();
        loop {
            terminal.draw(|f| draw(f, &view))?;
            let mut due = false;
            if event::poll(interval.saturating_sub(polled.elapsed()))? {
                if let Event::Key(k) = event::read()? {
                    if k.kind == KeyEventKind::Press {
                        match on_key(&mut view, &socket, k.code) {
                            Outcome::Quit => return Ok(()),
                            Outcome::Refresh => due = true,
                            Outcome::Redraw => {}
                        }
                    }
                }
            }
            if due || polled.elapsed() >= interval {
                polled = Instant::now();
                match fetch(&socket) {
                    Ok(s) => view.status = s,
                    Err(e) => view.message = format!("{e:#}"),
                }
            }
        }
    })();
    ratatui::restore();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpumgr_core::CpuSet;

    fn program(id: u64, name: &str, cpus: &str, state: &str) -> ProgramStatus {
        let cpus = CpuSet::parse(cpus).unwrap();
        ProgramStatus {
            id,
            pid: 1000 + id as i32,
            name: name.into(),
            request: 4,
            count: cpus.len() as u32,
            cpus,
            state: state.into(),
            threads: Some(4),
            team: String::new(),
            fold_cost: None,
            cpu_ms: 1500 * id,
            speedup: (id == 1).then_some(1.75),
            allowed: None,
            confined_by: None,
        }
    }

    #[test]
    fn a_team_cell_says_how_the_team_runs_and_what_folding_costs_it() {
        let mut p = program(1, "stencil", "0", "running");
        p.threads = Some(2);
        p.team = "folding".into();
        assert_eq!(team_cell(&p), "2 folded");
        p.fold_cost = Some(1.43);
        assert_eq!(team_cell(&p), "2 folded x1.4");
        p.team = "rigid".into();
        p.fold_cost = None;
        assert_eq!(team_cell(&p), "2 rigid");
    }

    fn view() -> View {
        // Two packages of two 2-way SMT cores: CPUs 0-7.
        let topology = cpumgr_core::sources::synthetic::parse("package:2 core:2 pu:2").unwrap();
        let cpus = CpuSet::parse("0-7").unwrap();
        View {
            groups: groups(&topology, &cpus),
            status: StatusReport {
                policy: "equipartition".into(),
                quantum_ms: 100.0,
                backend: "affinity".into(),
                cpus,
                pid: 1,
                steps: 42,
                programs: vec![
                    program(1, "stencil", "0-3", "running"),
                    program(2, "blas", "4-5", "running"),
                    program(3, "idle", "", "stopped"),
                ],
            },
            sort: Sort::Id,
            message: String::new(),
        }
    }

    fn render(v: &View) -> Terminal<TestBackend> {
        let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
        t.draw(|f| draw(f, v)).unwrap();
        t
    }

    #[test]
    fn wide_names_keep_the_frame_80_columns_wide() {
        let mut v = view();
        v.status.programs[0].name = "計算流体力学ソルバー".into();
        v.status.programs[1].name = "🚀🚀🚀 rocket".into();
        let text = plain(render(&v).backend().buffer());
        use unicode_width::UnicodeWidthStr;
        assert!(text.lines().all(|l| l.width() <= 80), "{text}");
        assert!(text.contains("計算"), "{text}");
    }

    #[test]
    fn the_view_fits_80x24_with_cpus_along_the_topology_and_every_program() {
        let v = view();
        let t = render(&v);
        let text = plain(t.backend().buffer());
        assert!(
            text.lines().next().unwrap().contains("policy equipartition · quantum 100 ms · affinity · steps 42"),
            "{text}"
        );
        assert!(text.contains("pkg0 [  0  1][  2  3]"), "{text}");
        assert!(text.contains("pkg1 [  4  5][  6  7]"), "{text}");
        for name in ["stencil", "blas", "idle"] {
            assert!(text.contains(name), "{name} missing:\n{text}");
        }
        assert!(text.contains("1.75"), "stencil's speedup:\n{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 80));
        // Each CPU cell on its owner's colour; free CPUs have none.
        let buf = t.backend().buffer();
        let bg = |cpu: u32| {
            let pkg = if cpu < 4 { "pkg0" } else { "pkg1" };
            let (y, row) = text.lines().enumerate().find(|(_, l)| l.contains(pkg)).unwrap();
            let x = row[..row.find(&format!("{cpu:>3}")).unwrap()].chars().count() + 2;
            buf[(x as u16, y as u16)].bg
        };
        assert_eq!(bg(2), colour(1));
        assert_eq!(bg(5), colour(2));
        assert_eq!(bg(7), Color::Reset);
    }

    #[test]
    fn a_bound_program_shows_its_allowed_cpus_and_how_it_is_confined_below_its_row() {
        let mut v = view();
        v.status.backend = "cpuset-v1".into();
        v.status.programs[0].allowed = Some(CpuSet::parse("0-3").unwrap());
        v.status.programs[0].confined_by = Some("affinity".into());
        v.status.programs[1].confined_by = Some("cpuset".into());
        let text = plain(render(&v).backend().buffer());
        let lines: Vec<&str> = text.lines().collect();
        let row = lines.iter().position(|l| l.contains("stencil")).unwrap();
        let under = lines[row + 1];
        assert!(under.contains("in 0-3") && under.contains("affinity"), "{text}");
        assert!(under.find("in 0-3") == lines[row].find("0-3"), "under its CPU set:\n{text}");
        // A program confined as the backend says, with every CPU allowed, keeps one line.
        let blas = lines.iter().position(|l| l.contains("blas")).unwrap();
        assert!(lines[blas + 1].contains("idle"), "{text}");
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{text}");
        // Under the affinity backend, `affinity` goes without saying; the allowed CPUs still show.
        v.status.backend = "affinity".into();
        let text = plain(render(&v).backend().buffer());
        let lines: Vec<&str> = text.lines().collect();
        let row = lines.iter().position(|l| l.contains("stencil")).unwrap();
        assert!(lines[row + 1].contains("in 0-3") && !lines[row + 1].contains("affinity"), "{text}");
    }

    #[test]
    fn sorting_cycles_and_orders_the_table() {
        let mut v = view();
        v.sort = Sort::CpuTime;
        let text = plain(render(&v).backend().buffer());
        let at = |n: &str| text.find(n).unwrap();
        assert!(at("idle") < at("blas") && at("blas") < at("stencil"), "{text}");
        assert!(text.contains("by cpu time"));
        let mut s = Sort::Id;
        for _ in 0..5 {
            s = s.next();
        }
        assert_eq!(s, Sort::Id);
    }

    #[test]
    fn p_moves_to_the_next_policy_of_the_catalog() {
        let names: Vec<&str> = cpumgr_core::policies::CATALOG.iter().map(|i| i.name).collect();
        assert_eq!(next_policy(&format!("{}:k=1", names[0])), names[1]);
        assert_eq!(next_policy(names[names.len() - 1]), names[0]);
        assert_eq!(next_policy("nonesuch"), names[0]);
    }
}
