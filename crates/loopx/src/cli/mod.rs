//! Command-line definitions and the rendering every command shares.

mod backup;
mod bootstrap;
mod check;
mod contain;
mod cost;
mod drive;
mod focus;
mod formal;
mod goal;
mod hook;
mod import;
mod install;
mod ledger;
mod mcp;
mod migrate;
mod notify;
mod panel;
mod queue;
mod selftest;
mod serve;
mod snapshot;
mod stop;
mod supervisor;
mod ticker;

use anyhow::Result;
use clap::{FromArgMatches as _, Parser, Subcommand};
pub use loopx_app::error::describe;
use loopx_app::{AppError, ErrorClass};
use loopx_core::operation::OperationId;
use loopx_core::text::printable;
use serde_json::{json, Value};
use std::io::Write as _;
use std::process::ExitCode;

/// loopx: a durable ledger, stop arbiter and driver for long-running agent loops.
///
/// State lives in SQLite inside the loop directory (`--dir`, default
/// `.loopx`). Every mutating command takes `--operation-id`: repeating a
/// command with the same id and the same flags returns the original receipt
/// and writes nothing.
#[derive(Debug, Parser)]
// As the reference's argument parser: unambiguous prefixes of long flags
// (`--obj` for `--objective`), and a single-value flag given twice keeps
// the last value. Both propagate to every subcommand.
#[command(
    name = "loopx",
    version,
    propagate_version = true,
    max_term_width = 100,
    infer_long_args = true,
    args_override_self = true
)]
// Generic over its subcommands so that one definition of the top level
// serves both the whole tree (`Cli`) and the ledger's group alone (see
// `parse`).
pub struct CliOf<C: Subcommand> {
    /// Print one JSON object on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Where the loop's state lives: sqlite:PATH, a path, or
    /// postgres://USER:PASSWORD@HOST:PORT/DATABASE (default: the loop
    /// directory's loopx.sqlite). Agents a driver starts inherit it.
    #[arg(long, global = true, env = loopx_app::driver::env::STORE)]
    store: Option<String>,
    #[command(subcommand)]
    command: C,
}

/// The command line with every subcommand.
pub type Cli = CliOf<Command>;

#[derive(Debug, Subcommand)]
pub enum Command {
    // First, so that `--help` lists the subcommands in the same order.
    #[command(flatten)]
    Ledger(LedgerCommand),
    Arm(hook::ArmArgs),
    Disarm(hook::DisarmArgs),
    /// The armed loops and whether each is finished.
    Active(hook::RegistryArgs),
    HookCheck(hook::HookCheckArgs),
    /// Exercise the whole ledger offline in a temporary directory.
    Selftest,
    /// Goal acceptance: outcomes, requirements, objective revisions and adoption.
    #[command(subcommand)]
    GoalAcceptance(goal::AcceptanceCommand),
    /// The todo frontier: add, list, claim, renew, release, complete, block, defer.
    #[command(subcommand)]
    Todo(goal::TodoCommand),
    /// Goal Focus v2 direction control: status, validate, replan, reconcile, revise.
    #[command(subcommand)]
    GoalFocus(focus::GoalFocusCommand),
    /// Continuation decisions for hosts.
    #[command(subcommand)]
    Quota(goal::QuotaCommand),
    RefreshState(goal::RefreshArgs),
    TaskBody(goal::TaskBodyArgs),
    Drive(drive::DriveArgs),
    AgentCmd(drive::AgentCmdArgs),
    Recover(drive::RecoverArgs),
    Verify(drive::VerifyArgs),
    /// The formal (Lean) policy: status, and the host's re-check of a Lean proof.
    #[command(subcommand)]
    Formal(formal::FormalCommand),
    NotifyEvent(notify::NotifyEventArgs),
    Cost(cost::CostArgs),
    Serve(serve::ServeArgs),
    /// `serve`, and open the dashboard in a browser.
    Dashboard(serve::ServeArgs),
    Backup(backup::BackupArgs),
    /// The workspace's git snapshots, before and after each driven turn: list, show, diff.
    #[command(subcommand)]
    Snapshot(snapshot::SnapshotCommand),
    Bootstrap(bootstrap::BootstrapArgs),
    ApplyDefaults(bootstrap::ApplyDefaultsArgs),
    /// The goal owner's executable checks: run them now, or see where each
    /// stands against the project's HEAD.
    #[command(subcommand)]
    Check(check::CheckCommand),
    Rollback(snapshot::RollbackArgs),
    /// The merge queue of `drive --workers`: list, retry, discard.
    #[command(subcommand)]
    Queue(queue::QueueCommand),
    Install(install::InstallArgs),
    /// Remove what `loopx install` added (same flags), giving back every file as it was.
    Uninstall(install::InstallArgs),
    Doctor(install::DoctorArgs),
    RequestStop(stop::RequestStopArgs),
    Start(supervisor::StartArgs),
    Replace(supervisor::ReplaceArgs),
    Stop(supervisor::StopArgs),
    Drain(supervisor::DrainArgs),
    ServiceStatus(supervisor::ServiceStatusArgs),
    Logs(supervisor::LogsArgs),
    Smoke(supervisor::SmokeArgs),
    Mcp(mcp::McpArgs),
    Migrate(migrate::MigrateArgs),
    Import(import::ImportArgs),
    Panel(panel::PanelArgs),
    Attest(contain::AttestArgs),
    #[command(hide = true)]
    ContainGate(contain::GateArgs),
}

/// The ledger's commands, which an agent runs on every turn: each is
/// parsed by a tree that holds only it (see [`parse`]), since building and
/// dropping every other subcommand's arguments and help was about a
/// quarter of `status`'s CPU (BENCHMARKS.md, issue 10 start-up).
#[derive(Debug, Subcommand)]
// One value per process, parsed once: its size costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum LedgerCommand {
    Init(ledger::InitArgs),
    AppendIteration(Box<ledger::AppendArgs>),
    /// Rebuild the ledger from its journal and re-check every record; exit 1 lists every violation.
    Validate(ledger::DirArgs),
    /// The loop at a glance: budgets, the stop verdict, the last iteration, the driver.
    Status(ledger::DirArgs),
    /// The read-only stop arbiter: which stop condition holds (exit 0 either way; see `done`).
    Done(ledger::DoneArgs),
}

/// What a command produced: the JSON object, the text for people, and
/// the exit code. Warnings travel in the JSON's `warnings` array (strings);
/// the text rendering says each on stderr, so that a command that succeeded
/// with a warning is never mistaken for one that did not happen.
pub struct Reply {
    pub json: Value,
    pub text: String,
    pub code: u8,
    /// The text is a report (`doctor`): it goes to stdout whatever the
    /// exit code, so it is read in one place whether or not all is well.
    pub report: bool,
}

impl Reply {
    pub fn ok(json: Value, text: impl Into<String>) -> Self {
        Reply {
            json,
            text: text.into(),
            code: 0,
            report: false,
        }
    }

    /// A use case's view as the JSON reply, with its text for people.
    pub fn view(view: &impl serde::Serialize, text: impl Into<String>) -> Result<Self> {
        Ok(Reply::ok(serde_json::to_value(view)?, text))
    }
}

/// The parser users run: `CliOf<C>`, where a value that looks like a
/// negative number (`--usd -0`) is a value, never a flag (see
/// [`negative_numbers`]).
fn command<C: Subcommand>() -> clap::Command {
    negative_numbers(<CliOf<C> as clap::CommandFactory>::command())
}

/// `command`, and every subcommand below it, taking a value that looks
/// like a negative number as a value, as the reference does. (Other
/// leading hyphens still name flags, so a missing value is still caught.)
/// Clap sets this per argument, so it is applied to every one.
fn negative_numbers(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| {
            if arg.get_action().takes_values() {
                arg.allow_negative_numbers(true)
            } else {
                arg
            }
        })
        .mut_subcommands(negative_numbers)
}

/// The whole tree, with the help text only its help shows.
fn whole_tree() -> clap::Command {
    command::<Command>().mut_subcommand("append-iteration", |append| {
        append.after_help(ledger::early_stop_help())
    })
}

/// No subcommand: the top level that [`ledger_command_alone`] adds one
/// ledger command to.
#[derive(Debug, Subcommand)]
enum NoCommand {}

/// The top level holding only the ledger command `name`, from the same
/// definitions the whole tree holds it with (the tests compare the two),
/// or `None` when `name` is not a ledger command. One command's arguments
/// instead of the group's five: `init`'s alone were a third of what
/// parsing cost `append-iteration` (BENCHMARKS.md, issue 10).
fn ledger_command_alone(name: &str) -> Option<clap::Command> {
    use clap::{Args, Command as Sub};
    let alone = match name {
        "init" => ledger::InitArgs::augment_args(Sub::new("init")),
        "append-iteration" => ledger::AppendArgs::augment_args(Sub::new("append-iteration")),
        "validate" => ledger::DirArgs::augment_args(Sub::new("validate")),
        "status" => ledger::DirArgs::augment_args(Sub::new("status")),
        "done" => ledger::DoneArgs::augment_args(Sub::new("done")),
        _ => return None,
    };
    Some(negative_numbers(
        <CliOf<NoCommand> as clap::CommandFactory>::command().subcommand(alone),
    ))
}

/// Parse the command line. A ledger command (`loopx [--json] status ...`)
/// is tried first against the top level holding that one command alone
/// ([`ledger_command_alone`]): the same definitions, so whatever that tree
/// accepts the whole tree accepts alike. Anything it does not accept
/// (help, `--version`, a mistake) is parsed again by the whole tree, so
/// every help text and error message is the whole tree's, as before.
fn parse() -> Cli {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(cli) = parse_ledger_alone(&args) {
        return cli;
    }
    let matches = whole_tree().get_matches_from(args);
    Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

/// `args` parsed by the ledger command they name alone, when their first
/// word after any `--json` names one and that tree accepts them whole.
fn parse_ledger_alone(args: &[std::ffi::OsString]) -> Option<Cli> {
    let name = args.iter().skip(1).find(|arg| *arg != "--json")?.to_str()?;
    let matches = ledger_command_alone(name)?
        .try_get_matches_from(args)
        .ok()?;
    let CliOf {
        json,
        store,
        command,
    } = CliOf::<LedgerCommand>::from_arg_matches(&matches).ok()?;
    Some(CliOf {
        json,
        store,
        command: Command::Ledger(command),
    })
}

pub fn main() -> ExitCode {
    let cli = parse();
    let json = cli.json;
    // Parsed once, passed down: the store every command that opens a loop
    // opens it through (a driver hands it on to its agents).
    let store = cli.store.as_deref();
    let result = match cli.command {
        // The Stop hook renders itself: it must fail open and speak the
        // agent CLI's protocol (stderr + exit 2), whatever happens.
        Command::HookCheck(args) => return hook::hook_check(&args, json, store),
        command => dispatch(command, json, store),
    };
    // A command that caught a stop signal (one that runs processes) was
    // stopped by it, whatever else it reports: exit as the shell would.
    let stopped = loopx_app::platform::stop_signal().map(|s| ExitCode::from(s.exit().code()));
    match result {
        Ok(reply) => {
            emit(&reply, json);
            stopped.unwrap_or(ExitCode::from(reply.code))
        }
        Err(error) => {
            let code = fail(AppError::from(error), json);
            stopped.unwrap_or(code)
        }
    }
}

/// The one rendering of a failed command: `error: <message>` on stderr
/// (then this adapter's hint, if any), the `--json` body
/// `{"status":"failed","error":...,"class":...}` with the error's details
/// and the hint merged in, and the exit code for the class.
fn fail(error: AppError, json: bool) -> ExitCode {
    let hint = hint(&error);
    if json {
        let mut body = json!({"status": "failed", "error": error.message, "class": error.class});
        if let Some(details) = error.details {
            merge(&mut body, details);
        }
        if let Some(hint) = &hint {
            body["hint"] = hint.as_str().into();
        }
        print_json(&body);
    }
    eprintln!("error: {}", printable(&error.message));
    if let Some(hint) = hint {
        eprintln!("hint: {}", printable(&hint));
    }
    ExitCode::from(exit_code(error.class))
}

/// Every failure class exits 1, as the reference does: a script tells them
/// apart by the `class` of the `--json` body. (`drive` keeps its own exit
/// codes, which it returns as replies, not errors.)
fn exit_code(class: ErrorClass) -> u8 {
    match class {
        ErrorClass::Refused
        | ErrorClass::Conflict
        | ErrorClass::Stale
        | ErrorClass::NotFound
        | ErrorClass::Unavailable
        | ErrorClass::Internal => 1,
    }
}

/// What to do next, in this CLI's words, where the message cannot say it
/// without naming a flag or a command.
fn hint(error: &AppError) -> Option<String> {
    use loopx_app::arming;
    let detail = |key: &str| {
        error
            .details
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(Value::as_str)
    };
    let hint = match (error.class, detail("reason")) {
        (_, Some(arming::ALREADY_ARMED)) => format!(
            "disarm it with `loopx disarm --run-id {}`, or pass --force",
            detail("armed_run_id").unwrap_or("<RUN_ID>")
        ),
        (_, Some(arming::NOT_COVERED)) => {
            "pass --dir or --run-id (`loopx active` lists the armed loops)".into()
        }
        (_, Some(arming::SEVERAL_COVER)) => "pass --dir or --run-id to say which".into(),
        _ if detail("missing") == Some("executor") => {
            "pass --executor PROVIDER: the provider that ran the turn".into()
        }
        _ if detail("missing") == Some("trigger") => {
            "pass --trigger manual (or another trigger) to replan anyway".into()
        }
        (ErrorClass::Conflict, _) => "this --operation-id was already used for a different request: choose a new one, or repeat the original command to see its receipt".into(),
        (ErrorClass::Stale, _) => "read the current state again, then retry the command".into(),
        (ErrorClass::Unavailable, _) => {
            "the store is busy or unreachable: retry shortly; nothing was written".into()
        }
        _ => return None,
    };
    Some(hint)
}

/// Run one parsed command (everything but the Stop hook).
/// `store`: the store named with `--store` (or `LOOPX_STORE`), if any.
fn dispatch(command: Command, json: bool, store: Option<&str>) -> Result<Reply> {
    match command {
        Command::Ledger(LedgerCommand::Init(args)) => ledger::init(&args, store),
        Command::Ledger(LedgerCommand::AppendIteration(args)) => {
            ledger::append_iteration(&args, store)
        }
        Command::Ledger(LedgerCommand::Validate(args)) => ledger::validate(&args, store),
        Command::Ledger(LedgerCommand::Status(args)) => ledger::status(&args, store),
        Command::Ledger(LedgerCommand::Done(args)) => ledger::done(&args, store),
        Command::Arm(args) => hook::arm(&args, store),
        Command::Disarm(args) => hook::disarm(&args),
        Command::Active(args) => hook::active(&args, store),
        // In-process (selftest): judged as if the agent CLI sent `{}`.
        Command::HookCheck(args) => Ok(Reply::ok(
            json!(hook::decide(&args, Ok(&serde_json::Map::new()), store)),
            "",
        )),
        Command::Selftest => selftest::run(),
        Command::GoalAcceptance(command) => goal::acceptance(&command, store),
        Command::Todo(command) => goal::todo(&command, store),
        Command::GoalFocus(command) => focus::goal_focus(&command, store),
        Command::Quota(command) => goal::quota(&command, store),
        Command::RefreshState(args) => goal::refresh_state(&args, store),
        Command::TaskBody(args) => goal::task_body(&args, store),
        Command::Drive(args) => drive::drive(&args, store),
        Command::AgentCmd(args) => drive::agent_cmd(&args, store),
        Command::Recover(args) => drive::recover(&args, store),
        Command::Verify(args) => drive::verify(&args, store),
        Command::Formal(command) => formal::formal(&command, store),
        Command::NotifyEvent(args) => notify::notify_event(&args, store),
        Command::Cost(args) => cost::cost(&args, store),
        Command::Serve(args) => serve::serve(&args, false, json, store),
        Command::Dashboard(args) => serve::serve(&args, true, json, store),
        Command::Backup(args) => backup::backup(&args, store),
        Command::Snapshot(command) => snapshot::snapshot(&command, store),
        Command::Check(command) => check::check(&command, store),
        Command::Bootstrap(args) => bootstrap::bootstrap(&args, store),
        Command::ApplyDefaults(args) => bootstrap::apply_defaults(&args, store),
        Command::Rollback(args) => snapshot::rollback(&args, store),
        Command::Queue(command) => queue::queue(&command, store),
        Command::Install(args) => install::install(&args),
        Command::Uninstall(args) => install::uninstall(&args),
        Command::Doctor(args) => install::doctor(&args, store),
        Command::RequestStop(args) => stop::request_stop(&args, store),
        Command::Start(args) => supervisor::start(&args, store),
        Command::Replace(args) => supervisor::replace(&args, store),
        Command::Stop(args) => supervisor::stop(&args, store),
        Command::Drain(args) => supervisor::drain(&args, store),
        Command::ServiceStatus(args) => supervisor::service_status(&args, store),
        Command::Logs(args) => supervisor::logs(&args, json, store),
        Command::Smoke(args) => supervisor::smoke(&args, store),
        Command::Mcp(args) => mcp::mcp(&args, store),
        Command::Migrate(args) => migrate::migrate(&args, store),
        Command::Import(args) => import::import(&args, store),
        Command::Panel(args) => panel::panel(&args, store),
        Command::Attest(args) => contain::attest(&args),
        Command::ContainGate(args) => contain::gate(&args),
    }
}

fn emit(reply: &Reply, json: bool) {
    let warnings = reply.json["warnings"].as_array().into_iter().flatten();
    for warning in warnings.filter_map(Value::as_str) {
        eprintln!("warning: {}", printable(warning));
    }
    if json {
        print_json(&reply.json);
        if reply.code == 0 {
            return;
        }
    }
    if reply.text.is_empty() {
        return;
    }
    // Text can hold what an agent or a reviewer wrote: no control character
    // of theirs reaches the terminal. (JSON escapes them itself.)
    let mut text = printable(&reply.text).into_owned();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    // A command that fails says why where errors go, even with --json;
    // a report stays on stdout, where it is printed when all is well.
    if reply.code == 0 || (reply.report && !json) {
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
    } else {
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

fn print_json(value: &Value) {
    let mut text = serde_json::to_string_pretty(value).expect("JSON values print");
    text.push('\n');
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn merge(into: &mut Value, extra: Value) {
    if let (Some(into), Value::Object(extra)) = (into.as_object_mut(), extra) {
        into.extend(extra);
    }
}

/// The operation id given, or a fresh one (see `loopx_app::operation`).
pub fn operation_id(given: Option<&str>) -> Result<OperationId> {
    Ok(loopx_app::operation::given_or_generated(given)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("loopx")
            .chain(words.iter().copied())
            .map(Into::into)
            .collect()
    }

    /// Each ledger command alone is the whole tree's definition of it: but
    /// for its description (shown only by the whole tree's help) it renders
    /// the same help in both trees, so it accepts and reads the same
    /// arguments; and every command of the ledger's group has one.
    #[test]
    fn each_ledger_command_alone_is_built_as_in_the_whole_tree() {
        let mut group = command::<LedgerCommand>();
        let mut whole = command::<Command>();
        group.build();
        whole.build();
        let names: Vec<String> = group
            .get_subcommands()
            .map(|sub| sub.get_name().to_owned())
            .filter(|name| name != "help")
            .collect();
        assert_eq!(names.len(), 5, "{names:?}");
        for name in names {
            let mut alone = ledger_command_alone(&name).expect("a ledger command");
            alone.build();
            let undescribed = |sub: &mut clap::Command| {
                let mut sub = sub.clone().about(None).long_about(None);
                sub.render_long_help().to_string()
            };
            assert_eq!(
                undescribed(alone.find_subcommand_mut(&name).unwrap()),
                undescribed(whole.find_subcommand_mut(&name).unwrap()),
                "{name}"
            );
        }
        assert!(ledger_command_alone("todo").is_none());
    }

    /// What only the whole tree's help shows is there.
    #[test]
    fn append_iteration_help_ends_with_the_early_stop_reasons() {
        let mut whole = whole_tree();
        whole.build();
        let append = whole.find_subcommand_mut("append-iteration").unwrap();
        let help = append.render_long_help().to_string();
        assert!(help.contains(&ledger::early_stop_help()), "{help}");
    }

    /// A ledger command parses to the same value either way; help, the
    /// version and mistakes are left to the whole tree.
    #[test]
    fn a_ledger_command_parses_alike_and_anything_else_goes_to_the_whole_tree() {
        for words in [
            &["status", "--dir", "d"][..],
            &["--json", "done", "--di", "d", "--json"],
            &[
                "validate", "--dir", "a", "--dir", "b", "--store", "sqlite:x",
            ],
            &[
                "append-iteration",
                "--dir",
                "d",
                "--mode",
                "monitor",
                "--obj",
                "o",
                "--decision",
                "continue",
                "--usd",
                "-0",
            ],
            &["init", "--goal", "g", "--success-criteria", "s"],
        ] {
            let alone = parse_ledger_alone(&argv(words)).expect("parsed alone");
            let matches = whole_tree().try_get_matches_from(argv(words));
            let whole = Cli::from_arg_matches(&matches.unwrap()).unwrap();
            assert_eq!(format!("{alone:?}"), format!("{whole:?}"), "{words:?}");
        }
        for words in [
            &["status", "--help"][..],
            &["--version"],
            &["status", "-V"],
            &["statu"],
            &["append-iteration", "--dir", "d"],
            &["--store", "x", "status"],
            &["todo", "list"],
            &[],
        ] {
            assert!(parse_ledger_alone(&argv(words)).is_none(), "{words:?}");
        }
    }
}
