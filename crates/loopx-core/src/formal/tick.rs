//! The force tick's report (`formal/force_loop_reports/*.json`) and what a
//! tick's steps come to.
//!
//! A tick is hygiene the host performs after an ok turn: a crude scan of
//! the Lake project's `.lean` files for `sorry`, and, when the operator
//! opted in, `lake build`. Its report is the only thing it writes besides
//! its credit: it never changes the loop's status and never supports a
//! claim ([`CLAIM_SUPPORT`] is fixed), so nothing an agent does to the
//! project can turn a tick into a stop.
//!
//! Not here: running anything, or reading the project (`loopx_app::formal`).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

pub const REPORT_SCHEMA: &str = "formal_force_report.v1";
pub const WRITER: &str = "host_formal_force_tick";
/// What a tick says about claim support, always: a scan or a build shows
/// at most that a Lean statement checks, never that it says what the
/// claim says.
pub const CLAIM_SUPPORT: &str = "not_evaluated";
/// The most `.lean` files a scan reads.
pub const SCAN_FILES: usize = 200;
/// The most bytes a scan reads of one file.
pub const SCAN_FILE_BYTES: u64 = 1 << 20;

/// What the scan found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scan {
    pub lean_files: usize,
    /// Whole-word `sorry`s in the files read (comments included: a crude
    /// scan, never a gate's result).
    pub sorry_count: usize,
    /// More files than [`SCAN_FILES`] were there; the rest were not read.
    pub cut_short: bool,
}

/// How `lake build` went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TypecheckStatus {
    Passed,
    Failed,
    /// Killed, with its process group, at its time limit.
    TimedOut,
    /// `lake` is not on PATH, or could not be started.
    ToolUnavailable,
    /// The driver was told to stop while it ran.
    Interrupted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Typecheck {
    pub status: TypecheckStatus,
    pub argv: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    pub timeout_s: u64,
    /// Its output, relative to the loop directory (the driver's logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Where the tick ended (the reference's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Terminal {
    /// The tick ran; gaps, if any, are recorded, and the loop goes on.
    IssueFree,
    /// No Lake project, or no `lake`: nothing was checked.
    ToolUnavailable,
    /// The driver was told to stop during the tick.
    Interrupted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hygiene {
    Clean,
    Gaps,
    Unavailable,
}

/// One force tick, as its report file holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: String,
    pub writer: String,
    /// Which credit it spent (1 for the loop's first tick).
    pub tick: u32,
    pub at: Timestamp,
    /// The iteration the ok turn recorded.
    pub iteration: u64,
    pub driver_pid: u32,
    /// The project as configured.
    pub project: String,
    /// The Lake project found for it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_dir: Option<String>,
    pub terminal: Terminal,
    pub hygiene_status: Hygiene,
    pub credits_budget: u32,
    pub credits_remaining: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan: Option<Scan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typecheck: Option<Typecheck>,
    pub claim_support_status: String,
    pub no_claim_support_promotion: bool,
}

/// Where a tick's steps leave it: no project, or a `lake` that could not
/// run, is `tool_unavailable`; a stop during it `interrupted`; otherwise
/// it ran, clean or with gaps (a `sorry`, a failed or timed-out build).
pub fn conclude(
    project_found: bool,
    scan: Option<&Scan>,
    typecheck: Option<&Typecheck>,
) -> (Terminal, Hygiene) {
    let status = typecheck.map(|t| t.status);
    if !project_found || status == Some(TypecheckStatus::ToolUnavailable) {
        return (Terminal::ToolUnavailable, Hygiene::Unavailable);
    }
    if status == Some(TypecheckStatus::Interrupted) {
        return (Terminal::Interrupted, Hygiene::Unavailable);
    }
    let sorry = scan.is_some_and(|s| s.sorry_count > 0);
    let failed = matches!(
        status,
        Some(TypecheckStatus::Failed | TypecheckStatus::TimedOut)
    );
    match sorry || failed {
        true => (Terminal::IssueFree, Hygiene::Gaps),
        false => (Terminal::IssueFree, Hygiene::Clean),
    }
}

/// How many times `sorry` stands as a whole word in `text` (a Lean
/// identifier may hold letters, digits, `_`, `'`, `.` and `!`/`?` at its
/// end, so `sorryAx` or `no_sorry` are not counted).
pub fn count_sorry(text: &str) -> usize {
    let part_of_name = |c: char| c.is_alphanumeric() || matches!(c, '_' | '\'' | '.' | '!' | '?');
    text.match_indices("sorry")
        .filter(|(at, word)| {
            let before = text[..*at].chars().next_back();
            let after = text[at + word.len()..].chars().next();
            !before.is_some_and(part_of_name) && !after.is_some_and(part_of_name)
        })
        .count()
}
