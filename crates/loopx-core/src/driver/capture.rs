//! How much of a turn's output loopx keeps, and how long it keeps it: the
//! capture cap (16 MiB by default; `drive --max-turn-output`, or
//! [`CAP_ENV`]) split into a head and a tail, the line that stands where
//! bytes were dropped, the settlement's note about it, and which driver
//! logs a retention sweep removes (count and bytes, oldest first, never a
//! protected one).
//!
//! The classifier reads the end of a log, so the tail is always kept: an
//! error or a usage report printed last is still seen after a flood.
//!
//! Not here: reading the pipe and writing the file (the application's
//! capture and the runner), listing and deleting files.

use std::fmt;

/// The environment variable that sets the cap when `--max-turn-output`
/// is not given.
pub const CAP_ENV: &str = "LOOPX_MAX_TURN_OUTPUT";

/// The most a turn's log keeps of its output, as a head and a tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputCap {
    bytes: u64,
}

impl OutputCap {
    pub const DEFAULT: OutputCap = OutputCap {
        bytes: 16 * 1024 * 1024,
    };
    /// Smaller would keep too little of either end to read.
    pub const MIN: u64 = 64 * 1024;
    pub const MAX: u64 = 4 * 1024 * 1024 * 1024;

    /// `BYTES`, or a number with `K`, `M` or `G` (powers of 1024):
    /// `16777216`, `16M`, `512K`.
    pub fn parse(text: &str) -> Result<OutputCap, CapProblem> {
        let text = text.trim();
        let (digits, unit) = match text.char_indices().last() {
            Some((at, c)) if c.is_ascii_alphabetic() => (&text[..at], c.to_ascii_uppercase()),
            _ => (text, 'B'),
        };
        let scale: u64 = match unit {
            'B' => 1,
            'K' => 1024,
            'M' => 1024 * 1024,
            'G' => 1024 * 1024 * 1024,
            _ => return Err(CapProblem::NotASize),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(CapProblem::NotASize);
        }
        let bytes = digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(scale))
            .ok_or(CapProblem::OutOfRange)?;
        if !(Self::MIN..=Self::MAX).contains(&bytes) {
            return Err(CapProblem::OutOfRange);
        }
        Ok(OutputCap { bytes })
    }

    /// The cap a run uses: `flag` (`--max-turn-output`), else `env` (the
    /// value of [`CAP_ENV`]), else [`OutputCap::DEFAULT`]. The error names
    /// the value that was wrong and where it came from.
    pub fn resolve(flag: Option<&str>, env: Option<&str>) -> Result<OutputCap, String> {
        match (flag, env) {
            (Some(flag), _) => {
                Self::parse(flag).map_err(|problem| format!("--max-turn-output {flag:?} {problem}"))
            }
            (None, Some(env)) => Self::parse(env).map_err(|problem| {
                format!("{CAP_ENV}={env:?} {problem}; fix or unset it, or give --max-turn-output")
            }),
            (None, None) => Ok(Self::DEFAULT),
        }
    }

    pub fn bytes(self) -> u64 {
        self.bytes
    }

    /// How much of the start is kept.
    pub fn head(self) -> u64 {
        self.bytes / 2
    }

    /// How much of the end is kept.
    pub fn tail(self) -> u64 {
        self.bytes - self.head()
    }

    /// The line written where `dropped` bytes were left out of a log.
    pub fn dropped_line(self, dropped: u64) -> String {
        format!(
            "\n# --- loopx: {dropped} bytes of output dropped here: the turn wrote more than the {}-byte cap (--max-turn-output); the first {} and the last {} bytes are kept ---\n",
            self.bytes,
            self.head(),
            self.tail()
        )
    }

    /// The settlement's note for a turn whose log lost `dropped` bytes.
    pub fn truncation_note(self, dropped: u64, log: &str) -> String {
        format!(
            "output over the {}-byte cap: {dropped} bytes dropped from the middle of {log}",
            self.bytes
        )
    }
}

impl Default for OutputCap {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Display for OutputCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.bytes)
    }
}

/// Why a cap was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapProblem {
    NotASize,
    OutOfRange,
}

impl fmt::Display for CapProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapProblem::NotASize => f.write_str(
                "is not a size: give a whole number of bytes, optionally with K, M or G (powers of 1024), e.g. 16M",
            ),
            CapProblem::OutOfRange => write!(
                f,
                "is out of range: the cap must be from {} (64K) to {} (4G) bytes",
                OutputCap::MIN,
                OutputCap::MAX
            ),
        }
    }
}

impl std::error::Error for CapProblem {}

/// How many driver logs are kept, and how many bytes of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub max_logs: usize,
    pub max_bytes: u64,
}

impl Retention {
    pub const DEFAULT: Retention = Retention {
        max_logs: 200,
        max_bytes: 1024 * 1024 * 1024,
    };
}

/// One log in the driver's log directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub name: String,
    pub bytes: u64,
    /// When it was last written, in any unit that orders (nanoseconds
    /// since the epoch).
    pub modified: i128,
    /// The log of a process that may still run (an open dispatch, a
    /// recorded process): never removed.
    pub protected: bool,
}

/// The logs to remove, oldest first: newest first, every log is kept while
/// the kept ones stay within `retention`; from the first that does not
/// fit, it and every older one go, except the protected, which are kept
/// (and counted) whatever their age.
pub fn expired(entries: &[LogEntry], retention: Retention) -> Vec<&str> {
    let mut newest_first: Vec<&LogEntry> = entries.iter().collect();
    newest_first.sort_by(|a, b| (b.modified, &b.name).cmp(&(a.modified, &a.name)));
    let (mut logs, mut bytes) = (0usize, 0u64);
    let mut full = false;
    let mut gone = Vec::new();
    for entry in newest_first {
        let fits =
            logs < retention.max_logs && bytes.saturating_add(entry.bytes) <= retention.max_bytes;
        full |= !fits;
        if full && !entry.protected {
            gone.push(entry.name.as_str());
        } else {
            logs += 1;
            bytes = bytes.saturating_add(entry.bytes);
        }
    }
    gone.reverse();
    gone
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_parse_in_bytes_or_powers_of_1024_within_range() {
        for (text, bytes) in [
            ("16777216", 16 * 1024 * 1024),
            ("16M", 16 * 1024 * 1024),
            ("512k", 512 * 1024),
            ("1G", 1024 * 1024 * 1024),
            (" 64K ", 64 * 1024),
        ] {
            assert_eq!(OutputCap::parse(text).unwrap().bytes(), bytes, "{text}");
        }
        for (text, problem) in [
            ("", CapProblem::NotASize),
            ("M", CapProblem::NotASize),
            ("-1", CapProblem::NotASize),
            ("1.5M", CapProblem::NotASize),
            ("16X", CapProblem::NotASize),
            ("16 M", CapProblem::NotASize),
            ("1000", CapProblem::OutOfRange),
            ("5G", CapProblem::OutOfRange),
            ("99999999999999999999", CapProblem::OutOfRange),
            ("18014398509481984G", CapProblem::OutOfRange),
        ] {
            assert_eq!(OutputCap::parse(text), Err(problem), "{text}");
        }
    }

    #[test]
    fn the_flag_wins_over_the_environment_and_errors_name_their_source() {
        assert_eq!(OutputCap::resolve(None, None), Ok(OutputCap::DEFAULT));
        let cap = OutputCap::resolve(Some("1M"), Some("junk")).unwrap();
        assert_eq!(cap.bytes(), 1024 * 1024);
        assert_eq!(
            OutputCap::resolve(None, Some("2M")).unwrap().bytes(),
            2 * 1024 * 1024
        );
        let error = OutputCap::resolve(None, Some("lots")).unwrap_err();
        assert!(
            error.starts_with("LOOPX_MAX_TURN_OUTPUT=\"lots\" is not a size"),
            "{error}"
        );
        let error = OutputCap::resolve(Some("10"), None).unwrap_err();
        assert!(
            error.starts_with("--max-turn-output \"10\" is out of range"),
            "{error}"
        );
    }

    #[test]
    fn the_default_cap_keeps_eight_mebibytes_of_each_end() {
        let cap = OutputCap::default();
        assert_eq!((cap.head(), cap.tail()), (8 << 20, 8 << 20));
        let odd = OutputCap::parse("65537").unwrap();
        assert_eq!(odd.head() + odd.tail(), 65537);
        let line = cap.dropped_line(42);
        assert!(line.starts_with("\n# --- loopx: 42 bytes of output dropped here"));
        assert!(line.ends_with("---\n"));
    }

    fn keep(max_logs: usize, max_bytes: u64) -> Retention {
        Retention {
            max_logs,
            max_bytes,
        }
    }

    fn log(name: &str, bytes: u64, modified: i128, protected: bool) -> LogEntry {
        LogEntry {
            name: name.into(),
            bytes,
            modified,
            protected,
        }
    }

    #[test]
    fn retention_removes_the_oldest_logs_beyond_the_count_first() {
        let entries: Vec<LogEntry> = (0..5)
            .map(|i| log(&format!("d{i}.log"), 1, i, false))
            .collect();
        let retention = keep(3, 100);
        assert_eq!(expired(&entries, retention), ["d0.log", "d1.log"]);
        assert!(expired(&entries[..3], retention).is_empty());
    }

    #[test]
    fn retention_by_bytes_never_keeps_an_older_log_once_a_newer_one_went() {
        let entries = [
            log("old-small.log", 1, 1, false),
            log("mid-big.log", 80, 2, false),
            log("new.log", 30, 3, false),
        ];
        let retention = keep(10, 100);
        assert_eq!(
            expired(&entries, retention),
            ["old-small.log", "mid-big.log"]
        );
    }

    #[test]
    fn retention_never_removes_a_protected_log() {
        let entries = [
            log("open.log", 50, 0, true),
            log("a.log", 1, 1, false),
            log("b.log", 1, 2, false),
        ];
        let retention = keep(1, 10);
        assert_eq!(expired(&entries, retention), ["a.log"]);
    }
}
