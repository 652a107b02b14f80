//! Interactive forcing: the armed-loop registry entry and the Stop-hook
//! verdict.
//!
//! `hook-check` is called by an agent CLI (Claude Code's `hooks.Stop`) when
//! a session wants to end its turn. It blocks (exit 2) only when an armed
//! loop covering the session's project root is unfinished; every doubt
//! (disabled, inside the driver, re-entered, no loop, unreadable state)
//! resolves to letting the session stop.

use crate::ledger::arbiter::Verdict;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// One armed loop in the user's registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmedLoop {
    pub schema_version: String,
    pub run_id: String,
    /// Absolute, resolved loop directory.
    pub loop_dir: String,
    /// Absolute, resolved project root whose sessions this loop forces.
    pub project_root: String,
    pub armed_at: Timestamp,
}

pub const ARMED_SCHEMA_VERSION: &str = "1.0";

/// Whether a loop armed for `project_root` covers a session in `session_root`:
/// the same directory, or one below it.
pub fn covers(project_root: &str, session_root: &str) -> bool {
    let root = project_root.trim_end_matches('/');
    if root.is_empty() {
        // An entry armed for "/" covers everything; refuse that reading of
        // an empty string, which is more likely a damaged entry.
        return project_root == "/";
    }
    session_root == root
        || session_root
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// What the environment and the hook payload say before any loop is read.
#[derive(Debug, Clone, Copy, Default)]
pub struct HookSignals {
    /// `AUTOLOOP_DISABLE` is set to something.
    pub disabled: bool,
    /// `AUTOLOOP_DRIVER` is set: the driver owns the stop decision.
    pub inside_driver: bool,
    /// The payload's `stop_hook_active`: this stop already follows a block.
    pub reentrant: bool,
}

/// What became of the loop the hook matched.
#[derive(Debug, Clone)]
pub enum LoopReading {
    /// No armed loop covers this root.
    NoneArmed,
    /// Its loop directory or database is gone.
    Missing,
    /// It could not be read; fail open.
    Unreadable(String),
    /// The stop verdict, and how many iterations the ledger holds.
    Read(Verdict, u64),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookVerdict {
    pub block: bool,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl HookVerdict {
    fn allow(reason: impl Into<String>) -> Self {
        HookVerdict {
            block: false,
            reason: reason.into(),
            message: None,
        }
    }
}

/// The stand-down reason that needs no registry read, if any.
pub fn early_stand_down(signals: HookSignals) -> Option<HookVerdict> {
    if signals.disabled {
        Some(HookVerdict::allow("disabled_env"))
    } else if signals.inside_driver {
        Some(HookVerdict::allow("driver_active"))
    } else if signals.reentrant {
        Some(HookVerdict::allow("stop_hook_active"))
    } else {
        None
    }
}

/// The verdict once the matching loop (if any) has been read.
pub fn verdict(entry: Option<&ArmedLoop>, reading: LoopReading) -> HookVerdict {
    let Some(entry) = entry else {
        return HookVerdict::allow("no_active_loop");
    };
    match reading {
        LoopReading::NoneArmed => HookVerdict::allow("no_active_loop"),
        LoopReading::Missing => HookVerdict::allow("loop_dir_missing"),
        LoopReading::Unreadable(error) => HookVerdict::allow(format!("error_fail_open:{error}")),
        LoopReading::Read(done, _) if done.paused => HookVerdict::allow("paused"),
        LoopReading::Read(done, _) if done.done => HookVerdict::allow(done.reason.unwrap_or("done")),
        LoopReading::Read(..) => HookVerdict {
            block: true,
            reason: "active_not_done".into(),
            message: Some(format!(
                "Autoloop is active and not finished: do the next iteration now (read {dir}/recovery.md, do the one recorded next action, verify it, record it with `loopx append-iteration --dir {dir}`). Do NOT stop, pause, or ask to continue. Kill switch: set AUTOLOOP_DISABLE=1, run `loopx disarm --dir {dir}` (run {run}), or `touch {dir}/STOP_REQUESTED`.",
                dir = entry.loop_dir,
                run = entry.run_id
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_covers_itself_and_its_subdirectories_only() {
        assert!(covers("/p/proj", "/p/proj"));
        assert!(covers("/p/proj/", "/p/proj/src"));
        assert!(!covers("/p/proj", "/p/project-b"));
        assert!(!covers("/p/proj", "/p"));
        assert!(!covers("", "/p"));
    }

    #[test]
    fn stand_down_order_is_disable_driver_reentry() {
        let all = HookSignals {
            disabled: true,
            inside_driver: true,
            reentrant: true,
        };
        assert_eq!(early_stand_down(all).unwrap().reason, "disabled_env");
        let driver = HookSignals {
            inside_driver: true,
            reentrant: true,
            ..Default::default()
        };
        assert_eq!(early_stand_down(driver).unwrap().reason, "driver_active");
        assert!(early_stand_down(HookSignals::default()).is_none());
    }

    #[test]
    fn only_an_unfinished_unpaused_loop_blocks() {
        let entry = ArmedLoop {
            schema_version: ARMED_SCHEMA_VERSION.into(),
            run_id: "run-1".into(),
            loop_dir: "/p/.loopx".into(),
            project_root: "/p".into(),
            armed_at: Timestamp::UNIX_EPOCH,
        };
        let open = Verdict {
            done: false,
            paused: false,
            reason: None,
            conditions: vec![],
        };
        assert!(verdict(Some(&entry), LoopReading::Read(open.clone(), 0)).block);
        let paused = Verdict {
            paused: true,
            ..open.clone()
        };
        assert_eq!(
            verdict(Some(&entry), LoopReading::Read(paused, 0)).reason,
            "paused"
        );
        let done = Verdict {
            done: true,
            reason: Some("loops_reached"),
            ..open
        };
        assert_eq!(
            verdict(Some(&entry), LoopReading::Read(done, 0)).reason,
            "loops_reached"
        );
        assert!(!verdict(Some(&entry), LoopReading::Unreadable("x".into())).block);
        assert!(!verdict(None, LoopReading::NoneArmed).block);
    }
}

/// How many times in a row the hook blocks a stop without the ledger
/// moving before it lets the session go: forcing must never become a trap.
pub const MAX_CONSECUTIVE_BLOCKS: u32 = 5;

/// The hook's memory of its recent blocks for one loop.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BlockStreak {
    /// The ledger's iteration count when the streak began.
    pub iterations: u64,
    pub blocks: u32,
}

/// Whether another block is allowed, and the streak to remember. Progress
/// (a new iteration) starts a fresh streak.
pub fn next_block(previous: Option<&BlockStreak>, iterations_now: u64) -> (bool, BlockStreak) {
    let blocks = match previous {
        Some(streak) if streak.iterations == iterations_now => streak.blocks,
        _ => 0,
    };
    if blocks >= MAX_CONSECUTIVE_BLOCKS {
        (
            false,
            BlockStreak {
                iterations: iterations_now,
                blocks,
            },
        )
    } else {
        (
            true,
            BlockStreak {
                iterations: iterations_now,
                blocks: blocks + 1,
            },
        )
    }
}

/// Apply the streak bound to a verdict: a block stands only while the
/// streak without a new iteration is short. Returns the verdict and, when a
/// block was weighed, the streak to remember.
pub fn bounded(
    verdict: HookVerdict,
    previous: Option<&BlockStreak>,
    iterations: u64,
) -> (HookVerdict, Option<BlockStreak>) {
    if !verdict.block {
        return (verdict, None);
    }
    let (allowed, streak) = next_block(previous, iterations);
    if allowed {
        return (verdict, Some(streak));
    }
    let message = format!(
        "standing down after {} blocked stops without a new iteration; the loop stays armed (`loopx disarm` to end it)",
        streak.blocks
    );
    (
        HookVerdict {
            block: false,
            reason: "block_limit_reached".into(),
            message: Some(message),
        },
        Some(streak),
    )
}

#[cfg(test)]
mod streak_tests {
    use super::*;

    #[test]
    fn blocks_stop_after_a_streak_without_progress_and_progress_resets_it() {
        let mut streak = None;
        for _ in 0..MAX_CONSECUTIVE_BLOCKS {
            let (allowed, next) = next_block(streak.as_ref(), 3);
            assert!(allowed);
            streak = Some(next);
        }
        assert!(
            !next_block(streak.as_ref(), 3).0,
            "the sixth block without progress is refused"
        );
        assert!(
            next_block(streak.as_ref(), 4).0,
            "a new iteration starts a fresh streak"
        );
    }
}
