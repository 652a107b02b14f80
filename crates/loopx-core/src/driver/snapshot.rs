//! The rules of the workspace's git snapshots: one commit of the project's
//! tree before and one after each turn, on loopx's own refs, and what may
//! be done with them.
//!
//! Owns: when snapshots are on ([`decide`]), the ref names ([`ref_name`]),
//! what is never snapshotted ([`exclusions`]), what a turn's snapshot
//! records ([`TurnSnapshot`], [`DiffStat`] read from git's summary), the
//! workspace loopx last left ([`WorkspaceMark`]), which snapshot a rollback
//! restores and when it is refused ([`rollback_target`],
//! [`check_rollback`]), and whether a workspace changed underneath the
//! driver ([`compare`]).
//!
//! Not here: running git (`loopx_app::snapshot`), the journal events that
//! record snapshots (`super::DriverRequest`).

use serde::{Deserialize, Serialize};

/// `drive --git-snapshot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Setting {
    /// On where the project root is a git work tree with a commit.
    #[default]
    Auto,
    On,
    Off,
}

/// What the project root is, as far as snapshots care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repository {
    /// Not inside a git work tree (or git is not installed).
    NotGit,
    /// A git work tree whose HEAD names no commit yet.
    NoCommits,
    /// Inside a work tree that ignores it (a project under another
    /// repository's ignored `target/`): there is nothing git would add.
    Ignored,
    /// A work tree with a commit to hang snapshots on.
    Ready,
}

/// Whether a run snapshots, and the one line to say when it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub on: bool,
    pub note: Option<String>,
}

/// `--git-snapshot on` where it cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--git-snapshot on needs {needs}; {fix}")]
pub struct CannotSnapshot {
    pub needs: &'static str,
    pub fix: &'static str,
}

/// Whether a run with `setting` snapshots a project that is `repository`.
/// Asked for explicitly and impossible: an error; by default: off, said once.
pub fn decide(setting: Setting, repository: Repository) -> Result<Decision, CannotSnapshot> {
    let why = match repository {
        Repository::Ready => None,
        Repository::NotGit => Some((
            "the project root to be a git work tree",
            "run `git init` and commit once, or drive with --git-snapshot off",
            "git snapshots off: the project root is not a git work tree",
        )),
        Repository::Ignored => Some((
            "a project root its git repository does not ignore",
            "drive a root the repository tracks (or `git init` one of its own), or drive with --git-snapshot off",
            "git snapshots off: the project root is ignored by the git repository around it",
        )),
        Repository::NoCommits => Some((
            "a repository with at least one commit",
            "commit once (`git commit --allow-empty -m start`), or drive with --git-snapshot off",
            "git snapshots off: the repository has no commit yet (commit once to have one per turn)",
        )),
    };
    match (setting, why) {
        (Setting::Off, _) => Ok(Decision {
            on: false,
            note: None,
        }),
        (_, None) => Ok(Decision {
            on: true,
            note: None,
        }),
        (Setting::On, Some((needs, fix, _))) => Err(CannotSnapshot { needs, fix }),
        (Setting::Auto, Some((_, _, note))) => Ok(Decision {
            on: false,
            note: Some(note.to_owned()),
        }),
    }
}

/// Which side of a turn a snapshot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Before,
    After,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Before => "before",
            Side::After => "after",
        }
    }
}

/// Where every snapshot of loop `run_id` lives.
pub fn refs_prefix(run_id: &str) -> String {
    format!("refs/loopx/{run_id}/turns/")
}

/// `refs/loopx/<run>/turns/<n>/before|after`.
pub fn ref_name(run_id: &str, turn: u64, side: Side) -> String {
    format!("{}{turn}/{}", refs_prefix(run_id), side.name())
}

/// The pathspecs that keep loopx's own files out of every snapshot: the
/// loop directory (the ledger, `driver_logs/`, views, tokens) and a store
/// file kept elsewhere, each given relative to the repository's top
/// (`None`: it lies outside the repository). A rollback restores only what
/// a snapshot holds, so it can never rewind them.
pub fn exclusions(own_paths: &[Option<&str>]) -> Vec<String> {
    own_paths
        .iter()
        .flatten()
        .filter(|path| !path.is_empty() && **path != ".")
        .map(|path| format!(":(top,literal,exclude){path}"))
        .collect()
}

/// What changed between two trees, as git's `--shortstat` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DiffStat {
    pub files: u64,
    pub insertions: u64,
    pub deletions: u64,
}

impl DiffStat {
    /// Read git's one-line summary (`3 files changed, 10 insertions(+),
    /// 2 deletions(-)`); an empty line is no change.
    pub fn parse(shortstat: &str) -> DiffStat {
        let mut stat = DiffStat::default();
        for part in shortstat.trim().split(',') {
            let mut words = part.split_whitespace();
            let Some(n) = words.next().and_then(|w| w.parse::<u64>().ok()) else {
                continue;
            };
            match words.next().unwrap_or_default() {
                w if w.starts_with("file") => stat.files = n,
                w if w.starts_with("insertion") => stat.insertions = n,
                w if w.starts_with("deletion") => stat.deletions = n,
                _ => {}
            }
        }
        stat
    }

    /// `2 files, +10 -3`.
    pub fn words(&self) -> String {
        format!(
            "{}, +{} -{}",
            crate::words::count(self.files, "file"),
            self.insertions,
            self.deletions
        )
    }
}

/// Both sides of one turn's workspace, as the journal records them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnSnapshot {
    /// The turn's number among the loop's dispatches (1 = the first).
    pub turn: u64,
    pub dispatch_id: String,
    /// The ledger iteration the turn was expected to record.
    pub iteration: u64,
    /// The commits on the turn's `before` and `after` refs.
    pub before: String,
    pub after: String,
    pub before_tree: String,
    pub after_tree: String,
    /// The user's HEAD when the turn ended (the after commit's parent).
    pub head: Option<String>,
    pub stat: DiffStat,
}

impl TurnSnapshot {
    /// The workspace this turn left.
    pub fn left(&self) -> WorkspaceMark {
        WorkspaceMark {
            turn: self.turn,
            tree: self.after_tree.clone(),
            head: self.head.clone(),
            by: MarkedBy::Turn,
        }
    }
}

/// What last set the workspace loopx vouches for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkedBy {
    /// A turn ended there (its after snapshot).
    Turn,
    /// `loopx rollback` restored it.
    Rollback,
    /// The operator accepted it as found (`drive --accept-workspace`).
    Accepted,
}

/// The workspace as loopx last left it: the tree and HEAD a rollback's
/// refusal and a restart's comparison check the workspace against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceMark {
    /// The turn whose snapshot it is (0: before the first).
    pub turn: u64,
    pub tree: String,
    pub head: Option<String>,
    pub by: MarkedBy,
}

/// A rollback as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollback {
    /// `--to N`: the state after turn N (0: before the first snapshotted turn).
    pub to: u64,
    /// The snapshot commit restored, and its tree.
    pub commit: String,
    pub tree: String,
    /// A commit of the workspace as it was before, on a ref of its own
    /// (`refs/loopx/<run>/rollbacks/<ms>`): nothing a rollback overwrites
    /// is lost.
    pub saved: String,
    /// Paths written or removed.
    pub paths: u64,
    /// Whether changes loopx did not make were overridden (`--force`).
    pub forced: bool,
    /// Why, in words (`loopx rollback`, a rejected candidate).
    pub reason: String,
}

impl Rollback {
    pub fn left(&self, head: Option<String>) -> WorkspaceMark {
        WorkspaceMark {
            turn: self.to,
            tree: self.tree.clone(),
            head,
            by: MarkedBy::Rollback,
        }
    }
}

/// The snapshot commit and tree a rollback `--to` restores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub commit: String,
    pub tree: String,
}

/// Why a rollback does not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RollbackRefused {
    #[error("no snapshot of turn {to}: the snapshotted turns are {known} (`loopx snapshot list`)")]
    NoSuchTurn { to: u64, known: String },
    #[error("no turn of this loop was snapshotted: nothing to roll back to")]
    NoSnapshots,
    #[error("the workspace has changes loopx did not make ({changes}, against the snapshot of turn {turn}): commit or stash them first, or pass --force to overwrite them (a commit of them is kept on a loopx ref and named in the journal)")]
    ForeignChanges { turn: u64, changes: String },
}

/// The snapshot `--to` names among the journal's `snapshots` (oldest
/// first): the after side of turn `to`, or with 0 the before side of the
/// first snapshotted turn.
pub fn rollback_target(snapshots: &[TurnSnapshot], to: u64) -> Result<Target, RollbackRefused> {
    let first = snapshots.first().ok_or(RollbackRefused::NoSnapshots)?;
    if to == 0 {
        return Ok(Target {
            commit: first.before.clone(),
            tree: first.before_tree.clone(),
        });
    }
    snapshots
        .iter()
        .rev()
        .find(|s| s.turn == to)
        .map(|s| Target {
            commit: s.after.clone(),
            tree: s.after_tree.clone(),
        })
        .ok_or_else(|| RollbackRefused::NoSuchTurn {
            to,
            known: known_turns(snapshots),
        })
}

/// `0 (before the first), 1-4, 6`, for an error to name what exists.
fn known_turns(snapshots: &[TurnSnapshot]) -> String {
    let mut turns: Vec<u64> = snapshots.iter().map(|s| s.turn).collect();
    turns.dedup();
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for turn in turns {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == turn => *end = turn,
            _ => ranges.push((turn, turn)),
        }
    }
    let spans: Vec<String> = ranges
        .iter()
        .map(|(a, b)| match a == b {
            true => a.to_string(),
            false => format!("{a}-{b}"),
        })
        .collect();
    format!("0 (before the first), {}", spans.join(", "))
}

/// A rollback may overwrite the workspace only while it is what loopx
/// last left (`mark`), or with `force`. `tree_now` is the workspace's tree
/// now; `changes` says in words how it differs.
pub fn check_rollback(
    mark: Option<&WorkspaceMark>,
    tree_now: &str,
    changes: impl FnOnce(&str) -> String,
    force: bool,
) -> Result<(), RollbackRefused> {
    match mark {
        Some(mark) if mark.tree != tree_now && !force => Err(RollbackRefused::ForeignChanges {
            turn: mark.turn,
            changes: changes(&mark.tree),
        }),
        _ => Ok(()),
    }
}

/// Whether the driver undoes the workspace changes of the turn that
/// staged a candidate its review decided as `outcome`: a rejected one's
/// are undone (its `after` ref keeps them); an accepted one's stand, and a
/// quarantined one never reaches review, its workspace kept as evidence.
pub fn undoes_turn(outcome: crate::focus::candidate::Outcome) -> bool {
    outcome == crate::focus::candidate::Outcome::Rejected
}

/// The workspace at a restart against the one loopx last left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// No snapshot yet: nothing to compare with.
    Unknown,
    Unchanged,
    /// Changed underneath: its files, its HEAD, or both.
    Changed {
        files: bool,
        head: bool,
    },
}

/// Compare the workspace now (`tree`, `head`) with `mark`.
pub fn compare(mark: Option<&WorkspaceMark>, tree: &str, head: Option<&str>) -> Verdict {
    let Some(mark) = mark else {
        return Verdict::Unknown;
    };
    let files = mark.tree != tree;
    let head = mark.head.as_deref() != head;
    match files || head {
        false => Verdict::Unchanged,
        true => Verdict::Changed { files, head },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(turn: u64) -> TurnSnapshot {
        TurnSnapshot {
            turn,
            dispatch_id: format!("d{turn}"),
            iteration: turn,
            before: format!("b{turn}"),
            after: format!("a{turn}"),
            before_tree: format!("bt{turn}"),
            after_tree: format!("at{turn}"),
            head: Some("h".into()),
            stat: DiffStat::default(),
        }
    }

    #[test]
    fn snapshots_default_on_in_a_repository_with_a_commit_and_off_with_a_note_elsewhere() {
        assert!(decide(Setting::Auto, Repository::Ready).unwrap().on);
        for repository in [
            Repository::NotGit,
            Repository::NoCommits,
            Repository::Ignored,
        ] {
            let auto = decide(Setting::Auto, repository).unwrap();
            assert!(!auto.on && auto.note.unwrap().starts_with("git snapshots off"));
            let error = decide(Setting::On, repository).unwrap_err().to_string();
            assert!(error.contains("--git-snapshot off"), "{error}");
            assert_eq!(
                decide(Setting::Off, repository).unwrap(),
                Decision {
                    on: false,
                    note: None
                }
            );
        }
        assert!(!decide(Setting::Off, Repository::Ready).unwrap().on);
    }

    #[test]
    fn refs_name_the_run_the_turn_and_the_side() {
        assert_eq!(
            ref_name("run-abc", 3, Side::After),
            "refs/loopx/run-abc/turns/3/after"
        );
        assert!(ref_name("run-abc", 3, Side::Before).starts_with(&refs_prefix("run-abc")));
    }

    #[test]
    fn loopx_own_paths_are_excluded_literally_and_outside_paths_not_at_all() {
        assert_eq!(
            exclusions(&[Some(".loopx"), None, Some("a*b/x.sqlite"), Some("")]),
            vec![
                ":(top,literal,exclude).loopx".to_owned(),
                ":(top,literal,exclude)a*b/x.sqlite".to_owned()
            ]
        );
    }

    #[test]
    fn git_shortstat_is_read_whatever_parts_it_has() {
        assert_eq!(
            DiffStat::parse(" 3 files changed, 10 insertions(+), 2 deletions(-)\n"),
            DiffStat {
                files: 3,
                insertions: 10,
                deletions: 2
            }
        );
        assert_eq!(
            DiffStat::parse(" 1 file changed, 1 deletion(-)"),
            DiffStat {
                files: 1,
                insertions: 0,
                deletions: 1
            }
        );
        assert_eq!(DiffStat::parse(""), DiffStat::default());
        assert_eq!(DiffStat::parse("garbage, more"), DiffStat::default());
    }

    #[test]
    fn rollback_targets_the_after_side_or_before_the_first_and_names_what_exists() {
        let snapshots = vec![snapshot(1), snapshot(2), snapshot(3), snapshot(5)];
        assert_eq!(rollback_target(&snapshots, 2).unwrap().commit, "a2");
        assert_eq!(rollback_target(&snapshots, 0).unwrap().tree, "bt1");
        let error = rollback_target(&snapshots, 99).unwrap_err().to_string();
        assert!(
            error.contains("turn 99") && error.contains("1-3, 5"),
            "{error}"
        );
        assert_eq!(rollback_target(&[], 0), Err(RollbackRefused::NoSnapshots));
    }

    #[test]
    fn rollback_refuses_changes_loopx_did_not_make_unless_forced() {
        let mark = snapshot(2).left();
        assert!(check_rollback(Some(&mark), "at2", |_| unreachable!(), false).is_ok());
        let refused = check_rollback(Some(&mark), "other", |_| "1 file".into(), false);
        assert!(matches!(
            refused,
            Err(RollbackRefused::ForeignChanges { turn: 2, .. })
        ));
        assert!(check_rollback(Some(&mark), "other", |_| "1 file".into(), true).is_ok());
        assert!(check_rollback(None, "other", |_| unreachable!(), false).is_ok());
    }

    #[test]
    fn a_restart_compares_files_and_head_with_what_loopx_left() {
        let mark = snapshot(2).left();
        assert_eq!(compare(None, "x", None), Verdict::Unknown);
        assert_eq!(compare(Some(&mark), "at2", Some("h")), Verdict::Unchanged);
        assert_eq!(
            compare(Some(&mark), "other", Some("h")),
            Verdict::Changed {
                files: true,
                head: false
            }
        );
        assert_eq!(
            compare(Some(&mark), "at2", Some("h2")),
            Verdict::Changed {
                files: false,
                head: true
            }
        );
    }
}
