//! The formal (Lean) policy's IO around the core's rules
//! (`loopx_core::formal`): reading its sources (the loop's
//! `formal/formal_policy.json`, the standing orders in the store, the
//! `AAS_AUTOLOOP_FORMAL_*` variables, the flags), recording the standing
//! orders (`init`, and every drive start), the drive's pin file, and the turn
//! prompt's section.
//!
//! A source that says something wrong is an error naming it, before
//! anything is written. A loop none of whose sources mentions the policy
//! gets no `formal/` folder and no standing orders: the policy is off and
//! stays out of the way.
//!
//! Not here: the rules (`loopx_core::formal`), the driver's loop
//! (`crate::driver::run`, which calls [`start_drive`]).

use crate::continuation::NextTurn;
use crate::error::AppError;
use crate::loop_dir::LoopDir;
use crate::{clock, fsutil};
use anyhow::Result;
use loopx_core::formal::owner::{FormalRequest, OrdersSource};
use loopx_core::formal::{
    self as rule, FormalOwner, FormalProblem, Layer, Pin, Settings, Situation, Standing, STREAM,
};
use loopx_core::operation::{Clock, OperationId};
use loopx_core::path::{FileProblem, LoopPath};
use loopx_store::AuthorityError;
use std::ffi::OsString;
use std::path::Path;

/// The formal policy a drive (or a prompt) goes by, and whether any source
/// spoke of it at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub settings: Settings,
    /// Some source (file, standing orders, environment, flags) said
    /// something about the formal policy.
    pub in_use: bool,
}

fn standing(dir: &LoopDir) -> Result<Standing> {
    Ok(dir
        .authority()
        .load::<FormalOwner>(STREAM)?
        .state
        .unwrap_or_default())
}

/// `formal/formal_policy.json` in the loop directory, read as data (no
/// symlink followed, bounded); absent, it says nothing.
fn file_layer(dir: &LoopDir) -> Result<Layer, AppError> {
    let name = LoopPath::parse(rule::FILE).expect("the file's name is a loop path");
    let malformed = |problem: &str| {
        AppError::refused(format!(
            "{}: {problem}; fix or remove the file (its keys: policy {}, project, force_credits, typecheck, force_after_iteration)",
            dir.path(rule::FILE).display(),
            rule::Policy::names().join("|")
        ))
    };
    match fsutil::read_confined(dir.root(), &name, rule::MAX_BYTES) {
        Ok(bytes) => Layer::parse_json(&bytes).map_err(|problem| malformed(&problem)),
        Err(FileProblem::Missing) => Ok(Layer::default()),
        Err(problem) => Err(malformed(&problem.describe())),
    }
}

/// The policy in force for the loop in `dir` with `flags` over its other
/// sources. `flags` that state every setting (what a drive resolved at
/// its start) are the answer, and nothing is read.
pub fn resolve(dir: &LoopDir, flags: &Layer) -> Result<Resolved, AppError> {
    if flags.is_complete() {
        return Ok(Resolved {
            settings: Settings::resolve(&[flags]),
            in_use: true,
        });
    }
    let file = file_layer(dir)?;
    let orders = standing(dir)?
        .orders
        .map(|s| s.as_layer())
        .unwrap_or_default();
    let env = Layer::from_env(|name| std::env::var(name).ok()).map_err(AppError::refused)?;
    let layers = [&file, &orders, &env, flags];
    Ok(Resolved {
        settings: Settings::resolve(&layers),
        in_use: layers.iter().any(|layer| !layer.is_empty()),
    })
}

/// The turn prompt's formal section for `turn` (empty when the policy is
/// off).
pub fn prompt_section(dir: &LoopDir, turn: &NextTurn, flags: &Layer) -> Result<String, AppError> {
    let settings = resolve(dir, flags)?.settings;
    if settings.policy == rule::Policy::Off {
        return Ok(String::new());
    }
    let decision = &turn.should_run;
    let selected = decision.selected_todo.as_ref().map(|t| t.title.as_str());
    let situation = Situation {
        formal_track: selected.is_some_and(rule::prompt::on_formal_track)
            || rule::prompt::on_formal_track(&decision.next_action),
        stable_candidate: stable_candidate(dir),
    };
    Ok(rule::prompt(&settings, situation, &dir.display()))
}

/// The largest `formal/candidates.jsonl` read.
const CANDIDATES_BYTES: u64 = 256 * 1024;

/// Whether `formal/candidates.jsonl` lists a stable candidate that the
/// user or a host intake entered (the reference's rule). Unreadable, it
/// lists none: the prompt then errs on the quieter side.
fn stable_candidate(dir: &LoopDir) -> bool {
    let name = LoopPath::parse("formal/candidates.jsonl").expect("a loop path");
    let Ok(bytes) = fsutil::read_confined(dir.root(), &name, CANDIDATES_BYTES) else {
        return false;
    };
    String::from_utf8_lossy(&bytes).lines().any(|line| {
        let Ok(row) = serde_json::from_str::<serde_json::Value>(line) else {
            return false;
        };
        row["status"] == "stable" && matches!(row["source"].as_str(), Some("user" | "host_intake"))
    })
}

/// Refuse, before `init` writes anything, formal flags it cannot keep.
pub fn check_init(root: &Path, flags: &Layer) -> Result<(), AppError> {
    if flags.is_empty() {
        return Ok(());
    }
    let folder = root.join("formal");
    match folder.symlink_metadata() {
        Ok(meta) if !meta.is_dir() || meta.file_type().is_symlink() => {
            Err(AppError::refused(format!(
                "{} must be a real directory, not a symlink or a file: nothing was written",
                folder.display()
            )))
        }
        _ => Ok(()),
    }
}

/// `init --formal-*`: the flags over the defaults become the loop's
/// standing orders, and `formal/formal_policy.json` shows them (as the
/// reference writes it). `None` when no formal flag was given. The
/// standing orders are committed under `operation_id` with `.formal`
/// added, so replaying the init replays them too.
pub fn record_at_init(
    dir: &LoopDir,
    operation_id: &OperationId,
    flags: &Layer,
) -> Result<Option<String>, AppError> {
    if flags.is_empty() {
        return Ok(None);
    }
    let settings = Settings::resolve(&[flags]);
    // Cut so the suffix always fits: the same init id always gives the
    // same id here.
    let base: String = operation_id
        .as_str()
        .chars()
        .take(OperationId::MAX_LEN - 7)
        .collect();
    let id = OperationId::parse(&format!("{base}.formal"))
        .map_err(|e| AppError::refused(e.to_string()))?;
    set_orders(dir, &id, &settings, OrdersSource::Init)?;
    let file = serde_json::json!({
        "schema_version": rule::SCHEMA,
        "policy": settings.policy,
        "project": settings.project,
        "force_credits": settings.force_credits,
        "typecheck": settings.typecheck,
        "force_after_iteration": settings.force_after_iteration,
    });
    let folder = fsutil::private_dir_below(dir.root(), &["formal"])?;
    let path = folder.join("formal_policy.json");
    fsutil::write_private(&path, format!("{:#}\n", file).as_bytes())?;
    Ok(Some(path.display().to_string()))
}

fn set_orders(
    dir: &LoopDir,
    id: &OperationId,
    settings: &Settings,
    source: OrdersSource,
) -> Result<(), AppError> {
    let now = clock::now();
    let request = FormalRequest::SetOrders {
        settings: settings.clone(),
        source,
    };
    dir.authority()
        .execute::<FormalOwner>(STREAM, id, &request, &Clock { now }, now)
        .map_err(of_authority)?;
    Ok(())
}

fn of_authority(error: AuthorityError<FormalProblem>) -> AppError {
    match error {
        AuthorityError::Rejected(problem) => crate::error::refusal(problem).into(),
        other => anyhow::Error::from(other).into(),
    }
}

/// At a drive's start, with the loop held: a policy in use becomes the
/// standing orders and is pinned in `formal/host_policy.pin.json`
/// (written once per start, private, replaced whole).
pub fn start_drive(dir: &LoopDir, resolved: &Resolved, root: &Path) -> Result<()> {
    if !resolved.in_use {
        return Ok(());
    }
    let settings = &resolved.settings;
    let id = OperationId::parse(&crate::operation::fresh_name("formal-pin"))?;
    set_orders(dir, &id, settings, OrdersSource::DriveStart)?;
    let pin = Pin::at_drive_start(
        settings,
        &root.display().to_string(),
        clock::now(),
        std::process::id(),
    );
    let folder = fsutil::private_dir_below(dir.root(), &["formal"])?;
    fsutil::write_private(
        &folder.join("host_policy.pin.json"),
        format!("{:#}\n", serde_json::to_value(&pin)?).as_bytes(),
    )?;
    Ok(())
}

/// What the agent's environment is told of the policy in `flags` (a
/// drive's resolved settings).
pub fn agent_env(flags: &Layer) -> Vec<(&'static str, OsString)> {
    Settings::resolve(&[flags])
        .env()
        .into_iter()
        .map(|(name, value)| (name, value.into()))
        .collect()
}
