//! Identities: the one grammar for the ids of goals, agents, todos,
//! outcomes and requirements.
//!
//! An id is 1-64 ASCII letters, digits, `.`, `_`, `-`, `:` or `@`,
//! starting with a letter or a digit. So an id is never empty (an empty
//! agent id must not quietly become the owner), never a path (`/`, `..`),
//! never whitespace or a control character, and always safe to print, to
//! put in a prompt, a stream name or a URL. Every id loopx generates
//! (`main`, `t7`, an agent's `agent`) and every id the earlier rule
//! accepted that starts alphanumeric and fits 64 bytes still parses.
//!
//! Operation ids ([`crate::operation::OperationId`]) and proof evidence
//! ids (file names under `proof_artifacts/`) have rules of their own.

use std::fmt;

pub const MAX_LEN: usize = 64;

/// Which kind of id was refused, for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Goal,
    Agent,
    Todo,
    Outcome,
    Requirement,
    Criterion,
    Obligation,
    Campaign,
    Approach,
}

impl IdKind {
    fn name(self) -> &'static str {
        match self {
            IdKind::Goal => "goal id",
            IdKind::Agent => "agent id",
            IdKind::Todo => "todo id",
            IdKind::Outcome => "outcome id",
            IdKind::Requirement => "requirement id",
            IdKind::Criterion => "criterion id",
            IdKind::Obligation => "obligation id",
            IdKind::Campaign => "campaign id",
            IdKind::Approach => "approach id",
        }
    }
}

/// Why a string is not an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentProblem {
    pub kind: IdKind,
    pub value: String,
}

impl fmt::Display for IdentProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `{:?}` escapes whatever made the value bad, so the message itself
        // never carries a control character to the terminal.
        write!(
            f,
            "{} {:?} is not valid: use 1-{MAX_LEN} ASCII letters, digits, '.', '_', '-', ':' or '@', starting with a letter or digit",
            self.kind.name(),
            self.value
        )
    }
}

impl std::error::Error for IdentProblem {}

fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '@')
}

/// Check `value` as an id of `kind`.
pub fn check(kind: IdKind, value: &str) -> Result<(), IdentProblem> {
    let valid = !value.is_empty()
        && value.len() <= MAX_LEN
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value.chars().all(is_id_char);
    if valid {
        Ok(())
    } else {
        Err(IdentProblem {
            kind,
            value: value.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_and_ordinary_ids_parse() {
        for good in [
            "main",
            "t1",
            "agent",
            "R-1.2",
            "claude@host",
            "codex:2",
            "x",
        ] {
            assert!(check(IdKind::Agent, good).is_ok(), "{good:?} refused");
        }
        assert!(check(IdKind::Todo, &"a".repeat(MAX_LEN)).is_ok());
    }

    #[test]
    fn empty_paths_whitespace_and_controls_are_refused() {
        for bad in [
            "",
            " ",
            "../../x y\n",
            "..",
            ".hidden",
            "-flag",
            "a/b",
            "a b",
            "tab\t",
            "esc\u{1b}",
            "é",
        ] {
            assert!(check(IdKind::Agent, bad).is_err(), "{bad:?} accepted");
        }
        assert!(check(IdKind::Goal, &"a".repeat(MAX_LEN + 1)).is_err());
    }

    #[test]
    fn the_refusal_names_the_kind_and_escapes_the_value() {
        let message = check(IdKind::Agent, "x\u{1b}[2J").unwrap_err().to_string();
        assert!(message.starts_with("agent id \"x\\u{1b}[2J\""), "{message}");
        assert!(!message.contains('\u{1b}'));
    }
}
