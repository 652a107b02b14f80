//! The provider table: how each agent CLI runs one headless turn.
//!
//! Pure data plus the argv rule and the family rule; the adapter probes
//! PATH and reads the environment and passes the answers in, so nothing
//! here touches the machine.

use serde::{Deserialize, Serialize};

/// One way to launch a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launcher {
    pub binary: &'static str,
    /// Arguments before the prompt.
    pub before: &'static [&'static str],
    /// Arguments after the prompt.
    pub after: &'static [&'static str],
    /// The output format the driver parses for cost and errors.
    pub structured: Structured,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Structured {
    /// Claude's `--output-format stream-json --verbose`.
    ClaudeStreamJson,
    /// Codex's `exec --json` events.
    CodexJson,
    /// Plain text only.
    Text,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provider {
    pub name: &'static str,
    /// The model family a pinned launch reaches, for family attribution
    /// (a reviewer of another family is independent).
    pub family: Family,
    /// Tried in order; the first whose binary is on PATH is used.
    pub launchers: &'static [Launcher],
}

/// A model family. `Unverified`: a gateway that may route to several
/// families, or a launch whose endpoint the environment overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Anthropic,
    Openai,
    Deepseek,
    Google,
    Xai,
    Unverified,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Anthropic => "anthropic",
            Family::Openai => "openai",
            Family::Deepseek => "deepseek",
            Family::Google => "google",
            Family::Xai => "xai",
            Family::Unverified => "unverified",
        }
    }
}

/// Variables that point an agent CLI at another endpoint or provider
/// (the reference's list). When any is set, no launch can be attributed
/// to the family the table names.
pub const ENDPOINT_OVERRIDES: &[&str] = &[
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_URL",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "CODEX_BASE_URL",
    "AZURE_OPENAI_ENDPOINT",
    "DEEPSEEK_BASE_URL",
    "DEEPSEEK_API_BASE",
    "CODEWHALE_BASE_URL",
    "XAI_BASE_URL",
    "GROK_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_VERTEX_BASE_URL",
    "GEMINI_NEXT_GEN_API_BASE_URL",
];

/// The family a launch of `provider` reaches in an environment where
/// `env(name)` reads a variable: the table's family, unless an endpoint
/// override is set (to anything non-empty).
pub fn family(provider: &Provider, env: impl Fn(&str) -> Option<String>) -> Family {
    let overridden = ENDPOINT_OVERRIDES
        .iter()
        .any(|name| env(name).is_some_and(|value| !value.is_empty()));
    if overridden {
        Family::Unverified
    } else {
        provider.family
    }
}

/// Stands for the project root (the agent's working directory) in a
/// launcher's arguments.
pub const ROOT: &str = "{root}";

const fn text(
    binary: &'static str,
    before: &'static [&'static str],
    after: &'static [&'static str],
) -> Launcher {
    Launcher {
        binary,
        before,
        after,
        structured: Structured::Text,
    }
}

/// The table of the runtime spec, pinned as the reference pins it: codex
/// to its built-in OpenAI provider without the user's config, deepseek to
/// the official endpoint without the project's config. `-p`/`--print`
/// consumes the next argv word as the prompt, so nothing ever stands
/// between `-p` and the prompt.
pub const PROVIDERS: &[Provider] = &[
    Provider {
        name: "claude",
        family: Family::Anthropic,
        launchers: &[Launcher {
            binary: "claude",
            before: &["-p"],
            after: &[
                "--dangerously-skip-permissions",
                "--output-format",
                "stream-json",
                "--verbose",
            ],
            structured: Structured::ClaudeStreamJson,
        }],
    },
    Provider {
        name: "codex",
        family: Family::Openai,
        launchers: &[Launcher {
            binary: "codex",
            before: &[
                "exec",
                "--ignore-user-config",
                "-c",
                "model_provider=\"openai\"",
                "--full-auto",
                "--json",
            ],
            after: &[],
            structured: Structured::CodexJson,
        }],
    },
    Provider {
        name: "deepseek",
        family: Family::Deepseek,
        launchers: &[
            text("codewhale", DEEPSEEK_PINNED, &[]),
            text(
                "codewhale-tui",
                &["-w", ROOT, "exec", "--provider", "deepseek", "--auto"],
                &[],
            ),
            text("deepseek", DEEPSEEK_PINNED, &[]),
        ],
    },
    Provider {
        name: "opencode",
        family: Family::Unverified,
        launchers: &[text("opencode", &["run"], &[])],
    },
    Provider {
        name: "copilot",
        family: Family::Unverified,
        launchers: &[text("copilot", &["-p"], &["--allow-all-tools"])],
    },
    Provider {
        name: "antigravity",
        family: Family::Google,
        launchers: &[
            text("agy", &["-p"], &["--dangerously-skip-permissions"]),
            text("gemini", &["--yolo", "-p"], &[]),
        ],
    },
    Provider {
        name: "grok",
        family: Family::Xai,
        launchers: &[
            text("grok", &["-p"], &["--yolo"]),
            text("grok-remote", &["-p"], &["--yolo"]),
        ],
    },
    Provider {
        // Kimi's model aliases may reach any configured registry: its
        // family cannot be attributed.
        name: "kimi",
        family: Family::Unverified,
        launchers: &[text("kimi", &["-p"], &["--auto"])],
    },
];

const DEEPSEEK_PINNED: &[&str] = &[
    "--provider",
    "deepseek",
    "--no-project-config",
    "-C",
    ROOT,
    "exec",
    "--auto",
];

/// `codewhale` is the same provider as `deepseek`.
pub fn find(name: &str) -> Option<&'static Provider> {
    let name = if name == "codewhale" {
        "deepseek"
    } else {
        name
    };
    PROVIDERS.iter().find(|p| p.name == name)
}

pub fn names() -> Vec<&'static str> {
    PROVIDERS.iter().map(|p| p.name).collect()
}

/// The launcher to use, given which binaries are on PATH.
pub fn resolve(provider: &Provider, on_path: impl Fn(&str) -> bool) -> Option<&'static Launcher> {
    provider.launchers.iter().find(|l| on_path(l.binary))
}

/// What a person must know before `drive` starts a provider: the exact
/// command lines, which pass every provider's flag for full tool autonomy
/// (no permission prompts). Built from the table, so it cannot go stale.
pub fn autonomy_notice() -> String {
    let mut text = String::from(
        "Providers run with full tool autonomy: each turn starts the agent CLI with its flags that skip every permission prompt, so the agent edits files and runs any command in --root as you, unattended. Run drive only where that is acceptable (a container, a VM, a throwaway checkout). The command lines:\n",
    );
    for provider in PROVIDERS {
        for launcher in provider.launchers {
            let argv = launcher.argv("<prompt>", "<root>");
            text.push_str(&format!(
                "  {:<12} {} {}\n",
                provider.name,
                launcher.binary,
                argv.join(" ")
            ));
        }
    }
    text
}

impl Launcher {
    /// argv (without the binary) for one turn with `prompt`, run in the
    /// project `root`.
    pub fn argv(&self, prompt: &str, root: &str) -> Vec<String> {
        let word = |s: &&str| if *s == ROOT { root } else { s }.to_owned();
        self.before
            .iter()
            .map(word)
            .chain([prompt.to_owned()])
            .chain(self.after.iter().map(word))
            .collect()
    }
}

/// Turn flags a reviewer never gets: every permission skip (a reviewer
/// reads what it is given; it never acts on the machine) and the
/// structured-output switches (its answer is read as plain text).
const TURN_ONLY: &[&str] = &[
    "--dangerously-skip-permissions",
    "--full-auto",
    "--allow-all-tools",
    "--yolo",
    "--auto",
    "--json",
    "--verbose",
];

/// Turn flags a reviewer never gets, with the value that follows them.
const TURN_ONLY_WITH_VALUE: &[&str] = &["--output-format"];

impl Launcher {
    /// argv (without the binary) for one panel review with `prompt`: the
    /// turn's argv, endpoint pins kept, minus [`TURN_ONLY`] flags, so the
    /// CLI runs with its own permission prompts (which a headless run
    /// cannot answer: every tool that needs one is denied).
    pub fn review_argv(&self, prompt: &str, root: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut words = self.argv(prompt, root).into_iter();
        while let Some(word) = words.next() {
            if TURN_ONLY_WITH_VALUE.contains(&word.as_str()) {
                words.next();
            } else if word == prompt || !TURN_ONLY.contains(&word.as_str()) {
                out.push(word);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reviewer_gets_no_autonomy_flag_and_keeps_its_endpoint_pins() {
        for provider in PROVIDERS {
            for launcher in provider.launchers {
                let argv = launcher.review_argv("PROMPT", "/r");
                assert!(argv.contains(&"PROMPT".to_owned()), "{argv:?}");
                for flag in TURN_ONLY.iter().chain(TURN_ONLY_WITH_VALUE) {
                    assert!(!argv.iter().any(|a| a == flag), "{flag} in {argv:?}");
                }
            }
        }
        let claude = find("claude").unwrap().launchers[0].review_argv("P", "/r");
        assert_eq!(claude, ["-p", "P"]);
        let codex = find("codex").unwrap().launchers[0].review_argv("P", "/r");
        assert_eq!(
            codex,
            [
                "exec",
                "--ignore-user-config",
                "-c",
                "model_provider=\"openai\"",
                "P"
            ]
        );
    }

    #[test]
    fn the_prompt_follows_print_flags_directly() {
        for provider in PROVIDERS {
            for launcher in provider.launchers {
                let argv = launcher.argv("PROMPT", "/root");
                let at = argv.iter().position(|a| a == "PROMPT").unwrap();
                if at > 0 && (argv[at - 1] == "-p" || argv[at - 1] == "--print") {
                    continue;
                }
                assert!(
                    !argv[..at].iter().any(|a| a == "-p"),
                    "{}: a flag sits between -p and the prompt: {argv:?}",
                    launcher.binary
                );
            }
        }
    }

    #[test]
    fn the_autonomy_notice_names_every_launcher_and_its_flags() {
        let notice = autonomy_notice();
        for provider in PROVIDERS {
            for launcher in provider.launchers {
                // The project-root placeholder is shown as `<root>`.
                for flag in launcher.before.iter().chain(launcher.after) {
                    let shown = if *flag == ROOT { "<root>" } else { flag };
                    assert!(notice.contains(shown), "{shown} missing from {notice}");
                }
            }
        }
        for flag in [
            "--dangerously-skip-permissions",
            "--full-auto",
            "--allow-all-tools",
            "--yolo",
        ] {
            assert!(notice.contains(flag), "{flag}");
        }
    }

    #[test]
    fn antigravity_falls_back_to_gemini_and_deepseek_to_its_aliases() {
        let gemini_only = |b: &str| b == "gemini";
        let launcher = resolve(find("antigravity").unwrap(), gemini_only).unwrap();
        assert_eq!(launcher.argv("P", "/r"), ["--yolo", "-p", "P"]);
        let launcher = resolve(find("codewhale").unwrap(), |b| b == "deepseek").unwrap();
        assert_eq!(launcher.binary, "deepseek");
        assert!(resolve(find("claude").unwrap(), |_| false).is_none());
        assert_eq!(
            find("claude").unwrap().launchers[0].argv("P", "/r")[..2],
            ["-p", "P"]
        );
    }

    #[test]
    fn codex_and_deepseek_are_pinned_to_their_own_endpoints() {
        let argv = |name: &str, binary: &str| {
            let launcher = resolve(find(name).unwrap(), |b| b == binary).unwrap();
            launcher.argv("P", "/proj")
        };
        assert_eq!(
            argv("codex", "codex"),
            [
                "exec",
                "--ignore-user-config",
                "-c",
                "model_provider=\"openai\"",
                "--full-auto",
                "--json",
                "P"
            ]
        );
        assert_eq!(
            argv("deepseek", "codewhale"),
            [
                "--provider",
                "deepseek",
                "--no-project-config",
                "-C",
                "/proj",
                "exec",
                "--auto",
                "P"
            ]
        );
        assert_eq!(
            argv("deepseek", "codewhale-tui"),
            [
                "-w",
                "/proj",
                "exec",
                "--provider",
                "deepseek",
                "--auto",
                "P"
            ]
        );
        assert_eq!(argv("grok", "grok-remote"), ["-p", "P", "--yolo"]);
        assert_eq!(argv("kimi", "kimi"), ["-p", "P", "--auto"]);
    }

    #[test]
    fn any_endpoint_override_makes_every_family_unverified() {
        let clean = |_: &str| None;
        let table = [
            ("claude", Family::Anthropic),
            ("codex", Family::Openai),
            ("deepseek", Family::Deepseek),
            ("codewhale", Family::Deepseek),
            ("antigravity", Family::Google),
            ("grok", Family::Xai),
            ("kimi", Family::Unverified),
            ("opencode", Family::Unverified),
            ("copilot", Family::Unverified),
        ];
        for (name, expected) in table {
            assert_eq!(family(find(name).unwrap(), clean), expected, "{name}");
        }
        for variable in ENDPOINT_OVERRIDES {
            let env = |name: &str| (name == *variable).then(|| "https://proxy.example".to_owned());
            for (name, _) in table {
                assert_eq!(
                    family(find(name).unwrap(), env),
                    Family::Unverified,
                    "{name} with {variable}"
                );
            }
        }
        let empty = |name: &str| (name == "OPENAI_BASE_URL").then(String::new);
        assert_eq!(family(find("codex").unwrap(), empty), Family::Openai);
        assert_eq!(names().len(), 8, "grok and kimi are in the table");
    }
}
