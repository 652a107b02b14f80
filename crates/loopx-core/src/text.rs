//! Free text from people and agents: the one rule for which characters a
//! field may hold and how many bytes, and the one table of those limits.
//!
//! Everything an owner stores is later printed to a terminal (`inspect`,
//! `task-body`, `status`), pasted into the next agent's prompt, or rendered
//! in the dashboard. A control character there is an injection (an ESC
//! sequence rewrites the screen, a BEL rings, a NUL truncates), so owners
//! refuse it on the way in. Only multi-line fields ([`Shape::Block`]) may
//! hold a newline or a tab. What reaches a terminal without passing an
//! owner (a reviewer's answer, an agent's error line, a path) is escaped
//! on the way out instead ([`printable`]).
//!
//! The limits are far above honest use and far below what hurts: every
//! stored text is kept forever in the journal and copied into views.

use std::borrow::Cow;
use std::fmt;

/// The first `max` characters of `text` (all of it when shorter), cut on
/// a character boundary, lines kept.
pub fn prefix_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// `text` safe to print to a terminal: every control character but the
/// newline and the tab (ESC, NUL, BEL, `\r`, DEL, the C1 range, which
/// includes the 8-bit CSI) written as a visible `\u{..}` escape, so output
/// an agent or a reviewer chose can neither rewrite the screen nor hide
/// what it says. Unchanged, and not copied, when there is none.
pub fn printable(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Which whitespace a field may hold besides the space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One line: no control characters at all (titles, reasons, refs).
    Line,
    /// Multi-line prose: `\n` and `\t` allowed, no other control character
    /// (not even `\r`, which rewrites the line it is printed on).
    Block,
}

/// What a field is and how much it may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub max_bytes: usize,
    pub shape: Shape,
}

/// The table of limits. An owner names the field and picks one of these;
/// no other module states a text limit.
pub mod limits {
    use super::{Limit, Shape};

    /// A todo title, an agent-facing label.
    pub const TITLE: Limit = Limit {
        max_bytes: 512,
        shape: Shape::Line,
    };
    /// A short one-line field: a reason, a source or evidence reference, a
    /// stop reason, a provider name.
    pub const LINE: Limit = Limit {
        max_bytes: 2 * 1024,
        shape: Shape::Line,
    };
    /// An objective, success criteria, a requirement, a commitment.
    pub const OBJECTIVE: Limit = Limit {
        max_bytes: 16 * 1024,
        shape: Shape::Block,
    };
    /// A note, a review's reasoning, a summary, an iteration's objective
    /// line and next action.
    pub const NOTE: Limit = Limit {
        max_bytes: 16 * 1024,
        shape: Shape::Block,
    };
    /// An iteration's `output`, the one field agents put detail in.
    pub const OUTPUT: Limit = Limit {
        max_bytes: 64 * 1024,
        shape: Shape::Block,
    };
    /// Entries in one list field (refs, actions, gaps, commitments).
    pub const LIST_ITEMS: usize = 256;
    /// A JSON document the CLI reads from a file (`--document`,
    /// `--goal-outcome-update-json`): the goal's own 128 KiB declaration
    /// budget, so a document that fits the budget always fits the read.
    pub const DOCUMENT_BYTES: u64 = 128 * 1024;
    /// A proof artifact (`proof_artifacts/<id>.json`): a small metadata
    /// record pointing at the proof, never the proof itself.
    pub const PROOF_ARTIFACT_BYTES: u64 = 64 * 1024;
    /// Todos one `todo add --from-file` may add: a large plan in one
    /// operation, not a goal without end.
    pub const TODO_BATCH_ITEMS: usize = 50_000;
    /// The file `todo add --from-file` reads: room for
    /// [`TODO_BATCH_ITEMS`] todos at the [`TITLE`] limit, quoted.
    pub const TODO_BATCH_BYTES: u64 = 32 * 1024 * 1024;
}

/// Why a text field was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextProblem {
    TooLong {
        field: String,
        bytes: usize,
        limit: usize,
    },
    ControlCharacter {
        field: String,
        character: char,
        at: usize,
        shape: Shape,
    },
    TooManyItems {
        field: String,
        count: usize,
        limit: usize,
    },
}

impl fmt::Display for TextProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TextProblem::TooLong { field, bytes, limit } => write!(
                f,
                "{field} is {bytes} bytes; the limit is {limit} bytes: shorten it and put detail in a file the record cites"
            ),
            TextProblem::ControlCharacter {
                field,
                character,
                at,
                shape,
            } => {
                let allowed = match shape {
                    Shape::Line => "it is one line: no control characters, not even a newline or tab",
                    Shape::Block => "only newline and tab are allowed",
                };
                write!(
                    f,
                    "{field} contains the control character U+{:04X} at byte {at} ({allowed}): remove it",
                    u32::from(*character)
                )
            }
            TextProblem::TooManyItems { field, count, limit } => write!(
                f,
                "{field} has {count} entries; the limit is {limit}: cite fewer, or one file that lists them"
            ),
        }
    }
}

impl std::error::Error for TextProblem {}

/// Characters that change how text around them is shown rather than being
/// shown: C0 and C1 controls, DEL, and the Unicode bidirectional overrides
/// and isolates (which make a line read differently from what it says).
fn is_forbidden(c: char, shape: Shape) -> bool {
    if shape == Shape::Block && matches!(c, '\n' | '\t') {
        return false;
    }
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Check one text field against its limit.
pub fn check(field: &str, text: &str, limit: Limit) -> Result<(), TextProblem> {
    check_named(|| field.to_owned(), text, limit)
}

/// [`check`], with the field's name made only when the text is refused:
/// `validate` checks every entry of every imported record's lists.
fn check_named(
    field: impl FnOnce() -> String,
    text: &str,
    limit: Limit,
) -> Result<(), TextProblem> {
    if text.len() > limit.max_bytes {
        return Err(TextProblem::TooLong {
            field: field(),
            bytes: text.len(),
            limit: limit.max_bytes,
        });
    }
    // Printable ASCII, nearly every honest text, holds no forbidden
    // character (every one of those is a control or outside ASCII).
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Ok(());
    }
    if let Some((at, character)) = text
        .char_indices()
        .find(|(_, c)| is_forbidden(*c, limit.shape))
    {
        return Err(TextProblem::ControlCharacter {
            field: field(),
            character,
            at,
            shape: limit.shape,
        });
    }
    Ok(())
}

/// Check the length of a list field.
pub fn check_count(field: &str, count: usize) -> Result<(), TextProblem> {
    if count > limits::LIST_ITEMS {
        return Err(TextProblem::TooManyItems {
            field: field.to_owned(),
            count,
            limit: limits::LIST_ITEMS,
        });
    }
    Ok(())
}

/// Check a list field: its length, then every entry against `limit`.
pub fn check_all<S: AsRef<str>>(field: &str, items: &[S], limit: Limit) -> Result<(), TextProblem> {
    check_count(field, items.len())?;
    for (index, item) in items.iter().enumerate() {
        check_named(|| format!("{field}[{index}]"), item.as_ref(), limit)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn printable_escapes_every_control_but_newline_and_tab() {
        let hostile = "ok\x1b[2J\0bell\x07\r\u{9b}31m\x7f\nline\tcell";
        let shown = printable(hostile);
        assert_eq!(
            shown,
            "ok\\u{1b}[2J\\u{0}bell\\u{7}\\u{d}\\u{9b}31m\\u{7f}\nline\tcell"
        );
        assert!(!shown
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'));
        assert!(matches!(printable("plain\ntext"), Cow::Borrowed(_)));
    }

    use super::*;

    #[test]
    fn terminal_controls_are_refused_in_every_shape() {
        for bad in [
            "\u{1b}[2J",
            "bell\u{7}",
            "nul\0",
            "del\u{7f}",
            "c1\u{9b}31m",
            "cr\r",
        ] {
            for limit in [limits::TITLE, limits::NOTE] {
                let error = check("title", bad, limit).unwrap_err();
                assert!(
                    matches!(error, TextProblem::ControlCharacter { .. }),
                    "{bad:?} accepted"
                );
            }
        }
        assert!(check("x", "a\u{202E}b", limits::NOTE).is_err());
    }

    #[test]
    fn newline_and_tab_only_in_blocks() {
        assert!(check("note", "line 1\n\tline 2", limits::NOTE).is_ok());
        let error = check("title", "two\nlines", limits::TITLE).unwrap_err();
        assert!(error.to_string().contains("U+000A at byte 3"), "{error}");
        assert!(check("title", "tab\there", limits::TITLE).is_err());
    }

    #[test]
    fn the_limit_is_named_in_the_refusal() {
        let error = check("objective", &"x".repeat(16 * 1024 + 1), limits::OBJECTIVE)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("16385 bytes") && error.contains("16384"),
            "{error}"
        );
        assert!(check("objective", &"é".repeat(8 * 1024), limits::OBJECTIVE).is_ok());
    }

    #[test]
    fn every_ascii_character_is_judged_as_the_full_scan_judges_it() {
        for byte in 0u8..0x80 {
            let c = char::from(byte);
            for limit in [limits::LINE, limits::NOTE] {
                let text = format!("ab{c}cd");
                assert_eq!(
                    check("x", &text, limit).is_err(),
                    is_forbidden(c, limit.shape),
                    "{c:?} in {:?}",
                    limit.shape
                );
            }
        }
    }

    #[test]
    fn lists_are_bounded_and_each_entry_checked() {
        let many = vec!["r"; limits::LIST_ITEMS + 1];
        assert!(matches!(
            check_all("input_refs", &many, limits::LINE),
            Err(TextProblem::TooManyItems { .. })
        ));
        let error = check_all("input_refs", &["ok", "b\u{1b}"], limits::LINE).unwrap_err();
        assert!(error.to_string().starts_with("input_refs[1]"), "{error}");
    }
}
