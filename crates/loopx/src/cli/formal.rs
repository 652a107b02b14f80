//! `loopx formal`: the formal (Lean) policy in force, and the host's
//! re-check of a Lean proof artifact. Each parses its flags, calls
//! `loopx_app::formal` and renders what it returns.

use super::ledger::DirArgs;
use super::Reply;
use crate::process::Plain;
use anyhow::Result;
use clap::{Args, Subcommand};
use loopx_app::loop_dir::LoopDir;
use loopx_core::driver::capture::{OutputCap, CAP_ENV};
use loopx_store::sqlite::Access;

/// The formal (Lean) policy: what is in force, and host re-checks of Lean
/// proofs.
#[derive(Debug, Subcommand)]
pub enum FormalCommand {
    Status(StatusArgs),
    Recheck(RecheckArgs),
}

/// The formal policy in force (formal/formal_policy.json, the standing
/// orders, AAS_AUTOLOOP_FORMAL_*, in that order, default off), the force
/// tick's credits, and the host's re-checks of proof artifacts. Read-only.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub dir: DirArgs,
}

/// Re-check a Lean proof artifact as the host: proof_artifacts/ID.json must
/// be a valid artifact of type lean whose checker is lake, and its
/// proof_path a file inside a Lake project in the loop directory (the
/// nearest folder above it with lakefile.lean or lakefile.toml). Runs
/// `lake env lean <file>` there (no shell, its own process group, killed at
/// --timeout), and records the result with the digests of the artifact and
/// the proof file. Passed means Lean passed and the file has no `sorry`.
/// Exits 0 when passed, 1 when not; an artifact that cannot be re-checked
/// is refused with nothing run or written.
#[derive(Debug, Args)]
pub struct RecheckArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The artifact's id (proof_artifacts/<ID>.json).
    #[arg(long)]
    pub evidence_id: String,
    /// Kill Lean (its whole process group) after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

pub fn formal(command: &FormalCommand, store: Option<&str>) -> Result<Reply> {
    match command {
        FormalCommand::Status(args) => status(args, store),
        FormalCommand::Recheck(args) => recheck(args, store),
    }
}

fn status(args: &StatusArgs, store: Option<&str>) -> Result<Reply> {
    let dir = LoopDir::open(args.dir.at(store), Access::ReadOnly)?;
    let view = loopx_app::formal::status(&dir)?;
    let settings = &view.settings;
    let mut text = format!(
        "formal policy {} (project {}, {}){}; force tick {}, typecheck {}; credits {} of {} left",
        settings.policy.as_str(),
        settings.project,
        if view.in_use {
            "configured"
        } else {
            "the default"
        },
        match view.standing.set_by {
            Some(by) => format!(
                ", standing orders set by {}",
                serde_json::to_value(by)?.as_str().unwrap_or("?")
            ),
            None => String::new(),
        },
        if settings.force_tick() { "on" } else { "off" },
        if settings.typecheck { "on" } else { "off" },
        view.credits_left,
        settings.force_credits,
    );
    for (id, recheck) in &view.standing.rechecks {
        text.push_str(&format!(
            "\nrecheck {id}: {} ({}, {} sorry) at {}",
            if recheck.passed() {
                "passed"
            } else {
                "not passed"
            },
            serde_json::to_value(recheck.status)?
                .as_str()
                .unwrap_or("?"),
            recheck.sorry_count,
            recheck.at
        ));
    }
    let mut json = serde_json::to_value(&view)?;
    json["status"] = "ok".into();
    json["action"] = "formal-status".into();
    Ok(Reply::ok(json, text))
}

fn recheck(args: &RecheckArgs, store: Option<&str>) -> Result<Reply> {
    let dir = LoopDir::open(args.dir.at(store), Access::ReadWrite)?;
    loopx_app::platform::catch_stop_signals()?;
    let cap = OutputCap::resolve(None, std::env::var(CAP_ENV).ok().as_deref())
        .map_err(anyhow::Error::msg)?;
    let view = loopx_app::formal::recheck_proof(
        &dir,
        &args.evidence_id,
        args.timeout.max(1),
        cap,
        &Plain,
    )?;
    let status = serde_json::to_value(view.recheck.status)?;
    let text = format!(
        "proof {} {} by the host: lake env lean {} in {} ({}, {} sorry){}",
        view.evidence_id,
        if view.passed {
            "re-checked and passed"
        } else {
            "did not pass its re-check"
        },
        view.recheck.argv.last().map(String::as_str).unwrap_or(""),
        view.recheck.project,
        status.as_str().unwrap_or("?"),
        view.recheck.sorry_count,
        view.recheck
            .log
            .as_deref()
            .map(|log| format!("; log {log}"))
            .unwrap_or_default(),
    );
    let mut json = serde_json::to_value(&view)?;
    json["status"] = if view.passed { "ok" } else { "failed" }.into();
    json["action"] = "formal-recheck".into();
    Ok(Reply {
        json,
        text,
        code: if view.passed { 0 } else { 1 },
        report: false,
    })
}
