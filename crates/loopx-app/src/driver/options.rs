//! What a drive run is given: what runs each turn, the run's options, and
//! where its progress goes. Shared by the run ([`super::run`]), the turn
//! protocol ([`super::turn`]) and the outage wait ([`super::outage`]).

use loopx_core::driver::capture::OutputCap;
use loopx_core::driver::session::Limits;
use loopx_core::driver::snapshot::Setting;
use loopx_core::driver::stream::RetryPolicy;
use loopx_core::panel::Switch;
use std::path::PathBuf;
use std::time::Duration;

/// What runs each turn.
#[derive(Debug, Clone)]
pub enum Target {
    /// Named providers, first available first.
    Providers(Vec<String>),
    /// A shell command; the prompt arrives on its stdin.
    Command(String),
}

#[derive(Debug, Clone)]
pub struct Options {
    /// The project root the turns run in.
    pub root: PathBuf,
    pub target: Target,
    pub goal_id: String,
    pub agent_id: String,
    pub limits: Limits,
    pub iteration_timeout: Duration,
    pub max_iterations: Option<u64>,
    /// How often a paused loop is looked at again.
    pub pause_poll: Duration,
    /// Whether a staged candidate is reviewed by the panel before the next
    /// dispatch.
    pub panel: Switch,
    /// The most of a turn's (and a success check's) output its log keeps.
    pub output_cap: OutputCap,
    /// `--transport`, as given (`crate::containment::prepare` resolves it).
    pub transport: Option<String>,
    /// How many of its own retries of a refused key or a usage limit a
    /// turn's CLI is let make before the turn is ended.
    pub cli_retries: RetryPolicy,
    /// `--git-snapshot`: a git commit of the workspace before and after
    /// each turn.
    pub git_snapshot: Setting,
    /// `--accept-workspace`: the operator's word that a workspace changed
    /// since loopx left it is the one to go on from.
    pub accept_workspace: bool,
    /// The `--formal-*` flags; once the run has started, the formal policy
    /// it resolved, every setting stated (`crate::formal::resolve`).
    pub formal: loopx_core::formal::Layer,
    /// `--workers N`: parallel workers in worktrees and a merge
    /// queue (`crate::workers`); `None`: the loop's own turns.
    pub workers: Option<Workers>,
}

/// How `drive --workers` runs.
#[derive(Debug, Clone)]
pub struct Workers {
    pub count: u32,
    pub merge: loopx_core::workers::MergeMode,
    /// The branch the queue lands on; `None`: the one the project root
    /// has checked out (resolved when the run starts).
    pub target_branch: Option<String>,
    /// This host's id (`crate::workers::host`): in its workers' agent
    /// ids, turn journals and registration.
    pub host: String,
    /// `--push REMOTE`: branches and landings go through this git remote,
    /// so hosts with their own checkouts share one target.
    pub push: Option<String>,
}

/// What the driver tells a person while it runs; the adapter renders it.
pub trait Progress {
    /// One line of news.
    fn say(&self, line: &str);
    /// A turn is running (`Some`, with a label) or no longer is (`None`):
    /// a terminal may show a spinner meanwhile.
    fn running(&self, label: Option<String>);
}
