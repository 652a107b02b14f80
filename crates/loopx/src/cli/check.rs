//! `check run|status`: the goal owner's executable checks, run by the
//! host and judged against the project's HEAD. Parse, call
//! [`loopx_app::goal::checks`], render.

use super::ledger::DirArgs;
use super::Reply;
use crate::process::Plain;
use anyhow::Result;
use clap::{Args, Subcommand};
use loopx_app::goal::checks::{self, ChecksView};
use loopx_app::loop_dir::LoopDir;
use loopx_store::sqlite::Access;
use std::path::PathBuf;

/// The executable checks the goal's owner configured on outcome
/// requirements (`loopx goal-acceptance prepare-checks` / `apply-checks`).
/// A configured requirement is met only by its check passing on the
/// project's current HEAD: an agent's self-assessment cannot stand in for
/// it, and a commit after the run makes the result stale.
#[derive(Debug, Subcommand)]
pub enum CheckCommand {
    /// Run the configured checks now, each argv without a shell in the
    /// project root (or its cwd below it), in its own process group,
    /// killed at its timeout, its output bounded and redacted; record the
    /// results on the goal. Exit 1 when any is not met.
    Run(CheckArgs),
    /// Where each configured check stands against the project's HEAD now.
    /// Read-only: runs nothing.
    Status(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// Only this outcome's checks.
    #[arg(long)]
    pub outcome: Option<String>,
    /// The project root the checks run in (default: the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
}

pub fn check(command: &CheckCommand, store: Option<&str>) -> Result<Reply> {
    let (view, action) = match command {
        CheckCommand::Run(args) => {
            let dir = LoopDir::open(args.dir.at(store), Access::ReadWrite)?;
            let root = root(args)?;
            loopx_app::platform::catch_stop_signals()?;
            let say = |line: &str| eprintln!("loopx check: {}", loopx_core::text::printable(line));
            let only = args.outcome.as_deref();
            let view = checks::run(&dir, &root, only, None, "owner", &Plain, &say)?;
            (view, "check-run")
        }
        CheckCommand::Status(args) => {
            let dir = LoopDir::open(args.dir.at(store), Access::ReadOnly)?;
            (
                checks::status(&dir, &root(args)?, args.outcome.as_deref())?,
                "check-status",
            )
        }
    };
    reply(action, &view)
}

fn root(args: &CheckArgs) -> Result<PathBuf> {
    Ok(args.root.clone().unwrap_or(std::env::current_dir()?))
}

fn reply(action: &str, view: &ChecksView) -> Result<Reply> {
    let mut json = serde_json::to_value(view)?;
    let met = view.not_met == 0;
    json["status"] = if met { "ok" } else { "failed" }.into();
    json["action"] = action.into();
    Ok(Reply {
        json,
        text: view.text(),
        code: if met { 0 } else { 1 },
        report: false,
    })
}
