//! `agent-cmd`: the exact command line a turn of each provider would run,
//! with the binary found on PATH, the provider's model family, and the
//! prompt the driver would send now. Reads the loop; runs nothing.
//!
//! Owns which providers are shown, what counts as unavailable, and the
//! view every adapter renders. Does not own the launch lines (the core's
//! provider table) or how they are quoted for a shell (the CLI's text).

use crate::launchers::installed_launcher;
use crate::loop_dir::LoopDir;
use crate::{platform, AppError};
use loopx_core::driver::provider::{self, Family, Provider};
use loopx_core::driver::session::Exit;
use loopx_core::goal::{self, Actor};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Which providers to show: one by name (an alias too), or all.
pub enum Asked<'a> {
    One(&'a str),
    All,
}

/// One provider's command line, or why there is none.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderCommand {
    #[serde(skip)]
    pub provider: &'static str,
    pub binary_found: bool,
    /// Where the binary is, when it was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<PathBuf>,
    /// The program a turn runs, found or not (`None`: unavailable, and
    /// no command was asked for).
    #[serde(skip)]
    pub program: Option<&'static str>,
    /// Its arguments, with `<prompt>` where the prompt goes (and the
    /// model and thinking pins and the endpoint setting applied, as a turn
    /// gets them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// The variables a turn adds for the provider's endpoint setting
    /// (`AAS_AUTOLOOP_<PROVIDER>_BASE_URL`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<&'static str, String>,
    /// Why its endpoint setting cannot be used: `drive` refuses to start
    /// with it (exit 2). The command shown is then without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint_error: Option<String>,
    pub family: Family,
    /// Why it cannot run a turn here, when its command is shown anyway.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// Why it cannot run a turn here, when no command is shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What `drive --provider` exits with until it can (no command shown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
}

impl ProviderCommand {
    /// Whether a turn of it could start here now.
    pub fn available(&self) -> bool {
        self.binary_found
    }
}

/// Every provider asked for, and the prompt a turn would get now.
pub struct AgentCommands {
    pub providers: Vec<ProviderCommand>,
    pub prompt: String,
}

/// The commands of the providers `asked` names, run in `root`. With
/// `show_unavailable`, a provider whose binary is missing still shows its
/// first launcher's command (printing a command runs nothing).
pub fn agent_commands(
    dir: &LoopDir,
    asked: Asked<'_>,
    root: &Path,
    show_unavailable: bool,
) -> Result<AgentCommands, AppError> {
    let providers: Vec<&Provider> = match asked {
        Asked::All => provider::PROVIDERS.iter().collect(),
        Asked::One(name) => vec![provider::find(name).ok_or_else(|| {
            AppError::refused(format!(
                "unknown provider {name:?}; known: {}, or all",
                provider::names().join(", ")
            ))
        })?],
    };
    let prompt = dir.task_body(goal::DEFAULT_GOAL_ID, &Actor::Agent("agent".into()))?;
    let root = root.display().to_string();
    let env = |name: &str| std::env::var(name).ok();
    // An unusable pin is refused here as `drive` refuses it: a command
    // line without it would not be the one a turn runs.
    let pins: Vec<Vec<String>> = providers
        .iter()
        .map(|each| crate::driver::env::pin_args(each).map_err(AppError::refused))
        .collect::<Result<_, _>>()?;
    let providers = providers
        .into_iter()
        .zip(pins)
        .map(|(each, pins)| {
            let family = provider::family(each, env);
            let found = installed_launcher(each);
            let wanted: Vec<&str> = each.launchers.iter().map(|l| l.binary).collect();
            let unavailable = found
                .is_none()
                .then(|| format!("none of {} is on PATH", wanted.join(", ")));
            let launcher = found.or(show_unavailable.then(|| &each.launchers[0]));
            let shown = launcher.is_some();
            let base_url = crate::driver::env::base_url(each.name);
            let launch = launcher.map(|l| {
                provider::endpoint_launch(each, l, "<prompt>", &root, base_url.as_deref()).map(
                    |mut launch| {
                        launch.args.extend(pins.iter().cloned());
                        launch
                    },
                )
            });
            let endpoint_error = launch.clone().and_then(Result::err);
            let launch = launch.and_then(Result::ok);
            ProviderCommand {
                provider: each.name,
                binary_found: found.is_some(),
                binary: found.and_then(|l| platform::which(l.binary)),
                program: launcher.map(|l| l.binary),
                argv: match &launch {
                    Some(launch) => Some(launch.args.clone()),
                    None => launcher.map(|l| {
                        let mut argv = l.argv("<prompt>", &root);
                        argv.extend(pins.iter().cloned());
                        argv
                    }),
                },
                env: launch
                    .map(|l| l.env.into_iter().collect())
                    .unwrap_or_default(),
                endpoint_error,
                family,
                warning: unavailable.clone().filter(|_| shown),
                exit_code: (!shown).then(|| Exit::ProviderUnavailable.code()),
                error: unavailable.filter(|_| !shown),
            }
        })
        .collect();
    Ok(AgentCommands { providers, prompt })
}
