//! The formal (Lean) policy: an opt-in that adds Lean formalization rules
//! to the turn prompt and, at its strongest, lets the host run a hygiene
//! tick (a scan and, if asked, a Lake typecheck) after an ok turn.
//!
//! Owns, as pure rules: the five policy values ([`Policy`]), how the
//! sources of a setting are read ([`Layer::parse_json`], [`Layer::from_env`])
//! and stacked ([`Settings::resolve`]: defaults, then `formal/formal_policy.json`,
//! then the standing orders, then the environment, then the flags; the
//! default policy is `off`), what the agent's environment is told
//! ([`Settings::env`]), the pin a drive writes at its start ([`Pin`]), the
//! prompt section ([`prompt()`]), the standing orders and the force tick's
//! credits ([`owner`]), the tick's report ([`tick`]) and which proof
//! artifacts the host re-checks ([`recheck`]).
//!
//! Unlike the reference runtime, which reads a value it does not know as
//! `off`, a value that is not one is refused with its source named: an
//! operator who typed `forse` learns it before anything runs.
//!
//! Not here: the files, the environment and the processes
//! (`loopx_app::formal`).

pub mod owner;
pub mod prompt;
pub mod recheck;
pub mod tick;

pub use owner::{FormalOwner, FormalProblem, Standing, STREAM};
pub use prompt::{prompt, Situation};

use crate::path::LoopPath;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The policy file, in the loop directory, as the reference runtime names it.
pub const FILE: &str = "formal/formal_policy.json";
/// What a drive resolved at its start, in the loop directory.
pub const PIN_FILE: &str = "formal/host_policy.pin.json";
/// The force tick's reports, one a tick, in the loop directory.
pub const REPORTS: &str = "formal/force_loop_reports";
/// The largest policy file read.
pub const MAX_BYTES: u64 = 64 * 1024;

pub const SCHEMA: &str = "formal_policy.v1";
pub const DEFAULT_PROJECT: &str = "formal/";
pub const DEFAULT_CREDITS: u32 = 3;

/// The variables a user sets, and the driver exports to the agent.
pub const ENV_POLICY: &str = "AAS_AUTOLOOP_FORMAL_POLICY";
pub const ENV_PROJECT: &str = "AAS_AUTOLOOP_FORMAL_PROJECT";
pub const ENV_FORCE: &str = "AAS_AUTOLOOP_FORMAL_FORCE";
pub const ENV_TYPECHECK: &str = "AAS_AUTOLOOP_FORMAL_TYPECHECK";
pub const ENV_FORCE_CREDITS: &str = "AAS_AUTOLOOP_FORMAL_FORCE_CREDITS";
/// The host typecheck's time limit in seconds (600 unless set; kept
/// between 60 and 3600, as the reference does, and never past the drive's
/// `--iteration-timeout`).
pub const ENV_TYPECHECK_TIMEOUT: &str = "AAS_AUTOLOOP_FORMAL_TYPECHECK_TIMEOUT";

/// How much the formal policy asks of a turn, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// No formal section at all (the default).
    Off,
    /// A short reminder that Lean is optional.
    MentionOnly,
    /// The binding rules only once a stable formal candidate or the formal
    /// track is there.
    Auto,
    /// The binding rules on the formal track; parked otherwise.
    On,
    /// The binding rules always, and the host's hygiene tick when the
    /// operator also turns it on.
    Force,
}

impl Policy {
    pub const ALL: [Policy; 5] = [
        Policy::Off,
        Policy::MentionOnly,
        Policy::Auto,
        Policy::On,
        Policy::Force,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Off => "off",
            Policy::MentionOnly => "mention-only",
            Policy::Auto => "auto",
            Policy::On => "on",
            Policy::Force => "force",
        }
    }

    pub fn names() -> [&'static str; 5] {
        Policy::ALL.map(Policy::as_str)
    }

    /// A policy word, in any case and with blanks around it.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let word = text.trim().to_ascii_lowercase();
        Policy::ALL
            .into_iter()
            .find(|p| p.as_str() == word)
            .ok_or_else(|| {
                format!(
                    "{text:?} is not a formal policy; use one of {}",
                    Policy::names().join(", ")
                )
            })
    }
}

/// What one source says, each setting `None` when it says nothing about it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_credits: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typecheck: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_after_iteration: Option<bool>,
}

/// A switch word: `1 on true yes` or `0 off false no` (the reference's).
pub fn parse_switch(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(format!("{text:?} is not a switch; use 1 or 0 (on/off)")),
    }
}

/// A credit count: a whole number, 0 or more.
pub fn parse_credits(text: &str) -> Result<u32, String> {
    text.trim().parse().map_err(|_| {
        format!("{text:?} is not a credit count; use a whole number, 0 or more, such as 3")
    })
}

/// A Lake project path: relative to the loop directory (or the project
/// root), without `..`; a trailing `/` is kept as written.
pub fn check_project(text: &str) -> Result<String, String> {
    let trimmed = text.trim();
    let bare = trimmed.trim_end_matches('/');
    LoopPath::parse(bare)
        .map(|_| trimmed.to_owned())
        .map_err(|problem| format!("the formal project {text:?} {problem}"))
}

impl Layer {
    /// Whether it states every setting (a resolved policy handed down).
    pub fn is_complete(&self) -> bool {
        self.policy.is_some()
            && self.project.is_some()
            && self.force_credits.is_some()
            && self.typecheck.is_some()
            && self.force_after_iteration.is_some()
    }

    /// `formal/formal_policy.json` (or a standing-orders object): the keys
    /// it names. Keys loopx does not act on (`notes`, `status`,
    /// `allow_path_steal`, ...) are left alone; a value of the wrong kind is
    /// refused, naming the key.
    pub fn parse_json(bytes: &[u8]) -> Result<Layer, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())?;
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("it is not JSON: {e}"))?;
        let Value::Object(map) = value else {
            return Err("it must hold one JSON object".into());
        };
        if let Some(version) = map.get("schema_version").filter(|v| !v.is_null()) {
            if version.as_str() != Some(SCHEMA) {
                return Err(format!(
                    "schema_version is {version}; this loopx reads {SCHEMA:?}"
                ));
            }
        }
        let key = |name: &str| map.get(name).filter(|v| !v.is_null());
        let text_of = |name: &str, value: &Value| {
            value
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{name} must be a string"))
        };
        let switch = |name: &str| -> Result<Option<bool>, String> {
            key(name)
                .map(|value| match value {
                    Value::Bool(b) => Ok(*b),
                    Value::String(s) => parse_switch(s).map_err(|e| format!("{name}: {e}")),
                    _ => Err(format!("{name} must be true or false")),
                })
                .transpose()
        };
        Ok(Layer {
            policy: key("policy")
                .map(|v| text_of("policy", v).and_then(|t| Policy::parse(&t)))
                .transpose()?,
            project: key("project")
                .map(|v| text_of("project", v).and_then(|t| check_project(&t)))
                .transpose()?,
            force_credits: key("force_credits")
                .map(|v| match v {
                    Value::Number(n) => {
                        n.as_u64()
                            .and_then(|n| u32::try_from(n).ok())
                            .ok_or_else(|| {
                                format!("force_credits {n} is not a whole number, 0 or more")
                            })
                    }
                    Value::String(s) => parse_credits(s),
                    _ => Err("force_credits must be a whole number".into()),
                })
                .transpose()?,
            typecheck: switch("typecheck")?,
            force_after_iteration: switch("force_after_iteration")?,
        })
    }

    /// The `AAS_AUTOLOOP_FORMAL_*` variables `get` finds; an empty one says
    /// nothing. A value that is not one is refused, naming the variable.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Layer, String> {
        let read = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let named = |name: &'static str| move |e: String| format!("{name}: {e}");
        Ok(Layer {
            policy: read(ENV_POLICY)
                .map(|v| Policy::parse(&v).map_err(named(ENV_POLICY)))
                .transpose()?,
            project: read(ENV_PROJECT)
                .map(|v| check_project(&v).map_err(named(ENV_PROJECT)))
                .transpose()?,
            force_credits: read(ENV_FORCE_CREDITS)
                .map(|v| parse_credits(&v).map_err(named(ENV_FORCE_CREDITS)))
                .transpose()?,
            typecheck: read(ENV_TYPECHECK)
                .map(|v| parse_switch(&v).map_err(named(ENV_TYPECHECK)))
                .transpose()?,
            force_after_iteration: read(ENV_FORCE)
                .map(|v| parse_switch(&v).map_err(named(ENV_FORCE)))
                .transpose()?,
        })
    }

    /// Whether it says anything at all.
    pub fn is_empty(&self) -> bool {
        *self == Layer::default()
    }

    /// `self` with what `top` states put over it.
    pub fn under(self, top: &Layer) -> Layer {
        Layer {
            policy: top.policy.or(self.policy),
            project: top.project.clone().or(self.project),
            force_credits: top.force_credits.or(self.force_credits),
            typecheck: top.typecheck.or(self.typecheck),
            force_after_iteration: top.force_after_iteration.or(self.force_after_iteration),
        }
    }
}

/// The formal policy in force: every setting decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    pub policy: Policy,
    /// The Lake project, relative to the loop directory or the project root.
    pub project: String,
    /// How many force ticks the loop may spend, in all its drives.
    pub force_credits: u32,
    /// The force tick runs `lake build` (otherwise it only scans).
    pub typecheck: bool,
    /// The host runs the force tick after each ok turn (policy `force` only).
    pub force_after_iteration: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            policy: Policy::Off,
            project: DEFAULT_PROJECT.to_owned(),
            force_credits: DEFAULT_CREDITS,
            typecheck: false,
            force_after_iteration: false,
        }
    }
}

impl Settings {
    /// The defaults with each layer put over the last, lowest first: the
    /// policy file, the standing orders, the environment, the flags.
    pub fn resolve(layers: &[&Layer]) -> Settings {
        let merged = layers
            .iter()
            .fold(Layer::default(), |below, top| below.under(top));
        let default = Settings::default();
        Settings {
            policy: merged.policy.unwrap_or(default.policy),
            project: merged.project.unwrap_or(default.project),
            force_credits: merged.force_credits.unwrap_or(default.force_credits),
            typecheck: merged.typecheck.unwrap_or(default.typecheck),
            force_after_iteration: merged
                .force_after_iteration
                .unwrap_or(default.force_after_iteration),
        }
    }

    /// The settings as a layer that states every one of them.
    pub fn as_layer(&self) -> Layer {
        Layer {
            policy: Some(self.policy),
            project: Some(self.project.clone()),
            force_credits: Some(self.force_credits),
            typecheck: Some(self.typecheck),
            force_after_iteration: Some(self.force_after_iteration),
        }
    }

    /// The host runs its hygiene tick after an ok turn: only policy
    /// `force` with the flag.
    pub fn force_tick(&self) -> bool {
        self.policy == Policy::Force && self.force_after_iteration
    }

    /// What the agent's environment is told, so its own `loopx` calls
    /// resolve the policy the drive did.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let switch = |on: bool| if on { "1" } else { "0" }.to_owned();
        vec![
            (ENV_POLICY, self.policy.as_str().to_owned()),
            (ENV_PROJECT, self.project.clone()),
            (ENV_FORCE_CREDITS, self.force_credits.to_string()),
            (ENV_TYPECHECK, switch(self.typecheck)),
            (ENV_FORCE, switch(self.force_after_iteration)),
        ]
    }
}

/// `formal/host_policy.pin.json`: what a drive resolved at its start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    pub schema_version: String,
    #[serde(flatten)]
    pub settings: Settings,
    /// The project root the drive ran turns in (where a Lake project is
    /// looked for after the loop directory).
    pub root: String,
    pub pinned_at: jiff::Timestamp,
    pub pin_source: String,
    pub driver_pid: u32,
}

impl Pin {
    pub fn at_drive_start(
        settings: &Settings,
        root: &str,
        now: jiff::Timestamp,
        driver_pid: u32,
    ) -> Pin {
        Pin {
            schema_version: SCHEMA.to_owned(),
            settings: settings.clone(),
            root: root.to_owned(),
            pinned_at: now,
            pin_source: "drive_start".to_owned(),
            driver_pid,
        }
    }
}

/// The host typecheck's time limit: the variable's seconds (600 unless
/// set), kept between 60 and 3600, and never past `turn_timeout`.
pub fn typecheck_timeout(raw: Option<&str>, turn_timeout_s: u64) -> Result<u64, String> {
    let seconds = match raw.map(str::trim).filter(|v| !v.is_empty()) {
        None => 600,
        Some(text) => text.parse::<u64>().map_err(|_| {
            format!("{ENV_TYPECHECK_TIMEOUT}: {text:?} is not a whole number of seconds")
        })?,
    };
    Ok(seconds.clamp(60, 3600).min(turn_timeout_s.max(1)))
}

#[cfg(test)]
mod tests;
