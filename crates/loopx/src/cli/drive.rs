//! drive, agent-cmd and recover.

use super::ledger::DirArgs;
use super::ticker::Ticker;
use super::Reply;
use crate::process::Plain;
use anyhow::Result;
use clap::Args;
use loopx_app::agent_cmd::{agent_commands, Asked, ProviderCommand};
use loopx_app::driver;
use loopx_app::driver::options::{Options, Progress, Target, Workers};
use loopx_app::driver::run::{self as drive, Misdirected};
use loopx_app::loop_dir::LoopDir;
use loopx_core::driver::capture::{OutputCap, CAP_ENV};
use loopx_core::driver::provider;
use loopx_core::driver::session::{Exit, Limits};
use loopx_core::driver::snapshot::Setting;
use loopx_core::driver::stream::{RetryPolicy, MAX_CLI_RETRIES_ENV};
use loopx_core::driver::RecoveryPlan;
use loopx_core::goal::{self, Actor};
use loopx_core::panel::Switch;
use loopx_core::workers::MergeMode;
use loopx_store::sqlite::Access;
use serde_json::json;
use std::cell::RefCell;
use std::path::PathBuf;
use std::time::Duration;

/// Run unattended turns until the loop should stop.
///
/// Each turn spawns a fresh agent (its own process group, cwd = --root)
/// with the prompt regenerated from state, and must record one iteration.
/// Exit codes: 0 stopped cleanly, 2 bad arguments, 3 --max-failures
/// consecutive failures, 4 runtime error (including a crash recovery that
/// needs a person), 5 quota waits exhausted, 6 provider binary unavailable,
/// 7 authentication/session dead.
///
/// Budgets: a plain `loopx init` gives the loop a one-hour wall-time budget
/// (--max-wall-time-seconds 3600) counted from init, and drive stops when
/// it is spent; give a long run more with `loopx init --max-wall 48h` (or 0
/// for unlimited).
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("target").required(true).args(["provider", "cmd"]))]
#[command(after_help = provider::autonomy_notice())]
pub struct DriveArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// Providers to use, first available first: claude, codex, deepseek,
    /// opencode, copilot, antigravity, grok, kimi (comma-separated for failover).
    #[arg(long, value_delimiter = ',')]
    pub provider: Vec<String>,
    /// A shell command run per turn instead; the prompt is on its stdin.
    #[arg(long)]
    pub cmd: Option<String>,
    /// The project root the agent works in (default: the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Consecutive failed turns before exit 3.
    #[arg(long, default_value_t = 3)]
    pub max_failures: u32,
    /// Consecutive quota signals before a provider is excluded (0 = wait indefinitely).
    #[arg(long, default_value_t = 0)]
    pub max_quota_waits: u32,
    /// First backoff after a quota signal without a reset time, in seconds (doubles, up to 15 min).
    #[arg(long, default_value_t = 60)]
    pub quota_backoff: u64,
    /// The longest wait for a reported quota reset (e.g. 6h).
    #[arg(long, default_value = "6h", value_parser = super::ledger::parse_duration, allow_hyphen_values = true)]
    pub max_quota_wait: u64,
    /// Kill a turn (its whole process group) after this many seconds.
    #[arg(long, default_value_t = 3600)]
    pub iteration_timeout: u64,
    /// Run at most this many turns in this run.
    #[arg(long, value_parser = super::ledger::iteration_cap)]
    pub max_iterations: Option<u64>,
    /// The agent id turns act as (LOOPX_AGENT_ID in the agent's environment).
    #[arg(long, default_value = "agent")]
    pub agent_id: String,
    /// The goal whose frontier the turns' prompt is built from.
    #[arg(long, default_value = goal::DEFAULT_GOAL_ID)]
    pub goal_id: String,
    /// Review a staged candidate (enforce mode) by the review panel before
    /// the next dispatch: on, off, or auto (on when <dir>/panel.json says
    /// "enabled": true, or AAS_AUTOLOOP_PANEL=on). Reviewers are started
    /// only with AAS_AUTOLOOP_EXTERNAL_PANEL_EGRESS=allow; see `loopx panel --help`.
    #[arg(long, value_enum, default_value = "auto")]
    pub panel: PanelSwitch,
    /// The most of a turn's output (stdout and stderr) its log in
    /// driver_logs/ keeps: bytes, or with K, M or G (powers of 1024). Past
    /// it the first and last halves are kept and a line says how much was
    /// dropped between; the turn's settlement notes it. Default 16M, or
    /// LOOPX_MAX_TURN_OUTPUT. The newest 200 logs, at most 1 GiB of them,
    /// are kept (older ones are removed after each turn).
    #[arg(long, value_name = "BYTES")]
    pub max_turn_output: Option<String>,
    /// How many of its own retries of a refused key (401/403) or a usage
    /// limit (429) a provider CLI may make before the driver ends the turn
    /// as auth or quota (read from its stream as it runs: Claude Code's
    /// api_retry events, Codex's reconnects), instead of waiting out
    /// minutes of retries. Overloads and 5xx are left to the CLI. Default
    /// 2, or LOOPX_MAX_CLI_RETRIES.
    #[arg(long, value_name = "N")]
    pub max_cli_retries: Option<u32>,
    /// How provider processes run: trusted-local (an explicit opt-in:
    /// attested claude/codex binaries, each turn in its own cgroup scope
    /// under bubblewrap with memory, task, CPU and POSIX limits; see
    /// `loopx attest`) or strict-isolated (not available yet: refused
    /// before anything starts). Default: AAS_AUTOLOOP_PROVIDER_TRANSPORT;
    /// without either, unconfined (a process group and a timeout) outside
    /// Goal Focus enforce mode, and refused in it.
    #[arg(long, value_name = "TRANSPORT")]
    pub transport: Option<String>,
    /// Commit the workspace before and after each turn to loopx's refs
    /// (`refs/loopx/<run>/turns/<n>/before|after`; untracked files
    /// included, .gitignore respected, the loop directory left out; the
    /// user's branch, index, stash and working tree untouched): on, off,
    /// or auto (on when the project root is a git work tree with a commit;
    /// otherwise off, said in one line). See `loopx snapshot --help` and
    /// `loopx rollback --help`.
    #[arg(long, value_enum, default_value = "auto")]
    pub git_snapshot: SnapshotSwitch,
    /// Go on from a workspace that changed since loopx last left it (its
    /// files or HEAD differ from the last turn's after-snapshot): without
    /// it, such a restart stops with exit 4 and shows what changed.
    #[arg(long)]
    pub accept_workspace: bool,
    #[command(flatten)]
    pub formal: super::ledger::FormalArgs,
    /// Run N workers (1 to 32) on the goal's todos, each claiming one todo
    /// through the goal's leases and working it in its own git worktree
    /// (under <dir>/worktrees/) on the branch loopx/<run>/<todo> made from
    /// the target branch; a finished todo lands through the merge queue
    /// (`loopx queue --help`), so the project checkout only ever moves by
    /// a landing. Needs the project to be a git repository with a commit;
    /// not in Goal Focus enforce mode. Without it: the loop's own turns,
    /// one at a time, in the project root.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=loopx_core::workers::MAX_WORKERS as i64))]
    pub workers: Option<u32>,
    /// How the merge queue puts a worker's branch onto the target: merge
    /// (a merge commit) or rebase (the branch's commits replayed on the tip).
    #[arg(long, value_enum, default_value = "merge")]
    pub merge: MergeSwitch,
    /// The branch the merge queue lands on (default: the branch the
    /// project root has checked out, whose files then follow each landing).
    #[arg(long)]
    pub target_branch: Option<String>,
    /// With --workers: share the target through this git remote (a name
    /// `git remote` knows, or a URL), so hosts with their own checkouts
    /// and loop directories on one PostgreSQL store work one goal: each
    /// worker pushes its branch there, and the queue fetches the target
    /// from it and lands by a push that must fast-forward it. What crosses
    /// hosts is the store (claims, leases, the queue) and this remote,
    /// never a path.
    #[arg(long, value_name = "REMOTE")]
    pub push: Option<String>,
    /// With --workers: this host's id in its workers' agent ids
    /// (`<agent>.w<k>@<host>`), turn journals and registration (default:
    /// the machine's name and a digest of the loop directory's path).
    #[arg(long, value_name = "ID")]
    pub host_id: Option<String>,
}

/// `--merge`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum MergeSwitch {
    Merge,
    Rebase,
}

/// `--git-snapshot`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SnapshotSwitch {
    On,
    Auto,
    Off,
}

impl From<SnapshotSwitch> for Setting {
    fn from(switch: SnapshotSwitch) -> Setting {
        match switch {
            SnapshotSwitch::On => Setting::On,
            SnapshotSwitch::Auto => Setting::Auto,
            SnapshotSwitch::Off => Setting::Off,
        }
    }
}

/// `--panel`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PanelSwitch {
    On,
    Auto,
    Off,
}

impl From<PanelSwitch> for Switch {
    fn from(switch: PanelSwitch) -> Switch {
        match switch {
            PanelSwitch::On => Switch::On,
            PanelSwitch::Auto => Switch::Auto,
            PanelSwitch::Off => Switch::Off,
        }
    }
}

/// Print the command `drive --provider P` would run for one turn, after an
/// offline PATH probe, with the provider's model family. Executes nothing.
/// `--provider all` prints every provider's. An unknown provider exits 2, a
/// missing binary 6, except with --print-prompt, which needs no binary: it
/// prints the command and prompt with a warning and exits 0.
///
/// The family is `unverified` for gateways and for every provider while an
/// endpoint override (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, ...) is set.
#[derive(Debug, Args)]
pub struct AgentCmdArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// A provider name (claude, codex, ...), or `all`.
    #[arg(long)]
    pub provider: String,
    /// The project root the agent would work in (default: the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Also print the prompt the turn would get.
    #[arg(long)]
    pub print_prompt: bool,
}

/// Run the loop's success_check on a pending success claim and settle it:
/// a pass ends the loop, a failure records the claim as refused.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// Where the check runs (default: the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Kill the check after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

/// Show what a restarted driver would do about an open dispatch; writes
/// nothing unless told to.
///
/// `--apply` carries out the plan shown (settle a dispatch whose agent
/// recorded its iteration, or cancel one that provably never started);
/// `--cancel --dispatch-id ID` cancels the exact open dispatch whatever the
/// plan says, for a person who has looked.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// Carry out the plan shown (settle or cancel); without it, only show.
    #[arg(long, conflicts_with = "cancel")]
    pub apply: bool,
    /// Cancel the open dispatch (needs --dispatch-id).
    #[arg(long, requires = "dispatch_id")]
    pub cancel: bool,
    /// The open dispatch to cancel, exactly as `loopx recover` shows it.
    #[arg(long)]
    pub dispatch_id: Option<String>,
}

pub fn drive(args: &DriveArgs, store: Option<&str>) -> Result<Reply> {
    for name in &args.provider {
        if provider::find(name).is_none() {
            return Ok(bad_arguments(format!(
                "unknown provider {name:?}; known: {}",
                provider::names().join(", ")
            )));
        }
    }
    if let Err(error) = Actor::agent(&args.agent_id) {
        return Ok(bad_arguments(format!("--agent-id: {error}")));
    }
    if args.max_failures == 0 || args.iteration_timeout == 0 {
        return Ok(bad_arguments(
            "--max-failures and --iteration-timeout must be positive".into(),
        ));
    }
    let output_cap = match turn_output_cap(args.max_turn_output.as_deref()) {
        Ok(cap) => cap,
        Err(message) => return Ok(bad_arguments(message)),
    };
    let cli_retries = match RetryPolicy::resolve(
        args.max_cli_retries,
        std::env::var(MAX_CLI_RETRIES_ENV).ok().as_deref(),
    ) {
        Ok(policy) => policy,
        Err(message) => return Ok(bad_arguments(message)),
    };
    let target = match &args.cmd {
        Some(cmd) if cmd.trim().is_empty() => {
            return Ok(bad_arguments("--cmd must not be empty".into()))
        }
        Some(cmd) => Target::Command(cmd.clone()),
        None => Target::Providers(args.provider.clone()),
    };
    let options = Options {
        root: args.root.clone().unwrap_or(std::env::current_dir()?),
        target,
        goal_id: args.goal_id.clone(),
        agent_id: args.agent_id.clone(),
        limits: Limits {
            max_failures: args.max_failures,
            max_quota_waits: args.max_quota_waits,
            quota_backoff_seconds: args.quota_backoff.max(1),
            max_quota_wait_seconds: args.max_quota_wait,
        },
        iteration_timeout: Duration::from_secs(args.iteration_timeout),
        max_iterations: args.max_iterations,
        pause_poll: Duration::from_secs(5),
        panel: args.panel.into(),
        output_cap,
        transport: args.transport.clone(),
        cli_retries,
        git_snapshot: args.git_snapshot.into(),
        accept_workspace: args.accept_workspace,
        formal: args.formal.layer(),
        workers: args.workers.map(|count| Workers {
            count,
            merge: match args.merge {
                MergeSwitch::Merge => MergeMode::Merge,
                MergeSwitch::Rebase => MergeMode::Rebase,
            },
            target_branch: args.target_branch.clone(),
            host: String::new(),
            push: args.push.clone(),
        }),
    };
    if args.workers.is_none() && (args.push.is_some() || args.host_id.is_some()) {
        return Ok(bad_arguments(
            "--push and --host-id are for a worker run: add --workers N".into(),
        ));
    }
    let dir = match LoopDir::open(args.dir.at(store), Access::ReadWrite) {
        Ok(dir) => dir,
        Err(error) if !args.dir.dir.join(loopx_app::loop_dir::DATABASE).is_file() => {
            return Ok(bad_arguments(format!(
                "wrong --dir: {}",
                super::describe(&error)
            )))
        }
        Err(error) => return Err(error),
    };
    let mut options = options;
    if let Some(workers) = &mut options.workers {
        workers.host = match loopx_app::workers::host(&dir, args.host_id.as_deref()) {
            Ok(host) => host,
            Err(error) => return Ok(bad_arguments(super::describe(&error))),
        };
    }
    // From here a SIGTERM or Ctrl-C ends the turn's processes and settles
    // the turn before the driver exits (130, 143), instead of killing the
    // driver and orphaning the agent.
    loopx_app::platform::catch_stop_signals()?;
    let ended = match drive::drive(&dir, &options, &Plain, &Terminal::default()) {
        Ok(ended) => ended,
        Err(error) if error.downcast_ref::<Misdirected>().is_some() => {
            let message = super::describe(&error).replace("wrong project root", "wrong --root");
            return Ok(bad_arguments(message));
        }
        Err(error) => {
            let message = super::describe(&error);
            let exit = Exit::RuntimeError;
            let json = json!({"status": "failed", "action": "drive", "exit_code": exit.code(), "reason": exit.reason(), "error": message});
            return Ok(Reply {
                json,
                text: format!("loopx drive: stopped by a runtime error: {message}"),
                code: exit.code(),
                report: false,
            });
        }
    };
    let json = json!({
        "status": if ended.exit.code() == 0 { "ok" } else { "failed" },
        "action": "drive", "exit_code": ended.exit.code(), "reason": ended.exit.reason(), "detail": ended.reason, "turns": ended.turns,
    });
    let text = format!(
        "drive stopped after {}: {} ({}; exit {})",
        loopx_core::words::count(ended.turns, "turn"),
        ended.reason,
        ended.exit.reason(),
        ended.exit.code()
    );
    Ok(Reply {
        json,
        text,
        code: ended.exit.code(),
        report: false,
    })
}

/// `--max-turn-output`, else `LOOPX_MAX_TURN_OUTPUT`, else the default.
fn turn_output_cap(flag: Option<&str>) -> Result<OutputCap, String> {
    let env = std::env::var(CAP_ENV).ok();
    OutputCap::resolve(flag, env.as_deref())
}

fn bad_arguments(message: String) -> Reply {
    bad_arguments_of("drive", message)
}

/// A usage error of `action`, with `drive`'s exit code for it.
fn bad_arguments_of(action: &str, message: String) -> Reply {
    let exit = Exit::BadArguments;
    Reply {
        json: json!({"status": "failed", "action": action, "exit_code": exit.code(), "reason": exit.reason(), "error": message}),
        text: format!("error: {message}"),
        code: exit.code(),
        report: false,
    }
}

pub fn agent_cmd(args: &AgentCmdArgs, store: Option<&str>) -> Result<Reply> {
    let asked = match args.provider.as_str() {
        "all" => Asked::All,
        name if provider::find(name).is_none() => {
            let message = format!(
                "unknown provider {name:?}; known: {}, or all",
                provider::names().join(", ")
            );
            return Ok(bad_arguments_of("agent-cmd", message));
        }
        name => Asked::One(name),
    };
    let dir = LoopDir::open(args.dir.at(store), Access::ReadOnly)?;
    let root = args.root.clone().unwrap_or(std::env::current_dir()?);
    let view = agent_commands(&dir, asked, &root, args.print_prompt)?;
    let prompt_json = args.print_prompt.then_some(view.prompt.as_str());
    if let [only] = view.providers.as_slice() {
        let mut json = serde_json::to_value(only)?;
        if let (Some(error), false) = (&only.error, only.available()) {
            json["status"] = "failed".into();
            json["action"] = "agent-cmd".into();
            json["provider"] = only.provider.into();
            let text = format!("provider {} unavailable: {error}", only.provider);
            return Ok(Reply {
                json,
                text,
                code: Exit::ProviderUnavailable.code(),
                report: false,
            });
        }
        if let Some(problem) = &only.endpoint_error {
            eprintln!(
                "warning: {problem}; `loopx drive --provider {}` would exit {} (shown without it)",
                only.provider,
                Exit::BadArguments.code()
            );
        }
        if let Some(warning) = &only.warning {
            eprintln!(
                "warning: provider {} unavailable: {warning}; `loopx drive --provider {}` would exit {} until one is installed",
                only.provider,
                only.provider,
                Exit::ProviderUnavailable.code()
            );
        }
        json["status"] = "ok".into();
        json["action"] = "agent-cmd".into();
        json["provider"] = only.provider.into();
        json["prompt_bytes"] = view.prompt.len().into();
        json["prompt"] = prompt_json.into();
        let mut text = shell_line(only);
        if args.print_prompt {
            text.push_str(&format!("\n\n{}", view.prompt));
        }
        return Ok(Reply::ok(json, text));
    }
    let mut entries = serde_json::Map::new();
    let mut lines = Vec::new();
    for each in &view.providers {
        entries.insert(each.provider.into(), serde_json::to_value(each)?);
        lines.push(match &each.error {
            Some(error) => format!(
                "# {} ({}): unavailable: {error}",
                each.provider,
                each.family.name()
            ),
            None => format!(
                "# {} ({})\n{}",
                each.provider,
                each.family.name(),
                shell_line(each)
            ),
        });
    }
    let mut text = lines.join("\n");
    if args.print_prompt {
        text.push_str(&format!("\n\n{}", view.prompt));
    }
    let json = json!({
        "status": "ok", "action": "agent-cmd", "provider": "all", "providers": entries,
        "prompt_bytes": view.prompt.len(), "prompt": prompt_json,
    });
    Ok(Reply::ok(json, text))
}

/// A provider's command as a person would paste it into a shell: the
/// variables its endpoint setting adds, the program, its arguments.
fn shell_line(command: &ProviderCommand) -> String {
    let word = |a: &str| {
        if a.contains(' ') || a.contains('<') || a.contains('"') || a.contains('{') {
            format!("'{a}'")
        } else {
            a.to_owned()
        }
    };
    let env = command
        .env
        .iter()
        .map(|(name, value)| format!("{name}={}", word(value)));
    env.chain(command.program.map(str::to_owned))
        .chain(command.argv.iter().flatten().map(|a| word(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn recover(args: &RecoverArgs, store: Option<&str>) -> Result<Reply> {
    if args.cancel {
        let dir = LoopDir::open(args.dir.at(store), Access::ReadWrite)?;
        let id = args.dispatch_id.clone().unwrap_or_default();
        driver::cancel_dispatch(&dir, &id)?;
        return Ok(Reply::ok(
            json!({"status": "ok", "action": "recover", "cancelled": id}),
            format!("cancelled dispatch {id}"),
        ));
    }
    let (dir, recovery) = if args.apply {
        let dir = LoopDir::open(args.dir.at(store), Access::ReadWrite)?;
        let recovery = driver::run_recovery(&dir)?;
        (dir, recovery)
    } else {
        let dir = LoopDir::open(args.dir.at(store), Access::ReadOnly)?;
        let recovery = driver::show_recovery(&dir)?;
        (dir, recovery)
    };
    let apply = format!("loopx recover --dir {} --apply", dir.display());
    let mut text = match (&recovery.plan, args.apply) {
        (RecoveryPlan::Clear, _) => "no open dispatch: nothing to recover".to_owned(),
        (RecoveryPlan::SettleAdvanced { dispatch_id, iteration }, true) => format!("settled {dispatch_id}: the agent had recorded iteration {iteration}; it will not be re-run"),
        (RecoveryPlan::SettleAdvanced { dispatch_id, iteration }, false) => format!("would settle {dispatch_id}: the agent recorded iteration {iteration}, so it will not be re-run; `{apply}` (or the next `loopx drive`) does it"),
        (RecoveryPlan::CancelUnstarted { dispatch_id }, true) => format!("cancelled {dispatch_id}: no iteration, no workspace change, no live agent; the next drive dispatches afresh"),
        (RecoveryPlan::CancelUnstarted { dispatch_id }, false) => format!("would cancel {dispatch_id}: no iteration, no workspace change, no live agent; `{apply}` (or the next `loopx drive`) does it, and the next drive dispatches afresh"),
        (RecoveryPlan::FailClosed { inspect, .. }, _) => format!("needs a person: {}", inspect.replace("<DIR>", &dir.display())),
    };
    if let Some(check) = &recovery.workspace {
        text.push_str(&format!("\n{}", check.sentence()));
        for change in &check.changes {
            text.push_str(&format!("\n  changed: {}", change.path));
        }
        if check.changed() {
            text.push_str("\n`loopx drive` refuses to start a turn on it until you pass --accept-workspace (or `loopx rollback --to N --force` puts a snapshot back)");
        }
    }
    if let Some(pid) = recovery.running_driver {
        text = format!("a driver (pid {pid}) is running this loop, so the open dispatch is probably its current turn, not a leftover; {text}");
    }
    // A plan that needs a person ends `recover` as a crash recovery ends
    // `drive`: with a runtime error.
    let exit = if recovery.needs_a_person() {
        Exit::RuntimeError
    } else {
        Exit::Done
    };
    let mut json = serde_json::to_value(&recovery)?;
    json["status"] = if recovery.needs_a_person() {
        "failed"
    } else {
        "ok"
    }
    .into();
    json["action"] = "recover".into();
    Ok(Reply {
        json,
        text,
        code: exit.code(),
        report: false,
    })
}

pub fn verify(args: &VerifyArgs, store: Option<&str>) -> Result<Reply> {
    let dir = LoopDir::open(args.dir.at(store), Access::ReadWrite)?;
    let root = args.root.clone().unwrap_or(std::env::current_dir()?);
    loopx_app::platform::catch_stop_signals()?;
    let timeout = Duration::from_secs(args.timeout.max(1));
    let cap = turn_output_cap(None).map_err(anyhow::Error::msg)?;
    let outcome = loopx_app::driver::turn::verify_claim(
        &dir,
        &root,
        timeout,
        cap,
        &Plain,
        &Terminal::default(),
    )?;
    let status = dir.read()?.ledger.status;
    let stopped = loopx_app::platform::stop_signal();
    let (text, code) = match (outcome, stopped) {
        (None, Some(signal)) => (
            format!(
                "stopped by {} before the checks finished: the success claim stays pending",
                signal.name()
            ),
            signal.exit().code(),
        ),
        (None, None) => ("no success claim is pending".to_owned(), 0),
        (Some(true), _) => (format!("success claim verified; the loop is {status}"), 0),
        (Some(false), _) => (
            format!("success claim refused: a configured check is not met, or the success_check failed (`loopx check status`, driver_logs/); the loop is {status}"),
            1,
        ),
    };
    Ok(Reply {
        json: json!({"status": if code == 0 { "ok" } else { "failed" }, "action": "verify", "verified": outcome, "state_status": status}),
        text,
        code,
        report: false,
    })
}

/// The driver's progress on a terminal: each line on stderr, and a
/// spinner while a turn runs (on a terminal only).
#[derive(Default)]
struct Terminal {
    ticker: RefCell<Option<Ticker>>,
}

impl Progress for Terminal {
    fn say(&self, line: &str) {
        eprintln!("loopx drive: {}", loopx_core::text::printable(line));
    }

    fn running(&self, label: Option<String>) {
        // The old spinner clears itself as it is dropped.
        *self.ticker.borrow_mut() = label.map(Ticker::start);
    }
}
