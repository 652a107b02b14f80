//! Interactive forcing: the armed-loop registry entry and the Stop-hook
//! verdict.
//!
//! `hook-check` is called by an agent CLI (Claude Code's `hooks.Stop`) when
//! a session wants to end its turn. It blocks (exit 2) only when an armed
//! loop covering the session's project root is unfinished; every doubt
//! (disabled, inside the driver, re-entered, a payload that is not one JSON
//! object, no loop, unreadable state) resolves to letting the session stop.
//!
//! It also owns reading the payload (`parse_payload`, `truthy`) so that the
//! rule "what counts as re-entry" lives in one place.

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
    /// `arm --pid`: the process whose life the arming follows (0 = none).
    /// Once it has exited the entry no longer forces anything.
    #[serde(default)]
    pub pid: u32,
    /// `arm --driver`: a headless driver owns the loop; while its `pid`
    /// lives, interactive sessions are not forced.
    #[serde(default)]
    pub driver: bool,
    /// `arm --notify`, as given (`auto`, `on`, `off` or a channel name);
    /// absent when the flag was not passed. Stored for notify; read by
    /// nothing yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_channel: Option<String>,
}

/// Whether an entry still forces sessions, given whether its `pid` lives:
/// an entry tied to a process that has exited is dead (the reference
/// garbage-collects it; here it is skipped until disarmed).
pub fn entry_live(entry: &ArmedLoop, pid_alive: bool) -> bool {
    entry.pid == 0 || pid_alive
}

/// The hook's stand-down for a loop a live headless driver owns: the
/// driver decides when its turns stop, a hooked session must not race it.
pub fn driver_stand_down(entry: &ArmedLoop, pid_alive: bool) -> Option<HookVerdict> {
    (entry.driver && entry.pid != 0 && pid_alive)
        .then(|| HookVerdict::allow("headless_driver_active"))
}

/// Truthiness of a JSON value as the reference runtime reads
/// `stop_hook_active`: `null`, `false`, `0`, `""`, `[]` and `{}` are false;
/// everything else is true.
pub fn truthy(value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Why a hook payload was not one well-formed JSON object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadError {
    Empty,
    NotUtf8,
    NotJson,
    NotAnObject,
}

impl PayloadError {
    pub fn code(self) -> &'static str {
        match self {
            PayloadError::Empty => "invalid_payload:empty",
            PayloadError::NotUtf8 => "invalid_payload:not_utf8",
            PayloadError::NotJson => "invalid_payload:not_json",
            PayloadError::NotAnObject => "invalid_payload:not_an_object",
        }
    }
}

/// The Stop-hook payload: exactly one JSON object in UTF-8, surrounded by
/// nothing but whitespace. Anything else (a second value after the object,
/// garbage that merely contains `true`, bytes that are not UTF-8) is
/// refused whole: guessing at a damaged payload could trap a session.
pub fn parse_payload(
    bytes: &[u8],
) -> Result<serde_json::Map<String, serde_json::Value>, PayloadError> {
    let text = std::str::from_utf8(bytes).map_err(|_| PayloadError::NotUtf8)?;
    if text.trim().is_empty() {
        return Err(PayloadError::Empty);
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err(PayloadError::NotAnObject),
        Err(_) => Err(PayloadError::NotJson),
    }
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
    /// The payload's `stop_hook_active` (by `truthy`): this stop already
    /// follows a block.
    pub reentrant: bool,
    /// The payload was not one JSON object: fail open, saying why.
    pub bad_payload: Option<PayloadError>,
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
    /// The stop verdict, how many iterations the ledger holds, and the
    /// iteration whose success claim awaits the host's check, if any.
    Read {
        verdict: Verdict,
        iterations: u64,
        pending_claim: Option<u64>,
    },
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
    } else if let Some(error) = signals.bad_payload {
        Some(HookVerdict::allow(error.code()))
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
        LoopReading::Read { verdict, .. } if verdict.paused => HookVerdict::allow("paused"),
        LoopReading::Read { verdict, .. } if verdict.done => {
            HookVerdict::allow(verdict.reason.unwrap_or("done"))
        }
        // The session has claimed success and may append nothing until the
        // host runs the loop's success_check. Blocking would demand a turn
        // it cannot record, and the session may not settle its own claim:
        // let it stop, and say what settles the claim.
        LoopReading::Read {
            pending_claim: Some(iteration),
            ..
        } => HookVerdict {
            block: false,
            reason: "success_claim_pending".into(),
            message: Some(format!(
                "iteration {iteration} claims success; the loop stays armed until the claim is settled: run `loopx verify --dir {dir}` (it runs the loop's success_check; a pass ends the loop, a failure reopens it)",
                dir = entry.loop_dir
            )),
        },
        LoopReading::Read { .. } => HookVerdict {
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
            bad_payload: None,
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

    fn entry() -> ArmedLoop {
        ArmedLoop {
            schema_version: ARMED_SCHEMA_VERSION.into(),
            run_id: "run-1".into(),
            loop_dir: "/p/.loopx".into(),
            project_root: "/p".into(),
            armed_at: Timestamp::UNIX_EPOCH,
            pid: 0,
            driver: false,
            notify_channel: None,
        }
    }

    fn read(verdict: Verdict, pending_claim: Option<u64>) -> LoopReading {
        LoopReading::Read {
            verdict,
            iterations: 0,
            pending_claim,
        }
    }

    #[test]
    fn only_an_unfinished_unpaused_loop_blocks() {
        let entry = entry();
        let open = Verdict {
            done: false,
            paused: false,
            reason: None,
            deciding: None,
            conditions: vec![],
        };
        assert!(verdict(Some(&entry), read(open.clone(), None)).block);
        let paused = Verdict {
            paused: true,
            ..open.clone()
        };
        assert_eq!(verdict(Some(&entry), read(paused, None)).reason, "paused");
        let done = Verdict {
            done: true,
            reason: Some("loops_reached"),
            ..open.clone()
        };
        assert_eq!(
            verdict(Some(&entry), read(done, None)).reason,
            "loops_reached"
        );
        assert!(!verdict(Some(&entry), LoopReading::Unreadable("x".into())).block);
        assert!(!verdict(None, LoopReading::NoneArmed).block);
        let claim = verdict(Some(&entry), read(open, Some(4)));
        assert!(!claim.block, "a pending claim lets the session stop");
        assert_eq!(claim.reason, "success_claim_pending");
        assert!(claim
            .message
            .unwrap()
            .contains("loopx verify --dir /p/.loopx"));
    }

    #[test]
    fn json_truthiness_follows_the_reference_for_every_type() {
        use serde_json::json;
        let table = [
            (json!(null), false),
            (json!(false), false),
            (json!(true), true),
            (json!(0), false),
            (json!(0.0), false),
            (json!(-0.0), false),
            (json!(1), true),
            (json!(-1), true),
            (json!(0.5), true),
            (json!(""), false),
            (json!("false"), true),
            (json!("0"), true),
            (json!([]), false),
            (json!([false]), true),
            (json!({}), false),
            (json!({"a": 0}), true),
        ];
        for (value, expected) in table {
            assert_eq!(truthy(&value), expected, "{value}");
        }
    }

    #[test]
    fn only_one_whole_utf8_json_object_is_a_payload() {
        assert!(parse_payload(b"  {\"stop_hook_active\": true}\n").is_ok());
        let refused: [(&[u8], PayloadError); 8] = [
            (b"", PayloadError::Empty),
            (b" \n", PayloadError::Empty),
            (b"garbage true", PayloadError::NotJson),
            (
                br#"{"stop_hook_active":true} trailing"#,
                PayloadError::NotJson,
            ),
            (br#"{"a":1}{"b":2}"#, PayloadError::NotJson),
            (b"{\"cwd\": \"\xff\"}", PayloadError::NotUtf8),
            (b"[true]", PayloadError::NotAnObject),
            (b"true", PayloadError::NotAnObject),
        ];
        for (bytes, error) in refused {
            assert_eq!(
                parse_payload(bytes),
                Err(error),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn a_bad_payload_stands_down_after_disable_and_driver() {
        let signals = HookSignals {
            bad_payload: Some(PayloadError::NotJson),
            reentrant: true,
            ..Default::default()
        };
        assert_eq!(
            early_stand_down(signals).unwrap().reason,
            "invalid_payload:not_json"
        );
        let disabled = HookSignals {
            disabled: true,
            ..signals
        };
        assert_eq!(early_stand_down(disabled).unwrap().reason, "disabled_env");
    }

    #[test]
    fn a_dead_pid_retires_an_entry_and_a_live_driver_stands_the_hook_down() {
        let plain = entry();
        assert!(entry_live(&plain, false), "no pid: always live");
        let tied = ArmedLoop { pid: 42, ..entry() };
        assert!(entry_live(&tied, true) && !entry_live(&tied, false));
        assert!(driver_stand_down(&tied, true).is_none(), "not a driver");
        let driver = ArmedLoop {
            driver: true,
            ..tied
        };
        assert_eq!(
            driver_stand_down(&driver, true).unwrap().reason,
            "headless_driver_active"
        );
        assert!(driver_stand_down(&driver, false).is_none());
    }

    #[test]
    fn an_entry_written_before_pid_driver_notify_still_parses() {
        let old = r#"{"schema_version":"1.0","run_id":"r","loop_dir":"/l","project_root":"/p","armed_at":"2026-01-01T00:00:00Z"}"#;
        let entry: ArmedLoop = serde_json::from_str(old).unwrap();
        assert_eq!(
            (entry.pid, entry.driver, entry.notify_channel),
            (0, false, None)
        );
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
