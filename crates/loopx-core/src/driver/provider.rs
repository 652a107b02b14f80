//! The provider table: how each agent CLI runs one headless turn, row by
//! row for the CLI versions each launch line was qualified against.
//!
//! Pure data plus the argv rule, the version rule and the family rule; the
//! adapter probes PATH, runs `--version` and reads the environment and
//! passes the answers in, so nothing here touches the machine.

use serde::{Deserialize, Serialize};

/// One way to launch a provider: one row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launcher {
    pub binary: &'static str,
    /// The CLI versions this launch line was run against.
    pub qualified: Qualified,
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
    /// OpenCode's `run --format json` events.
    OpencodeJson,
    /// Plain text only.
    Text,
}

/// A CLI's version, as its `--version` prints it (`2.1.197 (Claude
/// Code)`, `codex-cli 0.171.0`, `1.18.33`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl Version {
    pub const fn new(major: u64, minor: u64, patch: u64) -> Self {
        Version {
            major,
            minor,
            patch,
        }
    }

    /// The first `MAJOR.MINOR.PATCH` word in `text` (a leading `v` and
    /// a pre-release or build suffix allowed).
    pub fn find(text: &str) -> Option<Version> {
        text.split(|c: char| c.is_whitespace() || c == '(' || c == ')')
            .find_map(|word| {
                let word = word.strip_prefix('v').unwrap_or(word);
                let core = word.split(['-', '+']).next()?;
                let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
                let version = Version::new(parts.next()??, parts.next()??, parts.next()??);
                parts.next().is_none().then_some(version)
            })
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The versions of its CLI a row was run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qualified {
    /// Never run against a real CLI by the project: taken as documented.
    No,
    /// Run against the versions from `from` through `through`: the ones
    /// the hermetic suite and `scripts/record-agent-fixtures` exercised
    /// (today one per CLI, so `from == through`). Any other version runs
    /// on the nearest row, with a warning.
    Versions { from: Version, through: Version },
}

/// How an installed CLI's version stands against the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "fit")]
pub enum Fit {
    /// Within a row's qualified versions.
    Qualified,
    /// The table has no version rows for this CLI.
    Unqualified,
    /// Newer than every qualified version: the newest row is used.
    Newer { through: Version },
    /// Older than every qualified version: the oldest row is used.
    Older { from: Version },
    /// Between two rows' ranges: the row below is used.
    Between,
    /// `--version` gave nothing readable: the newest row is used.
    Unreadable,
}

impl Fit {
    /// What a person is told about running `binary` at `version`, when it
    /// is not one the table was qualified against.
    pub fn warning(self, binary: &str, version: Option<Version>) -> Option<String> {
        let shown = version.map_or("an unreadable version".to_owned(), |v| v.to_string());
        match self {
            Fit::Qualified | Fit::Unqualified => None,
            Fit::Newer { through } => Some(format!(
                "{binary} {shown} is newer than the newest version loopx was qualified against ({through}); using that version's launch line"
            )),
            Fit::Older { from } => Some(format!(
                "{binary} {shown} is older than every version loopx was qualified against (from {from}); using the oldest launch line: upgrade {binary}"
            )),
            Fit::Between => Some(format!(
                "{binary} {shown} was not qualified; using the launch line of the version below it"
            )),
            Fit::Unreadable => Some(format!(
                "`{binary} --version` printed no version; using the newest launch line"
            )),
        }
    }
}

/// The row of the table chosen for an installed CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    pub launcher: &'static Launcher,
    pub version: Option<Version>,
    pub fit: Fit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provider {
    pub name: &'static str,
    /// The model family a pinned launch reaches, for family attribution
    /// (a reviewer of another family is independent).
    pub family: Family,
    /// How the CLI is pointed at another endpoint (see [`endpoint_launch`]).
    pub endpoint: Endpoint,
    /// The variable that pins its model, and the flag the CLI takes it
    /// with (see [`pin_args`]).
    pub model_pin: ModelPin,
    /// How its reasoning effort is pinned, when it can be.
    pub thinking_pin: Option<ThinkingPin>,
    /// The CLI refuses its autonomy flag when run as root, unless this
    /// variable says the machine is a sandbox (see [`root_refusal`]).
    pub refuses_root_unless: Option<&'static str>,
    /// Tried in order; the first binary on PATH is used, with the row
    /// for its version ([`choose`]).
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
/// override is set (to anything non-empty), loopx's own
/// `AAS_AUTOLOOP_<PROVIDER>_BASE_URL` included.
pub fn family(provider: &Provider, env: impl Fn(&str) -> Option<String>) -> Family {
    let own = base_url_variable(provider.name);
    let overridden = ENDPOINT_OVERRIDES
        .iter()
        .copied()
        .chain([own.as_str()])
        .any(|name| env(name).is_some_and(|value| !value.is_empty()));
    if overridden {
        Family::Unverified
    } else {
        provider.family
    }
}

/// How a provider's CLI is pointed at another model API endpoint: what
/// `AAS_AUTOLOOP_<PROVIDER>_BASE_URL` becomes for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// The CLI reads the base URL from this variable.
    Env(&'static str),
    /// Codex ignores `OPENAI_BASE_URL`: a provider of its own, defined by
    /// `-c` overrides, replaces the pin to the built-in OpenAI one.
    CodexProvider,
    /// OpenCode: its Anthropic and OpenAI providers' `baseURL`, in the
    /// config it reads from `OPENCODE_CONFIG_CONTENT` (merged over the
    /// user's).
    OpencodeConfig,
    /// No way known: the setting is refused for this provider.
    None,
}

/// The variable that sets `provider`'s endpoint.
pub fn base_url_variable(provider: &str) -> String {
    format!("AAS_AUTOLOOP_{}_BASE_URL", provider.to_uppercase())
}

/// A turn's command line and the variables it adds to the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub args: Vec<String>,
    pub env: Vec<(&'static str, String)>,
}

/// A base URL loopx passes on: `http://` or `https://`, no whitespace,
/// quotes, backslashes or control characters (it is written into a TOML
/// or JSON string for some CLIs).
pub fn check_base_url(url: &str) -> Result<(), String> {
    let host = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    let scheme = host.is_some_and(|rest| !rest.is_empty());
    let clean = !url
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\\' | '\''));
    if scheme && clean {
        Ok(())
    } else {
        Err(format!(
            "{url:?} is not an http:// or https:// URL without spaces or quotes"
        ))
    }
}

/// Whether `url` can be `provider`'s endpoint setting: the provider has a
/// known way to take one, and it is a usable URL. The error names the
/// variable.
pub fn check_endpoint(provider: &Provider, url: &str) -> Result<(), String> {
    let variable = base_url_variable(provider.name);
    if provider.endpoint == Endpoint::None {
        return Err(format!(
            "{variable} is set, but loopx knows no way to point {} at another endpoint; unset it",
            provider.name
        ));
    }
    check_base_url(url).map_err(|e| format!("{variable}: {e}"))
}

/// The name Codex's provider for an endpoint override gets.
const CODEX_ENDPOINT_PROVIDER: &str = "loopx_endpoint";

/// The command line and environment of one turn of `provider` with
/// `launcher`, pointed at `base_url` when one is set. `Err`: the provider
/// has no known way to change its endpoint, or the URL is unusable.
pub fn endpoint_launch(
    provider: &Provider,
    launcher: &Launcher,
    prompt: &str,
    root: &str,
    base_url: Option<&str>,
) -> Result<Launch, String> {
    point_at(provider, launcher.argv(prompt, root), base_url)
}

/// `args`, a command line of `provider` (a turn's, or a panel reviewer's
/// [`Launcher::review_argv`]), pointed at `base_url` when one is set: the
/// one rule for how each CLI takes an endpoint.
pub fn point_at(
    provider: &Provider,
    mut args: Vec<String>,
    base_url: Option<&str>,
) -> Result<Launch, String> {
    let Some(url) = base_url else {
        return Ok(Launch {
            args,
            env: Vec::new(),
        });
    };
    let variable = base_url_variable(provider.name);
    check_endpoint(provider, url)?;
    let mut env = Vec::new();
    match provider.endpoint {
        Endpoint::Env(name) => env.push((name, url.to_owned())),
        Endpoint::CodexProvider => {
            let pin = args.iter().position(|a| a == CODEX_OPENAI);
            let definition = format!(
                "model_providers.{CODEX_ENDPOINT_PROVIDER}={{name=\"{CODEX_ENDPOINT_PROVIDER}\",base_url=\"{url}\",wire_api=\"responses\",env_key=\"OPENAI_API_KEY\"}}"
            );
            let select = format!("model_provider=\"{CODEX_ENDPOINT_PROVIDER}\"");
            match pin {
                Some(at) => {
                    args[at] = select;
                    args.splice(at..at, [definition, "-c".to_owned()]);
                }
                None => {
                    return Err(format!(
                        "{variable}: this codex launch line has no provider pin to replace"
                    ))
                }
            }
        }
        Endpoint::OpencodeConfig => {
            let options = serde_json::json!({ "options": { "baseURL": url } });
            let config = serde_json::json!({
                "provider": { "anthropic": options, "openai": options }
            });
            env.push(("OPENCODE_CONFIG_CONTENT", config.to_string()));
        }
        // Refused above.
        Endpoint::None => {}
    }
    Ok(Launch { args, env })
}

/// A provider's model pin: `variable` (`AAS_<PROVIDER>_LATEST_MODEL`)
/// becomes `flag <value>` on its command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelPin {
    pub variable: &'static str,
    pub flag: &'static str,
}

/// A provider's reasoning-effort pin (`AAS_<PROVIDER>_HIGHEST_THINKING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingPin {
    /// `flag <value>`.
    Flag {
        variable: &'static str,
        flag: &'static str,
    },
    /// `-c key="<value>"`: a Codex config override.
    CodexConfig {
        variable: &'static str,
        key: &'static str,
    },
}

impl ThinkingPin {
    pub fn variable(self) -> &'static str {
        match self {
            ThinkingPin::Flag { variable, .. } | ThinkingPin::CodexConfig { variable, .. } => {
                variable
            }
        }
    }
}

/// The longest pin value taken (a model id or an effort level).
pub const PIN_MAX_CHARS: usize = 128;

/// Whether `value` of pin `variable` can go on a command line as one
/// flag's value: not empty, at most [`PIN_MAX_CHARS`], no whitespace,
/// control characters, quotes or backslashes (it is written into a TOML
/// string for Codex), and not starting with `-`, so it can never be read
/// as a flag. The error names the variable.
pub fn check_pin(variable: &str, value: &str) -> Result<(), String> {
    let bad = value.is_empty()
        || value.chars().count() > PIN_MAX_CHARS
        || value.starts_with('-')
        || value
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\' | '`'));
    if bad {
        Err(format!(
            "{variable}={value:?} is not a usable pin: it must be 1 to {PIN_MAX_CHARS} characters without spaces, quotes, backslashes or control characters, and must not start with '-'; fix or unset it"
        ))
    } else {
        Ok(())
    }
}

/// The pins set for `provider` in an environment where `env(name)` reads
/// a variable: `(variable, value)` for its model pin, then its thinking
/// pin, each when set and not empty. Values are not checked here.
pub fn pins_set(
    provider: &Provider,
    env: impl Fn(&str) -> Option<String>,
) -> Vec<(&'static str, String)> {
    [
        Some(provider.model_pin.variable),
        provider.thinking_pin.map(ThinkingPin::variable),
    ]
    .into_iter()
    .flatten()
    .filter_map(|variable| {
        env(variable)
            .filter(|value| !value.is_empty())
            .map(|value| (variable, value))
    })
    .collect()
}

/// The arguments `provider`'s model and thinking pins add to the end of
/// any of its command lines (a turn's, a reviewer's): `--model X` (`-m X`
/// for grok and kimi), claude's `--effort Y`, codex's
/// `-c model_reasoning_effort="Y"`. The one rule for pins; a pin never
/// changes the provider's [`family`]. `Err`: a set pin is not usable
/// ([`check_pin`]), naming its variable; a bad pin is never skipped.
pub fn pin_args(
    provider: &Provider,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    for (variable, value) in pins_set(provider, &env) {
        check_pin(variable, &value)?;
        if variable == provider.model_pin.variable {
            args.extend([provider.model_pin.flag.to_owned(), value]);
            continue;
        }
        match provider.thinking_pin {
            Some(ThinkingPin::Flag { flag, .. }) => args.extend([flag.to_owned(), value]),
            Some(ThinkingPin::CodexConfig { key, .. }) => {
                args.extend(["-c".to_owned(), format!("{key}=\"{value}\"")])
            }
            None => {}
        }
    }
    Ok(args)
}

/// Under an attested launch, which always runs `attested_model`: a model
/// pin set to another model is refused (naming both); an equal one, or
/// none, is fine, and the attested launch adds the model once.
pub fn check_attested_model(
    provider: &Provider,
    env: impl Fn(&str) -> Option<String>,
    attested_model: &str,
) -> Result<(), String> {
    let variable = provider.model_pin.variable;
    match env(variable).filter(|value| !value.is_empty()) {
        Some(pinned) if pinned != attested_model => Err(format!(
            "{variable}={pinned:?} conflicts with the attested model {attested_model:?} (AAS_AUTOLOOP_ATTESTED_MODEL_{}); unset it or make them equal",
            provider.name.to_uppercase()
        )),
        _ => Ok(()),
    }
}

/// Every pin variable in the table, in table order, each once.
pub fn pin_variables() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for provider in PROVIDERS {
        for variable in [
            Some(provider.model_pin.variable),
            provider.thinking_pin.map(ThinkingPin::variable),
        ]
        .into_iter()
        .flatten()
        {
            if !out.contains(&variable) {
                out.push(variable);
            }
        }
    }
    out
}

const fn model_pin(variable: &'static str) -> ModelPin {
    ModelPin {
        variable,
        flag: "--model",
    }
}

/// What a person running `provider` as root must do first, when its CLI
/// refuses its autonomy flag as root and `env(name)` does not already say
/// the machine is a sandbox.
pub fn root_refusal(
    provider: &Provider,
    root: bool,
    env: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let variable = provider.refuses_root_unless?;
    let sandbox = env(variable).is_some_and(|v| !v.is_empty() && v != "0");
    (root && !sandbox).then(|| {
        format!(
            "{} refuses its autonomy flag as root: run drive as another user, or set {variable}=1 where the machine really is a sandbox (a container or VM with nothing else to lose)",
            provider.name
        )
    })
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
        qualified: Qualified::No,
        before,
        after,
        structured: Structured::Text,
    }
}

/// The versions `scripts/record-agent-fixtures` installs and the hermetic
/// suite (`crates/loopx/tests/agents.rs`) runs: the `through` of each
/// qualified row. `.ci/run` pins the same ones.
pub const CLAUDE_QUALIFIED: Version = Version::new(2, 1, 197);
pub const CODEX_QUALIFIED: Version = Version::new(0, 171, 0);
pub const OPENCODE_QUALIFIED: Version = Version::new(1, 18, 33);

/// The table of the runtime spec, pinned as the reference pins it: codex
/// to its built-in OpenAI provider without the user's config, deepseek to
/// the official endpoint without the project's config. `-p`/`--print`
/// consumes the next argv word as the prompt, so nothing ever stands
/// between `-p` and the prompt. Rows of one binary are oldest first; a
/// CLI whose flags change gets a new row, never an edited one.
pub const PROVIDERS: &[Provider] = &[
    Provider {
        name: "claude",
        family: Family::Anthropic,
        endpoint: Endpoint::Env("ANTHROPIC_BASE_URL"),
        model_pin: model_pin("AAS_CLAUDE_LATEST_MODEL"),
        thinking_pin: Some(ThinkingPin::Flag {
            variable: "AAS_CLAUDE_HIGHEST_THINKING",
            flag: "--effort",
        }),
        // "--dangerously-skip-permissions cannot be used with root/sudo
        // privileges for security reasons" (2.1.197).
        refuses_root_unless: Some("IS_SANDBOX"),
        launchers: &[Launcher {
            binary: "claude",
            qualified: Qualified::Versions {
                from: CLAUDE_QUALIFIED,
                through: CLAUDE_QUALIFIED,
            },
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
        endpoint: Endpoint::CodexProvider,
        model_pin: model_pin("AAS_CODEX_LATEST_MODEL"),
        thinking_pin: Some(ThinkingPin::CodexConfig {
            variable: "AAS_CODEX_HIGHEST_THINKING",
            key: "model_reasoning_effort",
        }),
        refuses_root_unless: None,
        // 0.171 dropped `--full-auto`; outside a git repository (or a
        // project it trusts) exec refuses to run without
        // `--skip-git-repo-check`; its shell tool runs a login shell by
        // default, whose profile (Debian's, as root) resets PATH and loses
        // the loopx the driver puts first on it.
        launchers: &[Launcher {
            binary: "codex",
            qualified: Qualified::Versions {
                from: CODEX_QUALIFIED,
                through: CODEX_QUALIFIED,
            },
            before: &[
                "exec",
                "--ignore-user-config",
                "-c",
                CODEX_OPENAI,
                "-c",
                "allow_login_shell=false",
                "--dangerously-bypass-approvals-and-sandbox",
                "--skip-git-repo-check",
                "--json",
            ],
            after: &[],
            structured: Structured::CodexJson,
        }],
    },
    Provider {
        name: "deepseek",
        family: Family::Deepseek,
        endpoint: Endpoint::None,
        model_pin: model_pin("AAS_DEEPSEEK_LATEST_MODEL"),
        thinking_pin: None,
        refuses_root_unless: None,
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
        endpoint: Endpoint::OpencodeConfig,
        model_pin: model_pin("AAS_OPENCODE_LATEST_MODEL"),
        thinking_pin: None,
        refuses_root_unless: None,
        // `--auto`: approve every permission not explicitly denied (an
        // unattended turn cannot answer a prompt).
        launchers: &[Launcher {
            binary: "opencode",
            qualified: Qualified::Versions {
                from: OPENCODE_QUALIFIED,
                through: OPENCODE_QUALIFIED,
            },
            before: &["run", "--format", "json", "--auto"],
            after: &[],
            structured: Structured::OpencodeJson,
        }],
    },
    Provider {
        name: "copilot",
        family: Family::Unverified,
        endpoint: Endpoint::None,
        model_pin: model_pin("AAS_COPILOT_LATEST_MODEL"),
        thinking_pin: None,
        refuses_root_unless: None,
        launchers: &[text("copilot", &["-p"], &["--allow-all-tools"])],
    },
    Provider {
        name: "antigravity",
        family: Family::Google,
        endpoint: Endpoint::None,
        model_pin: model_pin("AAS_ANTIGRAVITY_LATEST_MODEL"),
        thinking_pin: None,
        refuses_root_unless: None,
        launchers: &[
            text("agy", &["-p"], &["--dangerously-skip-permissions"]),
            text("gemini", &["--yolo", "-p"], &[]),
        ],
    },
    Provider {
        name: "grok",
        family: Family::Xai,
        endpoint: Endpoint::None,
        model_pin: ModelPin {
            variable: "AAS_GROK_LATEST_MODEL",
            flag: "-m",
        },
        thinking_pin: None,
        refuses_root_unless: None,
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
        endpoint: Endpoint::None,
        model_pin: ModelPin {
            variable: "AAS_KIMI_LATEST_MODEL",
            flag: "-m",
        },
        thinking_pin: None,
        refuses_root_unless: None,
        launchers: &[text("kimi", &["-p"], &["--auto"])],
    },
];

/// Codex's pin to its built-in OpenAI provider.
const CODEX_OPENAI: &str = "model_provider=\"openai\"";

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

/// The row to use, given which binaries are on PATH and the version of
/// the first one found (`version` is asked only about that binary, and
/// only when it has qualified rows).
pub fn choose(
    provider: &Provider,
    on_path: impl Fn(&str) -> bool,
    version: impl FnOnce(&str) -> Option<Version>,
) -> Option<Choice> {
    let binary = provider
        .launchers
        .iter()
        .find(|l| on_path(l.binary))?
        .binary;
    let rows: Vec<&'static Launcher> = provider
        .launchers
        .iter()
        .filter(|l| l.binary == binary)
        .collect();
    let ranges: Vec<(&'static Launcher, Version, Version)> = rows
        .iter()
        .filter_map(|l| match l.qualified {
            Qualified::Versions { from, through } => Some((*l, from, through)),
            Qualified::No => None,
        })
        .collect();
    let (Some(oldest), Some(newest)) = (ranges.first(), ranges.last()) else {
        return Some(Choice {
            launcher: rows[0],
            version: None,
            fit: Fit::Unqualified,
        });
    };
    let found = version(binary);
    let choice = |launcher, fit| Choice {
        launcher,
        version: found,
        fit,
    };
    let Some(v) = found else {
        return Some(choice(newest.0, Fit::Unreadable));
    };
    Some(
        if let Some(row) = ranges.iter().find(|r| r.1 <= v && v <= r.2) {
            choice(row.0, Fit::Qualified)
        } else if v > newest.2 {
            choice(newest.0, Fit::Newer { through: newest.2 })
        } else if v < oldest.1 {
            choice(oldest.0, Fit::Older { from: oldest.1 })
        } else {
            let below = ranges.iter().rev().find(|r| r.1 <= v).unwrap_or(oldest);
            choice(below.0, Fit::Between)
        },
    )
}

/// The launcher to use when no version is known (printing a command,
/// choosing a binary): the newest row of the first binary on PATH.
pub fn resolve(provider: &Provider, on_path: impl Fn(&str) -> bool) -> Option<&'static Launcher> {
    let binary = provider
        .launchers
        .iter()
        .find(|l| on_path(l.binary))?
        .binary;
    provider.launchers.iter().rfind(|l| l.binary == binary)
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
    "--dangerously-bypass-approvals-and-sandbox",
    "--allow-all-tools",
    "--yolo",
    "--auto",
    "--json",
    "--verbose",
];

/// Turn flags a reviewer never gets, with the value that follows them.
const TURN_ONLY_WITH_VALUE: &[&str] = &["--output-format", "--format"];

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
                "-c",
                "allow_login_shell=false",
                "--skip-git-repo-check",
                "P"
            ]
        );
        let opencode = find("opencode").unwrap().launchers[0].review_argv("P", "/r");
        assert_eq!(opencode, ["run", "P"]);
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
            "--dangerously-bypass-approvals-and-sandbox",
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
                "-c",
                "allow_login_shell=false",
                "--dangerously-bypass-approvals-and-sandbox",
                "--skip-git-repo-check",
                "--json",
                "P"
            ]
        );
        assert_eq!(
            argv("opencode", "opencode"),
            ["run", "--format", "json", "--auto", "P"]
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
        let own = |name: &str| {
            (name == "AAS_AUTOLOOP_CODEX_BASE_URL").then(|| "http://127.0.0.1:9".to_owned())
        };
        assert_eq!(family(find("codex").unwrap(), own), Family::Unverified);
        assert_eq!(family(find("claude").unwrap(), own), Family::Anthropic);
        let empty = |name: &str| (name == "OPENAI_BASE_URL").then(String::new);
        assert_eq!(family(find("codex").unwrap(), empty), Family::Openai);
        assert_eq!(names().len(), 8, "grok and kimi are in the table");
    }
    #[test]
    fn versions_are_read_from_what_each_cli_prints() {
        assert_eq!(
            Version::find("2.1.197 (Claude Code)"),
            Some(Version::new(2, 1, 197))
        );
        assert_eq!(
            Version::find("codex-cli 0.171.0"),
            Some(Version::new(0, 171, 0))
        );
        assert_eq!(Version::find("1.18.33\n"), Some(Version::new(1, 18, 33)));
        assert_eq!(Version::find("v3.0.1-beta.2"), Some(Version::new(3, 0, 1)));
        assert_eq!(Version::find("no version here 1.2"), None);
    }

    #[test]
    fn a_cli_version_picks_its_row_and_an_unknown_one_the_nearest_with_a_warning() {
        let codex = find("codex").unwrap();
        let on = |b: &str| b == "codex";
        let at = |v: Option<Version>| choose(codex, on, |_| v).unwrap();
        let qualified = at(Some(CODEX_QUALIFIED));
        assert_eq!(qualified.fit, Fit::Qualified);
        assert_eq!(qualified.fit.warning("codex", qualified.version), None);
        let newer = at(Some(Version::new(0, 200, 0)));
        assert_eq!(
            newer.fit,
            Fit::Newer {
                through: CODEX_QUALIFIED
            }
        );
        assert_eq!(newer.launcher, codex.launchers.last().unwrap());
        let warning = newer.fit.warning("codex", newer.version).unwrap();
        assert!(
            warning.contains("0.200.0") && warning.contains("0.171.0"),
            "{warning}"
        );
        assert!(matches!(
            at(Some(Version::new(0, 100, 0))).fit,
            Fit::Older { .. }
        ));
        assert_eq!(at(None).fit, Fit::Unreadable);
        // A provider the project never ran is used as documented, unprobed.
        let copilot = choose(
            find("copilot").unwrap(),
            |_| true,
            |_| panic!("an unqualified CLI is not probed"),
        )
        .unwrap();
        assert_eq!(copilot.fit, Fit::Unqualified);
        for name in ["claude", "codex", "opencode"] {
            let provider = find(name).unwrap();
            assert!(
                provider
                    .launchers
                    .iter()
                    .all(|l| matches!(l.qualified, Qualified::Versions { .. })),
                "{name}: every row of a CLI the suite runs names its versions"
            );
        }
    }

    #[test]
    fn an_endpoint_setting_reaches_each_cli_the_way_it_reads_one() {
        let url = "http://127.0.0.1:9/v1";
        let launch = |name: &str| {
            let provider = find(name).unwrap();
            endpoint_launch(provider, &provider.launchers[0], "P", "/r", Some(url))
        };
        let claude = launch("claude").unwrap();
        assert_eq!(claude.env, [("ANTHROPIC_BASE_URL", url.to_owned())]);
        assert_eq!(
            claude.args,
            find("claude").unwrap().launchers[0].argv("P", "/r")
        );
        let codex = launch("codex").unwrap();
        assert!(codex.env.is_empty());
        assert!(
            !codex.args.contains(&CODEX_OPENAI.to_owned()),
            "{:?}",
            codex.args
        );
        let joined = codex.args.join(" ");
        assert!(
            joined.contains("-c model_providers.loopx_endpoint={name=\"loopx_endpoint\",base_url=\"http://127.0.0.1:9/v1\",wire_api=\"responses\",env_key=\"OPENAI_API_KEY\"} -c model_provider=\"loopx_endpoint\""),
            "{joined}"
        );
        let opencode = launch("opencode").unwrap();
        let (name, config) = &opencode.env[0];
        assert_eq!(*name, "OPENCODE_CONFIG_CONTENT");
        let config: serde_json::Value = serde_json::from_str(config).unwrap();
        assert_eq!(config["provider"]["anthropic"]["options"]["baseURL"], url);
        let refused = launch("copilot").unwrap_err();
        assert!(
            refused.contains("AAS_AUTOLOOP_COPILOT_BASE_URL"),
            "{refused}"
        );
        let provider = find("claude").unwrap();
        for bad in [
            "ftp://x",
            "http://a b",
            "http://x\"y",
            "https://",
            "http://",
        ] {
            assert!(
                endpoint_launch(provider, &provider.launchers[0], "P", "/r", Some(bad)).is_err(),
                "{bad}"
            );
        }
        assert!(endpoint_launch(
            provider,
            &provider.launchers[0],
            "P",
            "/r",
            Some("http://x")
        )
        .is_ok());
        let plain = endpoint_launch(provider, &provider.launchers[0], "P", "/r", None).unwrap();
        assert!(plain.env.is_empty());
    }
    #[test]
    fn each_pin_becomes_its_providers_flag_at_the_end_and_the_family_stays() {
        let pinned = |name: &str, vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            let env = move |n: &str| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
            let provider = find(name).unwrap();
            assert_eq!(family(provider, &env), family(provider, |_| None), "{name}");
            pin_args(provider, env)
        };
        let claude = pinned(
            "claude",
            &[
                ("AAS_CLAUDE_LATEST_MODEL", "claude-x-1"),
                ("AAS_CLAUDE_HIGHEST_THINKING", "max"),
            ],
        );
        assert_eq!(
            claude.unwrap(),
            ["--model", "claude-x-1", "--effort", "max"]
        );
        let codex = pinned(
            "codex",
            &[
                ("AAS_CODEX_LATEST_MODEL", "gpt-x"),
                ("AAS_CODEX_HIGHEST_THINKING", "xhigh"),
            ],
        );
        assert_eq!(
            codex.unwrap(),
            ["--model", "gpt-x", "-c", "model_reasoning_effort=\"xhigh\""]
        );
        for (name, variable, flag) in [
            ("deepseek", "AAS_DEEPSEEK_LATEST_MODEL", "--model"),
            ("codewhale", "AAS_DEEPSEEK_LATEST_MODEL", "--model"),
            ("opencode", "AAS_OPENCODE_LATEST_MODEL", "--model"),
            ("copilot", "AAS_COPILOT_LATEST_MODEL", "--model"),
            ("antigravity", "AAS_ANTIGRAVITY_LATEST_MODEL", "--model"),
            ("grok", "AAS_GROK_LATEST_MODEL", "-m"),
            ("kimi", "AAS_KIMI_LATEST_MODEL", "-m"),
        ] {
            assert_eq!(
                pinned(name, &[(variable, "vendor/m-1.5:x@y")]).unwrap(),
                [flag, "vendor/m-1.5:x@y"],
                "{name}"
            );
            // Another provider's pins and thinking pins are not its own.
            assert!(pinned(
                name,
                &[
                    ("AAS_CLAUDE_HIGHEST_THINKING", "max"),
                    ("AAS_CODEX_HIGHEST_THINKING", "max")
                ]
            )
            .unwrap()
            .is_empty());
        }
        assert!(pinned("claude", &[("AAS_CLAUDE_LATEST_MODEL", "")])
            .unwrap()
            .is_empty());
        assert_eq!(pin_variables().len(), 10);
    }

    #[test]
    fn an_unusable_pin_is_refused_naming_its_variable_never_skipped() {
        let claude = find("claude").unwrap();
        let long = "m".repeat(PIN_MAX_CHARS + 1);
        for bad in [
            "--dangerously-skip-permissions",
            "-x",
            "two words",
            "tab\there",
            "new\nline",
            "quo\"te",
            "it's",
            "back\\slash",
            long.as_str(),
        ] {
            for variable in ["AAS_CLAUDE_LATEST_MODEL", "AAS_CLAUDE_HIGHEST_THINKING"] {
                let env = |n: &str| (n == variable).then(|| bad.to_owned());
                let refused = pin_args(claude, env).unwrap_err();
                assert!(refused.contains(variable), "{refused}");
            }
        }
        let fine = "m".repeat(PIN_MAX_CHARS);
        assert!(check_pin("V", &fine).is_ok());
    }

    #[test]
    fn an_attested_launch_refuses_a_different_model_pin_and_takes_an_equal_one() {
        let claude = find("claude").unwrap();
        let pin =
            |v: &'static str| move |n: &str| (n == "AAS_CLAUDE_LATEST_MODEL").then(|| v.to_owned());
        assert!(check_attested_model(claude, pin("claude-a"), "claude-a").is_ok());
        assert!(check_attested_model(claude, |_| None, "claude-a").is_ok());
        let refused = check_attested_model(claude, pin("claude-b"), "claude-a").unwrap_err();
        assert!(
            refused.contains("AAS_CLAUDE_LATEST_MODEL") && refused.contains("claude-a"),
            "{refused}"
        );
    }

    #[test]
    fn claude_as_root_outside_a_sandbox_is_told_what_to_do_and_nobody_else_is() {
        let claude = find("claude").unwrap();
        let unset = |_: &str| None;
        let advice = root_refusal(claude, true, unset).unwrap();
        assert!(
            advice.contains("IS_SANDBOX=1") && advice.contains("another user"),
            "{advice}"
        );
        let sandbox = |name: &str| (name == "IS_SANDBOX").then(|| "1".to_owned());
        assert_eq!(root_refusal(claude, true, sandbox), None);
        assert_eq!(root_refusal(claude, false, unset), None);
        assert_eq!(root_refusal(find("codex").unwrap(), true, unset), None);
    }
    #[test]
    fn with_several_rows_a_version_takes_its_own_and_a_gap_the_row_below() {
        const fn row(from: Version, through: Version) -> Launcher {
            Launcher {
                binary: "cli",
                qualified: Qualified::Versions { from, through },
                before: &[],
                after: &[],
                structured: Structured::Text,
            }
        }
        static ROWS: [Launcher; 2] = [
            row(Version::new(1, 0, 0), Version::new(1, 2, 0)),
            row(Version::new(2, 0, 0), Version::new(2, 1, 0)),
        ];
        let provider = Provider {
            name: "cli",
            family: Family::Unverified,
            endpoint: Endpoint::None,
            model_pin: model_pin("AAS_CLI_LATEST_MODEL"),
            thinking_pin: None,
            refuses_root_unless: None,
            launchers: &ROWS,
        };
        let at = |major, minor| {
            let choice = choose(&provider, |_| true, |_| Some(Version::new(major, minor, 0)));
            let choice = choice.unwrap();
            let row = ROWS.iter().position(|r| std::ptr::eq(r, choice.launcher));
            (row.unwrap(), choice.fit)
        };
        assert_eq!(at(1, 1), (0, Fit::Qualified));
        assert_eq!(at(2, 1), (1, Fit::Qualified));
        assert_eq!(at(1, 5), (0, Fit::Between));
        assert!(matches!(at(3, 0), (1, Fit::Newer { .. })));
        assert!(matches!(at(0, 9), (0, Fit::Older { .. })));
    }
}
