//! The provider table: how each agent CLI runs one headless turn.
//!
//! Pure data plus the argv rule; the adapter probes PATH and passes the
//! answer in, so nothing here touches the machine.

use serde::Serialize;

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
    /// Tried in order; the first whose binary is on PATH is used.
    pub launchers: &'static [Launcher],
}

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

/// The table of the runtime spec. `-p`/`--print` consumes the next argv
/// word as the prompt, so nothing ever stands between `-p` and the prompt.
pub const PROVIDERS: &[Provider] = &[
    Provider {
        name: "claude",
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
        launchers: &[Launcher {
            binary: "codex",
            before: &["exec", "--full-auto", "--json"],
            after: &[],
            structured: Structured::CodexJson,
        }],
    },
    Provider {
        name: "deepseek",
        launchers: &[
            text("codewhale", &["exec", "--auto"], &[]),
            text("codewhale-tui", &["exec", "--auto"], &[]),
            text("deepseek", &["exec", "--auto"], &[]),
        ],
    },
    Provider {
        name: "opencode",
        launchers: &[text("opencode", &["run"], &[])],
    },
    Provider {
        name: "copilot",
        launchers: &[text("copilot", &["-p"], &["--allow-all-tools"])],
    },
    Provider {
        name: "antigravity",
        launchers: &[
            text("agy", &["-p"], &["--dangerously-skip-permissions"]),
            text("gemini", &["--yolo", "-p"], &[]),
        ],
    },
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
            let argv = launcher.argv("<prompt>");
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
    /// argv (without the binary) for one turn with `prompt`.
    pub fn argv(&self, prompt: &str) -> Vec<String> {
        self.before
            .iter()
            .map(|s| (*s).to_owned())
            .chain([prompt.to_owned()])
            .chain(self.after.iter().map(|s| (*s).to_owned()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_follows_print_flags_directly() {
        for provider in PROVIDERS {
            for launcher in provider.launchers {
                let argv = launcher.argv("PROMPT");
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
                for flag in launcher.before.iter().chain(launcher.after) {
                    assert!(notice.contains(flag), "{flag} missing from {notice}");
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
        assert_eq!(launcher.argv("P"), ["--yolo", "-p", "P"]);
        let launcher = resolve(find("codewhale").unwrap(), |b| b == "deepseek").unwrap();
        assert_eq!(launcher.binary, "deepseek");
        assert!(resolve(find("claude").unwrap(), |_| false).is_none());
        assert_eq!(
            find("claude").unwrap().launchers[0].argv("P")[..2],
            ["-p", "P"]
        );
    }
}
