//! The host policy file of the force-loop kit: `KEY=VALUE` lines an
//! operator keeps outside the loop tree (`loopx start --policy-file`,
//! `AAS_FORCE_LOOP_POLICY_FILE`), read as data and never given to a
//! shell. Only the reference kit's policy keys are accepted, each once,
//! each value from a closed character set (the compute lanes from their
//! vocabulary); a line that is anything else refuses the whole file.
//! Messages name the line, never its value.
//!
//! The provider secrets file (`--secrets-file`, `AAS_PROVIDER_SECRETS_FILE`)
//! has the same shape with the reference kit's provider credential names
//! ([`SECRET_KEYS`]) and any visible ASCII as its value ([`parse_secrets`]).
//!
//! Owns the formats. Not here: where the file may be and who may own it
//! (`loopx_app::host_policy`, which opens it), or what the values do (the
//! driver reads them from its environment like any `AAS_*` setting).

use std::collections::BTreeMap;

/// The largest policy file read.
pub const MAX_BYTES: u64 = 16 * 1024;

/// The keys a policy file may set.
pub const KEYS: [&str; 5] = [
    "AAS_AUTOLOOP_GOAL_PRIORITY",
    "AAS_AUTOLOOP_NOTIFY",
    "AAS_AUTOLOOP_FORMAL_POLICY",
    "AAS_AUTOLOOP_FORMAL_TYPECHECK",
    "AAS_FORCE_LOOP_COMPUTE_LANES",
];

/// The compute lanes `AAS_FORCE_LOOP_COMPUTE_LANES` may list.
pub const LANES: [&str; 3] = ["hetzner", "kaggle", "modal"];

/// Why a policy file is refused: the line and the reason, no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {why}")]
pub struct PolicyProblem {
    pub file: String,
    pub line: usize,
    pub why: &'static str,
}

/// The provider credentials a secrets file may hold (the reference kit's).
pub const SECRET_KEYS: [&str; 18] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_API_KEY",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "COPILOT_GITHUB_TOKEN",
    "COPILOT_PROVIDER_API_KEY",
    "COPILOT_PROVIDER_BEARER_TOKEN",
    "DEEPSEEK_API_KEY",
    "GEMINI_API_KEY",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GOOGLE_API_KEY",
    "GROK_API_KEY",
    "KIMI_API_KEY",
    "MOONSHOT_API_KEY",
    "OPENAI_API_KEY",
    "OPENCODE_API_KEY",
    "XAI_API_KEY",
];

/// The longest secret value.
const MAX_SECRET_BYTES: usize = 8 * 1024;

fn value_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.,:+/@-".contains(c)
}

/// The assignments of policy text `text` (from `source`, for messages).
pub fn parse(text: &str, source: &str) -> Result<BTreeMap<String, String>, PolicyProblem> {
    assignments(text, source, &KEYS, |key, value| {
        if value.is_empty() || !value.chars().all(value_char) {
            return Err("a value must be letters, digits and _.,:+/@- only, and not empty");
        }
        if key == "AAS_FORCE_LOOP_COMPUTE_LANES"
            && !(value.split(','))
                .all(|lane| LANES.contains(&lane.trim().to_ascii_lowercase().as_str()))
        {
            return Err("a compute lane must be hetzner, kaggle or modal");
        }
        Ok(())
    })
}

/// The credentials of secrets text `text` (from `source`, for messages):
/// known names, each once, each value visible ASCII (no space, no
/// control character), at most 8 KiB.
pub fn parse_secrets(text: &str, source: &str) -> Result<BTreeMap<String, String>, PolicyProblem> {
    assignments(text, source, &SECRET_KEYS, |_, value| {
        let visible = value.bytes().all(|b| b.is_ascii_graphic());
        if value.is_empty() || !visible || value.len() > MAX_SECRET_BYTES {
            return Err("a secret must be visible ASCII without spaces, not empty, at most 8 KiB");
        }
        Ok(())
    })
}

/// `KEY=VALUE` lines (blank lines and `#` comments skipped), each key one
/// of `keys`, once, each value passing `check`.
fn assignments(
    text: &str,
    source: &str,
    keys: &[&str],
    check: impl Fn(&str, &str) -> Result<(), &'static str>,
) -> Result<BTreeMap<String, String>, PolicyProblem> {
    let mut out = BTreeMap::new();
    for (index, raw) in text.lines().enumerate() {
        let problem = |why| PolicyProblem {
            file: source.to_owned(),
            line: index + 1,
            why,
        };
        if raw.is_empty() || raw.starts_with('#') {
            continue;
        }
        let Some((key, value)) = raw.split_once('=').filter(|_| raw == raw.trim()) else {
            return Err(problem("not a KEY=VALUE assignment"));
        };
        if !keys.contains(&key) {
            return Err(problem(
                "not a key this file may set (see `loopx start --help`)",
            ));
        }
        if out.contains_key(key) {
            return Err(problem("a key set twice"));
        }
        check(key, value).map_err(problem)?;
        out.insert(key.to_owned(), value.to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kits_defaults_parse_and_anything_else_is_refused_by_line() {
        let text = "# host policy\nAAS_AUTOLOOP_GOAL_PRIORITY=on\nAAS_AUTOLOOP_NOTIFY=auto\n\nAAS_FORCE_LOOP_COMPUTE_LANES=kaggle,modal\n";
        let parsed = parse(text, "p").unwrap();
        assert_eq!(parsed["AAS_AUTOLOOP_NOTIFY"], "auto");
        assert_eq!(parsed.len(), 3);
        for (bad, line) in [
            ("AAS_AUTOLOOP_NOTIFY=auto\nPATH=/tmp/evil\n", 2),
            ("AAS_AUTOLOOP_NOTIFY=$(touch x)\n", 1),
            ("AAS_AUTOLOOP_NOTIFY=auto\nAAS_AUTOLOOP_NOTIFY=on\n", 2),
            (" AAS_AUTOLOOP_NOTIFY=auto\n", 1),
            ("export AAS_AUTOLOOP_NOTIFY=auto\n", 1),
            ("AAS_FORCE_LOOP_COMPUTE_LANES=kaggle,aws\n", 1),
            ("AAS_AUTOLOOP_NOTIFY=\n", 1),
        ] {
            let problem = parse(bad, "p").unwrap_err();
            assert_eq!(problem.line, line, "{bad:?}");
            // The value never reaches the message.
            assert!(
                !problem.to_string().contains("evil") && !problem.to_string().contains("touch")
            );
        }
    }

    #[test]
    fn secrets_take_known_names_and_visible_values_and_never_echo_them() {
        let ok = parse_secrets("OPENAI_API_KEY=sk-proj-abc_123!\n", "s").unwrap();
        assert_eq!(ok["OPENAI_API_KEY"], "sk-proj-abc_123!");
        for bad in [
            "LD_PRELOAD=/tmp/x.so\n",
            "OPENAI_API_KEY=sk-one two\n",
            "OPENAI_API_KEY=\n",
            "OPENAI_API_KEY=a\nOPENAI_API_KEY=b\n",
        ] {
            let problem = parse_secrets(bad, "s").unwrap_err().to_string();
            assert!(
                !problem.contains("sk-one") && !problem.contains("x.so"),
                "{problem}"
            );
        }
        // A secrets file is not a policy file, nor the other way round.
        assert!(parse("OPENAI_API_KEY=x\n", "p").is_err());
        assert!(parse_secrets("AAS_AUTOLOOP_NOTIFY=on\n", "s").is_err());
    }
}
