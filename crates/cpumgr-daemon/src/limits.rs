//! Several users on one manager: per-user limits checked at registration, and fair share between
//! users (`share = "user"`), applied to every policy's decision before the team guard.
//!
//! A manager run as root serves every user of the machine. Without limits one user could register
//! thousands of programs, or give one a huge weight, and take the machine from the others; with
//! `share = "program"` (the default, the papers' rule) a user running eight programs gets eight
//! shares against another user's one. [`share_between_users`] gives each user with demand an equal
//! share of the CPUs instead (max-min fair: a user who wants less gets what it wants, the rest is
//! split among the others), whatever the number of programs each runs, and leaves the policy's
//! choices inside each user's share alone.

use std::collections::BTreeMap;

use cpumgr_core::policies::equipartition::water_fill;
use cpumgr_core::{Decision, Program};

/// How the CPUs are shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Share {
    /// Between programs, as the policy decides (the papers' rule).
    #[default]
    Program,
    /// Between users first: each user with demand gets an equal share, however many programs it runs.
    User,
}

impl std::str::FromStr for Share {
    type Err = String;
    fn from_str(s: &str) -> Result<Share, String> {
        match s {
            "program" => Ok(Share::Program),
            "user" => Ok(Share::User),
            _ => Err(format!("share {s:?} is neither \"program\" nor \"user\"")),
        }
    }
}

impl std::fmt::Display for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Share::Program => "program",
            Share::User => "user",
        })
    }
}

/// What each user (each uid, root included) may register.
#[derive(Debug, Clone, PartialEq)]
pub struct UserLimits {
    /// Most programs registered at once by one user.
    pub max_programs: usize,
    /// Highest weight a registration may ask for.
    pub max_weight: f64,
    /// Weight of a registration that names none.
    pub default_weight: f64,
}

impl Default for UserLimits {
    fn default() -> Self {
        UserLimits { max_programs: 256, max_weight: 100.0, default_weight: 1.0 }
    }
}

impl UserLimits {
    /// Checks the limits themselves: counts at least 1, weights finite, positive, and the default
    /// within the maximum.
    pub fn check(&self) -> Result<(), String> {
        if self.max_programs == 0 {
            return Err("max_programs_per_user must be at least 1".into());
        }
        for (key, w) in [("max_weight", self.max_weight), ("default_weight", self.default_weight)] {
            if !(w.is_finite() && w > 0.0) {
                return Err(format!("{key} {w} is not a positive number"));
            }
        }
        if self.default_weight > self.max_weight {
            return Err(format!("default_weight {} is above max_weight {}", self.default_weight, self.max_weight));
        }
        Ok(())
    }

    /// The weight a registration gets: its own when it is a positive number within the limit, the
    /// default when it names none; anything else is refused with the reason.
    pub fn weight(&self, asked: Option<f64>) -> Result<f64, String> {
        match asked {
            None => Ok(self.default_weight),
            Some(w) if !(w.is_finite() && w > 0.0) => Err(format!("weight {w} is not a positive number")),
            Some(w) if w > self.max_weight => {
                Err(format!("weight {w} is above the limit of {} per program", self.max_weight))
            }
            Some(w) => Ok(w),
        }
    }

    /// Refuses one more program for `uid` when it already has `registered`.
    pub fn admit(&self, uid: u32, registered: usize) -> Result<(), String> {
        if registered >= self.max_programs {
            return Err(format!("user {uid} already has its limit of {} programs", self.max_programs));
        }
        Ok(())
    }
}

/// A program name safe to show: control characters (terminal escapes a hostile program could
/// send to an administrator's `cpumgr top`) and bidirectional controls become `?`, and at most
/// 64 characters are kept.
pub fn clean_name(name: &str) -> String {
    // Bidirectional controls are formatting, not control, characters, but they reorder what
    // follows them on a terminal (a name that reads backwards, a row that shows another's text).
    let unsafe_char = |c: char| {
        c.is_control() || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    };
    name.chars().take(64).map(|c| if unsafe_char(c) { '?' } else { c }).collect()
}

/// Rewrites `decision` (parallel to `programs`, whose owners are `uids`) so that no user holds
/// more than its fair share of `cpus` while another user wants more than it holds: each user's
/// share is the max-min fair split of the CPUs by what its programs want; a user above it
/// loses CPUs (its widest program first, the lightest and newest on ties; a rigid program or one
/// that would fall below its minimum stops running whole); the CPUs taken go to users below their
/// share (the program holding least first, the heaviest and oldest on ties; a program that
/// did not run starts at its minimum, a rigid one whole). CPUs the policy left idle stay idle: the
/// pass only moves CPUs between users, it does not second-guess the policy within a user's share.
pub fn share_between_users(cpus: u32, programs: &[Program], uids: &[u32], decision: &mut Decision) {
    let mut users: BTreeMap<u32, User> = BTreeMap::new();
    for (i, (p, &uid)) in programs.iter().zip(uids).enumerate() {
        let u = users.entry(uid).or_default();
        u.demand = u.demand.saturating_add(p.wants()).min(cpus);
        let a = &decision.allocations[i];
        if a.running {
            u.used += a.count;
        }
        u.programs.push(i);
    }
    let demands: Vec<u32> = users.values().map(|u| u.demand).collect();
    for (u, share) in users.values_mut().zip(water_fill(cpus, &demands)) {
        u.share = share;
    }
    let mut freed = 0;
    for u in users.values_mut() {
        while u.used > u.share {
            let Some(i) = u.programs.iter().copied().filter(|&i| running(decision, i)).max_by(|&a, &b| {
                let (x, y) = (&decision.allocations[a], &decision.allocations[b]);
                x.count.cmp(&y.count).then(programs[b].weight.total_cmp(&programs[a].weight)).then(a.cmp(&b))
            }) else {
                break;
            };
            let p = &programs[i];
            let a = &mut decision.allocations[i];
            let floor = p.request.min.max(1);
            let take = if p.kind.rigid_procs().is_some() || a.count <= floor { a.count } else { 1 };
            a.count -= take;
            a.running = a.count > 0;
            a.block = 1;
            u.used -= take;
            freed += take;
        }
    }
    while freed > 0 {
        // The user furthest below its share that can still take a CPU, then its program.
        let mut best: Option<(u32, usize, u32)> = None;
        for u in users.values() {
            let room = u.share.saturating_sub(u.used).min(freed);
            if room == 0 || best.is_some_and(|(r, ..)| r >= u.share - u.used) {
                continue;
            }
            let grow = u
                .programs
                .iter()
                .copied()
                .filter_map(|i| step(&programs[i], &decision.allocations[i], room).map(|s| (i, s)))
                .min_by(|&(a, _), &(b, _)| {
                    let (x, y) = (decision.allocations[a].granted(), decision.allocations[b].granted());
                    x.cmp(&y).then(programs[b].weight.total_cmp(&programs[a].weight)).then(a.cmp(&b))
                });
            if let Some((i, s)) = grow {
                best = Some((u.share - u.used, i, s));
            }
        }
        let Some((_, i, s)) = best else { break };
        let h = decision.allocations[i].granted();
        let a = &mut decision.allocations[i];
        a.count = h + s;
        a.running = true;
        a.block = 1;
        freed -= s;
        let uid = uids[i];
        if let Some(u) = users.get_mut(&uid) {
            u.used += s;
        }
    }
}

/// One user's programs and CPUs in [`share_between_users`].
#[derive(Default)]
struct User {
    demand: u32,
    share: u32,
    used: u32,
    programs: Vec<usize>,
}

fn running(d: &Decision, i: usize) -> bool {
    d.allocations[i].running && d.allocations[i].count > 0
}

/// How many CPUs program `p` takes next when it grows with at most `room` free: one more when it
/// runs, its minimum to start, a rigid program all of them; `None` when it wants no more or that
/// does not fit.
fn step(p: &Program, a: &cpumgr_core::Allocation, room: u32) -> Option<u32> {
    let held = a.granted();
    let want = p.wants();
    if held >= want {
        return None;
    }
    let s = match (p.kind.rigid_procs(), held) {
        (Some(n), 0) => n,
        (Some(_), _) => return None,
        (None, 0) => p.request.min.max(1).min(want),
        (None, _) => 1,
    };
    (s <= room).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpumgr_core::{Kind, Request};

    fn program(i: u64, wanted: u32) -> Program {
        Program::new(i, format!("p{i}"), wanted)
    }

    fn decide(cpus: u32, programs: &[Program], uids: &[u32], counts: &[u32]) -> Vec<u32> {
        let mut d = Decision::default();
        d.reset(programs.len());
        for (i, &c) in counts.iter().enumerate() {
            d.give(i, c);
        }
        share_between_users(cpus, programs, uids, &mut d);
        d.allocations.iter().map(|a| a.granted()).collect()
    }

    #[test]
    fn a_user_with_one_program_gets_half_against_a_user_with_three() {
        // Equipartition's paper rule on 2 CPUs: the first two programs (both user 1's) run.
        let ps: Vec<Program> = (1..=4).map(|i| program(i, 2)).collect();
        assert_eq!(decide(2, &ps, &[1, 1, 1, 2], &[1, 1, 0, 0]), vec![1, 0, 0, 1]);
        // On 8 CPUs, 2 each: user 1 holds 6 of its 4 and gives 2 to user 2's program.
        let ps: Vec<Program> = (1..=4).map(|i| program(i, 8)).collect();
        assert_eq!(decide(8, &ps, &[1, 1, 1, 2], &[2, 2, 2, 2]), vec![2, 1, 1, 4]);
    }

    #[test]
    fn a_user_who_wants_less_than_its_share_leaves_the_rest_to_the_others() {
        let ps = vec![program(1, 8), program(2, 8), program(3, 1)];
        // User 2 wants 1: user 1's share is 7 and keeps what the policy gave it.
        assert_eq!(decide(8, &ps, &[1, 1, 2], &[4, 3, 1]), vec![4, 3, 1]);
    }

    #[test]
    fn one_user_alone_or_users_within_their_share_are_left_as_decided() {
        let ps: Vec<Program> = (1..=3).map(|i| program(i, 4)).collect();
        assert_eq!(decide(4, &ps, &[7, 7, 7], &[2, 1, 1]), vec![2, 1, 1]);
        // The policy left CPUs idle: the pass does not hand them out.
        assert_eq!(decide(8, &ps, &[1, 2, 2], &[2, 1, 1]), vec![2, 1, 1]);
    }

    #[test]
    fn rigid_programs_stop_whole_and_start_whole() {
        let mut ps = vec![program(1, 2), program(2, 2), program(3, 2)];
        ps[0].kind = Kind::Rigid(2);
        ps[0].request = Request { wanted: 2, min: 2, max: 2 };
        ps[2].kind = Kind::Rigid(2);
        ps[2].request = Request { wanted: 2, min: 2, max: 2 };
        // 4 CPUs, user 1 holds all of them with its rigid 2 and a malleable 2; user 2's rigid 2
        // waits. Entitlements 2/2: user 1's malleable program is cut (its widest, newest on ties)...
        let got = decide(4, &ps, &[1, 1, 2], &[2, 2, 0]);
        assert_eq!(got.iter().sum::<u32>(), 4, "{got:?}");
        assert_eq!(got[2], 2, "the rigid program of user 2 runs whole: {got:?}");
        assert!(got[..2].iter().all(|&c| c == 0 || c == 2), "{got:?}");
    }

    #[test]
    fn lighter_programs_of_a_user_are_cut_first() {
        let mut ps: Vec<Program> = (1..=3).map(|i| program(i, 2)).collect();
        ps[0].weight = 0.5;
        assert_eq!(decide(2, &ps, &[1, 1, 2], &[1, 1, 0]), vec![0, 1, 1]);
    }

    #[test]
    fn limits_refuse_what_is_over_them() {
        let l = UserLimits { max_programs: 2, max_weight: 4.0, default_weight: 1.0 };
        assert!(l.check().is_ok());
        assert_eq!(l.weight(None), Ok(1.0));
        assert_eq!(l.weight(Some(4.0)), Ok(4.0));
        assert!(l.weight(Some(4.5)).unwrap_err().contains("above the limit of 4"));
        assert!(l.weight(Some(f64::NAN)).is_err());
        assert!(l.weight(Some(-1.0)).is_err());
        assert!(l.admit(1000, 1).is_ok());
        assert_eq!(l.admit(1000, 2).unwrap_err(), "user 1000 already has its limit of 2 programs");
        assert!(UserLimits { default_weight: 5.0, ..l.clone() }.check().is_err());
        assert!(UserLimits { max_programs: 0, ..l }.check().is_err());
    }

    #[test]
    fn names_lose_their_control_characters() {
        assert_eq!(clean_name("a\x1b[2Jb\n"), "a?[2Jb?");
        assert_eq!(clean_name("evil\u{202E}txt.exe\u{2066}"), "evil?txt.exe?", "bidirectional controls");
        assert_eq!(clean_name(&"x".repeat(100)).len(), 64);
        assert_eq!("user".parse::<Share>(), Ok(Share::User));
        assert!("users".parse::<Share>().is_err());
    }
}
