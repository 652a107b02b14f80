//! start, replace, stop, drain, service-status, logs and smoke: parse, call
//! `loopx_app::supervisor`, render.

use super::ledger::{parse_duration, DirArgs};
use super::Reply;
use anyhow::{Context as _, Result};
use clap::Args;
use loopx_app::loop_dir::LoopDir;
use loopx_app::supervisor::{self, run};
use loopx_core::supervisor::Backend;
use loopx_store::sqlite::Access;
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    Foreground,
    Detach,
    Systemd,
}

impl From<BackendArg> for Backend {
    fn from(arg: BackendArg) -> Self {
        match arg {
            BackendArg::Foreground => Backend::Foreground,
            BackendArg::Detach => Backend::Detach,
            BackendArg::Systemd => Backend::Systemd,
        }
    }
}

/// Run a loop unattended: a supervisor that runs `loopx drive` as a child
/// process and restarts it when it dies.
///
/// The failover order handed to the driver (`drive --provider a,b,…`) is
/// --provider, else `DIR/failover.json` (`primary_order`,
/// `max_quota_waits_per_primary`, `max_restarts`), else claude, codex,
/// grok, opencode, antigravity, copilot, kimi, deepseek (those installed).
/// Failing over between them is the driver's; the supervisor restarts a
/// driver that died (killed, panicked) after a back-off, resuming its open
/// turn through the driver's recovery (nothing runs or is charged twice),
/// and ends when the driver ends with a meaning.
///
/// Exit codes: 0 the loop is done, a stop was requested or the supervisor
/// drained; 2 bad arguments or failover.json; 10 another supervisor runs
/// this loop (its pid is named); 11 the failover order is empty, or the
/// driver excluded every provider in it; 12 --max-restarts spent; 14 the
/// driver stopped on a quarantined candidate (never restarted: a person
/// must look); 16 the driver's recovery of a killed turn fails closed
/// (never restarted either); 1 the supervisor itself failed (its driver could not be
/// started); 130/143 stopped by SIGINT/SIGTERM (its driver's turn settled
/// as interrupted).
///
/// Linux and WSL (macOS builds, without the parent-death signal); not
/// Windows yet.
#[derive(Debug, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The project root the agents work in (default: the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// The failover order, first available first (comma-separated),
    /// instead of failover.json's.
    #[arg(long, value_delimiter = ',', conflicts_with = "cmd")]
    pub provider: Vec<String>,
    /// A shell command run per turn instead of providers (as `drive --cmd`).
    #[arg(long)]
    pub cmd: Option<String>,
    /// Restarts of a driver that died before the supervisor gives up (exit
    /// 12); default failover.json's `max_restarts`, else 50.
    #[arg(long)]
    pub max_restarts: Option<u32>,
    /// The first wait before a restart (doubles per restart, up to 5 min;
    /// starts over after a driver that ran 10 min). 0: none.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub restart_backoff: u64,
    /// Start the supervisor in its own session, its output appended to
    /// DIR/supervisor/supervisor.log, and return at once with its pid
    /// (the same as --backend detach).
    #[arg(long)]
    pub detach: bool,
    /// How the supervisor runs: in this terminal, detached (--detach), or
    /// as a transient systemd user unit where a user manager answers
    /// (refused elsewhere, showing the unit it would create; the unit has
    /// the user manager's environment, no credential is passed to it).
    #[arg(long, value_enum, default_value = "foreground")]
    pub backend: BackendArg,
    /// Set on the supervisor --detach or --backend systemd starts: the
    /// backend it records.
    #[arg(long, hide = true, value_enum)]
    pub started_as: Option<BackendArg>,
    /// The host policy file: `KEY=VALUE` lines (the reference kit's keys:
    /// AAS_AUTOLOOP_GOAL_PRIORITY, AAS_AUTOLOOP_NOTIFY,
    /// AAS_AUTOLOOP_FORMAL_POLICY, AAS_AUTOLOOP_FORMAL_TYPECHECK,
    /// AAS_FORCE_LOOP_COMPUTE_LANES), read as data, never by a shell, and
    /// given to the driver in its environment. An absolute path outside
    /// the loop directory, owned by you, mode 0600, one link, no symlink,
    /// at most 16 KiB; anything else is refused before anything starts.
    #[arg(long, env = loopx_app::host_policy::ENV, value_name = "ABS_PATH")]
    pub policy_file: Option<PathBuf>,
    /// The provider secrets file: `NAME=VALUE` lines of provider
    /// credentials (ANTHROPIC_API_KEY, OPENAI_API_KEY, DEEPSEEK_API_KEY,
    /// XAI_API_KEY, GEMINI_API_KEY, ... the reference kit's names), given
    /// to the driver in its environment and nowhere else. The same checks
    /// as --policy-file; no value is ever printed.
    #[arg(long, env = loopx_app::host_policy::SECRETS_ENV, value_name = "ABS_PATH")]
    pub secrets_file: Option<PathBuf>,
    /// More `drive` flags, after `--` (e.g. `-- --iteration-timeout 7200`).
    #[arg(last = true)]
    pub drive_args: Vec<String>,
}

pub fn start(args: &StartArgs, store: Option<&str>) -> Result<Reply> {
    let dir = LoopDir::open(args.dir.at(store), Access::ReadWrite)?;
    start_on(&dir, args, store)
}

/// Replace the loop's supervisor: stop the running one and its driver
/// (as `loopx stop`: the turn is settled as interrupted, nothing runs or is
/// charged twice), then start as `loopx start` with these flags.
///
/// Exits 1, starting nothing, if a process of the loop outlived the stop;
/// otherwise as `start`.
#[derive(Debug, Args)]
pub struct ReplaceArgs {
    #[command(flatten)]
    pub start: StartArgs,
    /// How long the old processes have to end by themselves before they are killed.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub grace: u64,
}

pub fn replace(args: &ReplaceArgs, store: Option<&str>) -> Result<Reply> {
    let dir = LoopDir::open(args.start.dir.at(store), Access::ReadWrite)?;
    let stopped = supervisor::stop(&dir, Duration::from_secs(args.grace))?;
    if !stopped.alive.is_empty() {
        let mut reply = Reply::view(&stopped, stopped.text())?;
        reply.code = 1;
        return Ok(reply);
    }
    eprintln!("loopx replace: {}", stopped.text());
    start_on(&dir, &args.start, store)
}

fn start_on(dir: &LoopDir, args: &StartArgs, store: Option<&str>) -> Result<Reply> {
    let root = args
        .root
        .clone()
        .map_or_else(std::env::current_dir, Ok)
        .context("cannot tell the current directory")?;
    let root = root
        .canonicalize()
        .with_context(|| format!("wrong --root: {} does not exist", root.display()))?;
    let options = run::StartOptions {
        program: std::env::current_exe().context("cannot find the loopx binary")?,
        root,
        providers: args.provider.clone(),
        cmd: args.cmd.clone(),
        store: store.map(str::to_owned),
        max_restarts: args.max_restarts,
        first_backoff: Duration::from_secs(args.restart_backoff),
        drive_args: args.drive_args.clone(),
        backend: args.started_as.unwrap_or(BackendArg::Foreground).into(),
        policy: match &args.policy_file {
            Some(path) => loopx_app::host_policy::load(path, dir.root())?,
            None => Default::default(),
        },
        policy_file: args.policy_file.clone(),
        secrets: match &args.secrets_file {
            Some(path) => loopx_app::host_policy::load_secrets(path, dir.root())?,
            None => Default::default(),
        },
        secrets_file: args.secrets_file.clone(),
    };
    let backend = match args.detach {
        true => BackendArg::Detach,
        false => args.backend,
    };
    match backend {
        BackendArg::Foreground => {}
        BackendArg::Detach => {
            let start_args = started_as_args(dir, &options, BackendArg::Detach);
            return match run::detach(dir, &options, &start_args)? {
                Ok(detached) => Reply::view(&detached, detached.text()),
                Err(ended) => Ok(ended_reply(&ended)),
            };
        }
        BackendArg::Systemd => {
            let start_args = started_as_args(dir, &options, BackendArg::Systemd);
            return match run::via_systemd(dir, &options, &start_args) {
                Ok(via) => {
                    let refused = via.error.is_some();
                    let mut reply = Reply::view(&via, via.text())?;
                    reply.code = if refused { 2 } else { 0 };
                    Ok(reply)
                }
                Err(ended) => Ok(ended_reply(&ended)),
            };
        }
    }
    loopx_app::platform::catch_stop_signals()?;
    let say = |line: &str| {
        eprintln!(
            "{} loopx start: {}",
            loopx_app::clock::now(),
            loopx_core::text::printable(line)
        )
    };
    let ended = run::supervise(dir, &options, &say)?;
    Ok(ended_reply(&ended))
}

/// The `start` command line a detached or systemd supervisor runs: these
/// options spelled out, in the foreground, recording `backend`.
fn started_as_args(dir: &LoopDir, options: &run::StartOptions, backend: BackendArg) -> Vec<String> {
    use clap::ValueEnum as _;
    let name = backend.to_possible_value().expect("not skipped");
    let mut words: Vec<String> = ["start", "--started-as", name.get_name(), "--dir"]
        .map(str::to_owned)
        .to_vec();
    words.push(dir.display());
    words.extend(["--root".to_owned(), options.root.display().to_string()]);
    if !options.providers.is_empty() {
        words.extend(["--provider".to_owned(), options.providers.join(",")]);
    }
    if let Some(cmd) = &options.cmd {
        words.extend(["--cmd".to_owned(), cmd.clone()]);
    }
    if let Some(max) = options.max_restarts {
        words.extend(["--max-restarts".to_owned(), max.to_string()]);
    }
    words.extend([
        "--restart-backoff".to_owned(),
        format!("{}s", options.first_backoff.as_secs()),
    ]);
    if let Some(path) = &options.policy_file {
        words.extend(["--policy-file".to_owned(), path.display().to_string()]);
    }
    if let Some(path) = &options.secrets_file {
        words.extend(["--secrets-file".to_owned(), path.display().to_string()]);
    }
    if !options.drive_args.is_empty() {
        words.push("--".to_owned());
        words.extend(options.drive_args.iter().cloned());
    }
    words
}

fn ended_reply(ended: &run::Ended) -> Reply {
    let status = match ended.code {
        0 => "ok",
        _ => "failed",
    };
    Reply {
        json: json!({
            "status": status, "action": "start", "exit_code": ended.code,
            "reason": ended.exit.reason(), "detail": ended.reason, "restarts": ended.restarts,
        }),
        text: format!(
            "loopx start: {} ({}; exit {})",
            ended.reason,
            ended.exit.reason(),
            ended.code
        ),
        code: ended.code,
        report: false,
    }
}

/// Stop a loop's supervisor and its driver now.
///
/// SIGTERM to the supervisor, which stops its driver: the turn's processes
/// are ended and the turn is settled as interrupted (nothing runs or is
/// charged twice). With no supervisor, a running driver of the loop is
/// stopped the same way. Waits until no process of the loop is alive,
/// killing what is left after --grace. This stops processes, not the loop:
/// `loopx start` resumes it; `loopx request-stop` ends the loop itself.
/// Exit 1 if a process of the loop is still alive at the end.
#[derive(Debug, Args)]
pub struct StopArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// How long the processes have to end by themselves before they are killed.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub grace: u64,
}

pub fn stop(args: &StopArgs, store: Option<&str>) -> Result<Reply> {
    let dir = LoopDir::open(args.dir.at(store), Access::ReadOnly)?;
    let stopped = supervisor::stop(&dir, Duration::from_secs(args.grace))?;
    let mut reply = Reply::view(&stopped, stopped.text())?;
    reply.code = u8::from(!stopped.alive.is_empty());
    Ok(reply)
}

/// Stop a loop's supervisor after the current turn settles.
///
/// The driver finishes the turn it is in (or the wait it is in), stops
/// before the next one, and the supervisor exits 0. Returns at once;
/// `loopx service-status` shows when it has. Refused when no supervisor
/// runs. `loopx stop` stops at once instead.
///
/// With --cancel-dispatch-id or --recover-quarantine, drain is also the
/// operator's recovery, as the reference kit's: after asking a running
/// supervisor to drain (none running is then not refused), it runs
/// `loopx recover --cancel --dispatch-id ID` (refused while a driver still
/// works the loop: wait until `service-status` shows it stopped) and
/// `loopx goal-focus recover-quarantine` (shown; released with
/// --release-fingerprint). Exit 0 only when every recovery succeeded.
#[derive(Debug, Args)]
pub struct DrainArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// Cancel this exact open dispatch, as `loopx recover` shows it, after
    /// the drain (its agent must be gone).
    #[arg(long)]
    pub cancel_dispatch_id: Option<String>,
    /// Show the quarantined candidate after the drain, with the command
    /// that releases it.
    #[arg(long)]
    pub recover_quarantine: bool,
    /// With --recover-quarantine: release the candidate with this exact
    /// fingerprint (archived; the ledger and budget do not change).
    #[arg(long, requires = "recover_quarantine")]
    pub release_fingerprint: Option<String>,
}

pub fn drain(args: &DrainArgs, store: Option<&str>) -> Result<Reply> {
    let dir = LoopDir::open(args.dir.at(store), Access::ReadWrite)?;
    let recovery = supervisor::Recovery {
        cancel_dispatch_id: args.cancel_dispatch_id.clone(),
        recover_quarantine: args.recover_quarantine,
        release_fingerprint: args.release_fingerprint.clone(),
    };
    if !recovery.asked() {
        let drained = supervisor::drain(&dir)?;
        return Reply::view(&drained, drained.text());
    }
    let report = supervisor::drain_and_recover(&dir, &recovery)?;
    let mut reply = Reply::view(&report, report.text())?;
    reply.code = u8::from(!report.recovered());
    reply.report = true;
    Ok(reply)
}

/// The loop's supervisor: pid (alive or not), backend, uptime, restarts,
/// the driver's pid, provider and dispatch, the last driver exit, and
/// whether a drain was requested.
#[derive(Debug, Args)]
pub struct ServiceStatusArgs {
    #[command(flatten)]
    pub dir: DirArgs,
}

pub fn service_status(args: &ServiceStatusArgs, store: Option<&str>) -> Result<Reply> {
    let dir = LoopDir::open(args.dir.at(store), Access::ReadOnly)?;
    let status = supervisor::service_status(&dir)?;
    Reply::view(&status, status.text())
}

/// The supervisor's log (`DIR/supervisor/supervisor.log`: what a detached
/// supervisor and its driver printed); its end, or with -f everything
/// written to it from then on, until Ctrl-C. With --turn N, the driver's
/// log of the turn that worked on iteration N instead (the last dispatch
/// for it, found through the driver journal; `DIR/driver_logs/`).
#[derive(Debug, Args)]
pub struct LogsArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// At most this many bytes from its end.
    #[arg(long, default_value_t = 64 * 1024)]
    pub bytes: u64,
    /// Keep printing what is written to it (text only), until Ctrl-C.
    #[arg(short, long)]
    pub follow: bool,
    /// The driver's log of turn N (the turn that recorded iteration N, as
    /// `snapshot show N` numbers it), not the supervisor's.
    #[arg(long, value_name = "N")]
    pub turn: Option<u64>,
}

pub fn logs(args: &LogsArgs, json: bool, store: Option<&str>) -> Result<Reply> {
    let dir = LoopDir::open(args.dir.at(store), Access::ReadOnly)?;
    let read_from = |from: Option<u64>| match args.turn {
        Some(turn) => supervisor::read_turn_log(&dir, turn, from, args.bytes),
        None => supervisor::read_log(&dir, from, args.bytes),
    };
    let read = read_from(None)?;
    if !args.follow || json {
        return Reply::view(&read, read.text.clone());
    }
    loopx_app::platform::catch_stop_signals()?;
    let mut next = read.next;
    print!("{}", loopx_core::text::printable(&read.text));
    while !loopx_app::platform::pause(Duration::from_millis(500)) {
        let more = read_from(Some(next))?;
        print!("{}", loopx_core::text::printable(&more.text));
        std::io::Write::flush(&mut std::io::stdout())?;
        next = more.next;
    }
    Ok(Reply::ok(json!({"status": "ok"}), ""))
}

/// Before a long unattended run, check that what the supervisor needs
/// answers, one check a line: the store opens read-write; the failover
/// order `loopx start` would use (the same flags and failover.json) is
/// valid, and each provider in it is installed and starts (`--version`;
/// with --live, answers the one-line prompt `loopx panel --smoke` sends,
/// which holds nothing of any loop); the notification settings are valid
/// (loopx has no test-send: nothing is sent to any channel).
///
/// Writes nothing to the loop. Exit 0 when every check passed, 1 otherwise.
#[derive(Debug, Args)]
pub struct SmokeArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The failover order to check, as `start --provider` takes it.
    #[arg(long, value_delimiter = ',')]
    pub provider: Vec<String>,
    /// Send each installed provider a one-line prompt, not only `--version`
    /// (runs each provider once: it may cost a little).
    #[arg(long)]
    pub live: bool,
    /// With --live, seconds per provider.
    #[arg(long, default_value_t = loopx_app::panel::SMOKE_TIMEOUT_S)]
    pub timeout: u64,
}

pub fn smoke(args: &SmokeArgs, store: Option<&str>) -> Result<Reply> {
    let mut runner = super::panel::smoke_runner("loopx smoke");
    let live = args.live.then_some(supervisor::smoke::Live {
        timeout_s: args.timeout,
        runner: &mut runner,
    });
    let found = supervisor::smoke::smoke(args.dir.at(store), &args.provider, live)?;
    let mut reply = Reply::view(&found, found.text())?;
    reply.code = u8::from(!found.passed());
    reply.report = true;
    Ok(reply)
}
