//! Loop-relative paths: the one rule for where a path taken from state or
//! from an agent may point, and the words for why a file could not be used.
//!
//! A [`LoopPath`] is parsed, never assembled: once it exists it names a
//! file strictly below the loop directory. It is plain text here (the core
//! does no IO); the binary opens it one component at a time without
//! following symlinks and requires a regular file at the end
//! (`fsutil::open_confined`), so `.`, a directory, a FIFO or a symlink is
//! never taken for evidence.
//!
//! [`CONTROL_FILES`] is the one list of the files loopx itself keeps in the
//! loop directory (its database, locks, logs, configs with secrets, views,
//! sentinels): [`LoopPath::control_file`] says whether a path names one,
//! and such a path is never evidence, whatever the file holds.

use crate::text::{self, Limit, Shape};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A path below the loop directory: one or more `/`-separated names, none
/// of them empty, `.` or `..`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LoopPath(String);

/// Why a string is not a [`LoopPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathProblem {
    Empty,
    Absolute,
    /// `\` or `:`: a Windows separator or drive, or a name that reads like
    /// one; refused rather than guessed at.
    Ambiguous(char),
    /// An empty name (`a//b`, a trailing `/`), `.` or `..`.
    BadComponent(String),
    ControlCharacter(char),
    TooLong {
        bytes: usize,
        limit: usize,
    },
}

impl fmt::Display for PathProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathProblem::Empty => {
                write!(f, "must be a non-empty path relative to the loop directory")
            }
            PathProblem::Absolute => {
                write!(f, "must be relative to the loop directory, not absolute")
            }
            PathProblem::Ambiguous(c) => {
                write!(f, "must not contain {c:?}: separate names with '/' only")
            }
            PathProblem::BadComponent(part) if part == ".." => write!(
                f,
                "must stay inside the loop directory; '..' is not allowed"
            ),
            PathProblem::BadComponent(part) if part.is_empty() => write!(
                f,
                "must not have an empty name (no '//' and no trailing '/')"
            ),
            PathProblem::BadComponent(part) => write!(
                f,
                "must name a file: {part:?} is not allowed as a path name"
            ),
            PathProblem::ControlCharacter(c) => write!(
                f,
                "must not contain the control character U+{:04X}",
                u32::from(*c)
            ),
            PathProblem::TooLong { bytes, limit } => {
                write!(f, "is {bytes} bytes; the limit is {limit}")
            }
        }
    }
}

impl std::error::Error for PathProblem {}

impl LoopPath {
    pub const MAX_LEN: usize = 1024;
    /// The longest name most file systems hold.
    pub const MAX_COMPONENT: usize = 255;

    pub fn parse(text: &str) -> Result<LoopPath, PathProblem> {
        if text.is_empty() {
            return Err(PathProblem::Empty);
        }
        if text.len() > Self::MAX_LEN {
            return Err(PathProblem::TooLong {
                bytes: text.len(),
                limit: Self::MAX_LEN,
            });
        }
        let line = Limit {
            max_bytes: Self::MAX_LEN,
            shape: Shape::Line,
        };
        if let Err(text::TextProblem::ControlCharacter { character, .. }) =
            text::check("path", text, line)
        {
            return Err(PathProblem::ControlCharacter(character));
        }
        if text.starts_with('/') {
            return Err(PathProblem::Absolute);
        }
        if let Some(c) = text.chars().find(|c| matches!(c, '\\' | ':')) {
            return Err(PathProblem::Ambiguous(c));
        }
        for part in text.split('/') {
            if part.is_empty() || part == "." || part == ".." {
                return Err(PathProblem::BadComponent(part.to_owned()));
            }
            if part.len() > Self::MAX_COMPONENT {
                return Err(PathProblem::TooLong {
                    bytes: part.len(),
                    limit: Self::MAX_COMPONENT,
                });
            }
        }
        Ok(LoopPath(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The names from the loop directory down, each a plain file name.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }
}

impl TryFrom<String> for LoopPath {
    type Error = PathProblem;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<LoopPath> for String {
    fn from(path: LoopPath) -> Self {
        path.0
    }
}

impl fmt::Display for LoopPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for LoopPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LoopPath({:?})", self.0)
    }
}

/// A file or folder loopx itself keeps in the loop directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlFile {
    /// Its name in the loop directory (a folder: everything below it).
    pub name: &'static str,
    pub folder: bool,
    /// What it is, as an error names it.
    pub what: &'static str,
}

const fn file(name: &'static str, what: &'static str) -> ControlFile {
    ControlFile {
        name,
        folder: false,
        what,
    }
}

const fn folder(name: &'static str, what: &'static str) -> ControlFile {
    ControlFile {
        name,
        folder: true,
        what,
    }
}

/// Every file loopx writes in the loop directory that is not evidence.
/// Some hold secrets (the dashboard's token, webhook URLs, reviewers'
/// commands, unredacted agent output); none is what an iteration produced.
/// `proof_artifacts/` is evidence and is not here.
pub const CONTROL_FILES: &[ControlFile] = &[
    file("loopx.sqlite", "the loop's database"),
    file("loopx.sqlite-wal", "the database's write-ahead log"),
    file("loopx.sqlite-shm", "the database's shared-memory index"),
    file("loopx.sqlite-journal", "the database's rollback journal"),
    file("driver.lock", "the driver's lock"),
    folder("driver_logs", "the driver's raw, unredacted agent logs"),
    file("serve.token", "the dashboard's bearer token"),
    file(
        "notify.json",
        "the notification config (webhook URLs and secrets)",
    ),
    file("notify_audit.jsonl", "the notification audit log"),
    file("notify_delivered.jsonl", "the notification delivery record"),
    file("panel.json", "the review panel's config"),
    folder("panel", "the review panel's own artifacts"),
    file("status.json", "a view loopx rewrites"),
    file("recovery.md", "a view loopx rewrites"),
    file("goal_focus.json", "a view loopx rewrites"),
    file("STOP_REQUESTED", "an operator's sentinel"),
    file("BLOCKED", "an operator's sentinel"),
    file("PAUSE", "an operator's sentinel"),
];

impl ControlFile {
    /// Whether `name`, the first name of a path, is this file, one of its
    /// temporaries (`.<name>.tmp-…`, what an atomic replace writes) or,
    /// for a folder, the folder. Letter case is ignored: on a
    /// case-insensitive file system `Serve.Token` opens `serve.token`.
    fn covers(&self, name: &str) -> bool {
        let temporary = name
            .strip_prefix('.')
            .and_then(|rest| rest.get(..self.name.len() + 5))
            .is_some_and(|head| head.eq_ignore_ascii_case(&format!("{}.tmp-", self.name)));
        name.eq_ignore_ascii_case(self.name) || temporary
    }
}

impl fmt::Display for ControlFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slash = if self.folder { "/" } else { "" };
        write!(
            f,
            "{}{slash} is {}, one of loopx's own control files, which are never evidence",
            self.name, self.what
        )
    }
}

impl LoopPath {
    /// The control file of loopx's that this path names or lies below.
    pub fn control_file(&self) -> Option<&'static ControlFile> {
        let first = self.components().next()?;
        CONTROL_FILES.iter().find(|control| control.covers(first))
    }
}

/// Why a file named by a [`LoopPath`] could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileProblem {
    Missing,
    /// A directory, FIFO, socket or device where a regular file must be
    /// (or a non-directory where the path goes on below it).
    NotARegularFile,
    BehindSymlink,
    TooLarge {
        limit: u64,
    },
    Unreadable(String),
}

impl FileProblem {
    pub fn describe(&self) -> String {
        match self {
            FileProblem::Missing => "does not exist".into(),
            FileProblem::NotARegularFile => "is not a regular file".into(),
            FileProblem::BehindSymlink => {
                "is reached through a symlink, which loopx does not follow".into()
            }
            FileProblem::TooLarge { limit } => {
                format!("is larger than the {limit}-byte limit")
            }
            FileProblem::Unreadable(reason) => format!("cannot be read ({reason})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_below_the_loop_directory_parse() {
        for good in [
            "proofs/theorem.lean",
            "a",
            "driver_logs/d1-ab12.log",
            "a.b/c-d_e",
        ] {
            assert_eq!(LoopPath::parse(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            ".",
            "./",
            "./a",
            "a/.",
            "..",
            "a/../b",
            "../x",
            "/etc/passwd",
            "a//b",
            "a/",
            "C:\\x",
            "a\\..\\b",
            "c:x",
            "nul\0",
            "esc\u{1b}",
            "new\nline",
        ] {
            assert!(LoopPath::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(LoopPath::parse(&"a".repeat(256)).is_err());
        assert!(LoopPath::parse(&["a"; 600].join("/")).is_err());
    }

    #[test]
    fn refusals_say_why() {
        let why = |p: &str| LoopPath::parse(p).unwrap_err().to_string();
        assert!(why("a/../b").contains("'..' is not allowed"));
        assert!(why(".").contains("\".\" is not allowed"));
        assert!(why("/etc/passwd").contains("not absolute"));
        assert!(why("").contains("non-empty"));
    }

    #[test]
    fn loopx_control_files_are_recognised_wherever_they_are_named() {
        let control = |p: &str| LoopPath::parse(p).unwrap().control_file().map(|c| c.name);
        for (path, name) in [
            ("serve.token", "serve.token"),
            ("notify.json", "notify.json"),
            ("panel.json", "panel.json"),
            ("loopx.sqlite", "loopx.sqlite"),
            ("loopx.sqlite-wal", "loopx.sqlite-wal"),
            ("loopx.sqlite-shm", "loopx.sqlite-shm"),
            ("loopx.sqlite-journal", "loopx.sqlite-journal"),
            ("driver.lock", "driver.lock"),
            ("driver_logs/d1-ab12.log", "driver_logs"),
            ("panel/r1/brief.md", "panel"),
            ("Serve.TOKEN", "serve.token"),
            (".serve.token.tmp-4242", "serve.token"),
            (".status.json.tmp-1", "status.json"),
            ("PAUSE", "PAUSE"),
        ] {
            assert_eq!(control(path), Some(name), "{path}");
        }
        for evidence in [
            "notes/serve.token",
            "proof_artifacts/final.json",
            "notes/b.md",
            "serve.token.md",
            "panelists.md",
            ".serve.token",
            "driver_logs_summary.md",
        ] {
            assert_eq!(control(evidence), None, "{evidence}");
        }
        let why = LoopPath::parse("driver_logs/x.log")
            .unwrap()
            .control_file()
            .unwrap()
            .to_string();
        assert!(why.starts_with("driver_logs/ is the driver's raw"), "{why}");
        assert!(why.contains("never evidence"), "{why}");
    }

    #[test]
    fn serde_round_trips_and_refuses_bad_paths() {
        let path: LoopPath = serde_json::from_str("\"p/q.lean\"").unwrap();
        assert_eq!(serde_json::to_string(&path).unwrap(), "\"p/q.lean\"");
        assert!(serde_json::from_str::<LoopPath>("\"../q\"").is_err());
    }
}
