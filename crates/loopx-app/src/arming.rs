//! The armed-loop use cases: arm, disarm, active, and the Stop hook's
//! reading of the armed loops.
//!
//! Owns: reading each armed loop's verdict, refusing a second unfinished
//! loop for one project root, choosing which entries a disarm removes, and
//! the hook's registry walk (which entry covers the session, its block
//! streak). Does not own: the hook's rules (`loopx_core::hook`), the
//! registry's files (`crate::registry`), or the hook's protocol with the
//! agent CLI (exit 2 and stderr), which is the CLI's to speak.

use crate::loop_dir::{LoopDir, Place, DATABASE};
use crate::registry::Registry;
use crate::{clock, platform, AppError};
use loopx_core::hook::{self, covers, entry_live, ArmedLoop, HookVerdict, LoopReading};
use loopx_core::ledger::arbiter::Verdict;
use loopx_store::sqlite::Access;
use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};

/// The `reason` in an arming error's details, for adapters to add their
/// own hint (a flag to pass, a command to run).
pub const ALREADY_ARMED: &str = "already_armed";
pub const NOT_COVERED: &str = "not_covered";
pub const SEVERAL_COVER: &str = "several_cover";

/// What `arm` asks for.
pub struct ArmRequest<'a> {
    pub loop_dir: Place<'a>,
    /// The project root whose sessions the loop forces (default: the
    /// current directory).
    pub root: Option<&'a Path>,
    /// Arm even though another unfinished loop is armed for the same root.
    pub force: bool,
    /// Tie the arming to this process (0: not tied).
    pub pid: u32,
    /// A headless driver owns the loop.
    pub driver: bool,
    pub notify: Option<String>,
    pub registry_dir: Option<&'a Path>,
}

/// The entry `arm` wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Armed {
    pub status: &'static str,
    pub action: &'static str,
    pub run_id: String,
    pub registry: String,
    /// The registry file written.
    pub entry: String,
    pub project_root: String,
    pub loop_dir: String,
    pub pid: u32,
    pub driver: bool,
    pub notify_channel: Option<String>,
}

/// What `disarm` removed (nothing is not an error: disarming is idempotent).
#[derive(Debug, Clone, Serialize)]
pub struct Disarmed {
    pub status: &'static str,
    pub action: &'static str,
    pub removed: Vec<String>,
    pub registry: String,
}

/// Every armed loop and its state now.
#[derive(Debug, Clone, Serialize)]
pub struct ActiveView {
    pub status: &'static str,
    pub action: &'static str,
    pub registry: String,
    pub count: usize,
    pub loops: Vec<ActiveLoop>,
    /// Registry files that could not be read.
    pub unreadable: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ActiveLoop {
    pub entry: ArmedLoop,
    /// `done`, `unfinished`, `pid_exited`, `missing` or `unreadable`.
    pub state: &'static str,
    pub done: Option<Verdict>,
}

impl ActiveView {
    pub fn text(&self) -> String {
        let mut text = String::new();
        for active in &self.loops {
            let entry = &active.entry;
            text.push_str(&format!(
                "{}  {:<10}  {}  (root {})\n",
                entry.run_id, active.state, entry.loop_dir, entry.project_root
            ));
        }
        if self.loops.is_empty() {
            text.push_str("no loop is armed\n");
        }
        for name in &self.unreadable {
            text.push_str(&format!("unreadable registry entry: {name}\n"));
        }
        text
    }
}

/// `path` made absolute and free of symlinks when it exists, as given
/// otherwise: registry entries compare paths in this form.
fn resolve(path: &Path) -> String {
    path.canonicalize()
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

fn here() -> Result<PathBuf, AppError> {
    std::env::current_dir().map_err(|e| {
        AppError::new(
            crate::ErrorClass::Internal,
            format!("cannot read the current directory: {e}"),
        )
    })
}

/// Whether an entry's pid process is alive (false when it has none).
fn pid_alive(entry: &ArmedLoop) -> bool {
    entry.pid != 0 && platform::exists(entry.pid)
}

/// The loop an entry names, judged now; `Missing` when it is gone.
/// `store`: the store loops are read from when it is not each directory's
/// own file (as `--store` names it).
pub fn read_loop(entry: &ArmedLoop, store: Option<&str>) -> LoopReading {
    let dir = Path::new(&entry.loop_dir);
    // A loop whose state is in a configured store (PostgreSQL) has no
    // database file in its directory: the store says whether it exists.
    let in_directory = crate::loop_dir::store_locator(store)
        .ok()
        .flatten()
        .is_none();
    if in_directory && !dir.join(DATABASE).is_file() {
        return LoopReading::Missing;
    }
    match LoopDir::open(Place::new(dir, store), Access::ReadOnly)
        .and_then(|d| d.read().map(|r| (d, r)))
    {
        Ok((dir, reading)) => LoopReading::Read {
            verdict: dir.verdict(&reading.ledger, clock::now()),
            iterations: reading.ledger.spent.iterations,
            pending_claim: reading.ledger.pending_claim,
        },
        Err(error) => LoopReading::Unreadable(error.to_string()),
    }
}

pub fn arm(request: ArmRequest<'_>) -> Result<Armed, AppError> {
    let dir = LoopDir::open(request.loop_dir, Access::ReadOnly)?;
    let run_id = dir.read()?.ledger.run_id;
    let root = match request.root {
        Some(root) => resolve(root),
        None => resolve(&here()?),
    };
    let registry = Registry::locate(request.registry_dir)?;
    let _lock = registry.lock()?;
    let (entries, _) = registry.entries();
    for other in entries.iter().filter(|e| e.run_id != run_id) {
        if other.project_root == root && !request.force && entry_live(other, pid_alive(other)) {
            if let LoopReading::Read { verdict, .. } = read_loop(other, request.loop_dir.store) {
                if !verdict.done {
                    return Err(AppError::refused(format!(
                        "loop {} ({}) is already armed for {root} and unfinished: disarm it first, or arm with force",
                        other.run_id, other.loop_dir
                    ))
                    .with_details(json!({"reason": ALREADY_ARMED, "armed_run_id": other.run_id})));
                }
            }
        }
    }
    let entry = ArmedLoop {
        schema_version: hook::ARMED_SCHEMA_VERSION.into(),
        run_id: run_id.clone(),
        loop_dir: dir.display(),
        project_root: root.clone(),
        armed_at: clock::now(),
        pid: request.pid,
        driver: request.driver,
        notify_channel: request.notify,
    };
    let path = registry.write(&entry)?;
    Ok(Armed {
        status: "ok",
        action: "arm",
        run_id,
        registry: registry.display(),
        entry: path.display().to_string(),
        project_root: root,
        loop_dir: entry.loop_dir,
        pid: entry.pid,
        driver: entry.driver,
        notify_channel: entry.notify_channel,
    })
}

/// Disarm the loop at `dir`, or the one with `run_id`, or (with neither)
/// the one armed loop whose root covers the current directory.
pub fn disarm(
    registry_dir: Option<&Path>,
    dir: Option<&Path>,
    run_id: Option<&str>,
) -> Result<Disarmed, AppError> {
    let registry = Registry::locate(registry_dir)?;
    let _lock = registry.lock()?;
    let (entries, _) = registry.entries();
    let mut dir = dir.map(resolve);
    if dir.is_none() && run_id.is_none() {
        dir = Some(covering_here(&entries)?);
    }
    let mut removed = Vec::new();
    for entry in entries {
        let named = run_id == Some(entry.run_id.as_str())
            || dir.as_deref() == Some(entry.loop_dir.as_str());
        if named && registry.remove(&entry.run_id)? {
            removed.push(entry.run_id);
        }
    }
    Ok(Disarmed {
        status: "ok",
        action: "disarm",
        removed,
        registry: registry.display(),
    })
}

/// The loop directory of the one armed loop whose root covers the current
/// directory; none is not found, several is refused, each naming what to
/// pass instead.
fn covering_here(entries: &[ArmedLoop]) -> Result<String, AppError> {
    let here = resolve(&here()?);
    let covering: Vec<&ArmedLoop> = entries
        .iter()
        .filter(|e| covers(&e.project_root, &here))
        .collect();
    match covering.as_slice() {
        [one] => Ok(one.loop_dir.clone()),
        [] => Err(AppError::not_found(format!("no armed loop covers {here}"))
            .with_details(json!({"reason": NOT_COVERED}))),
        several => Err(AppError::refused(format!(
            "{} armed loops cover {here} ({}): name the one to disarm",
            several.len(),
            several
                .iter()
                .map(|e| format!("{} at {}", e.run_id, e.loop_dir))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .with_details(json!({"reason": SEVERAL_COVER}))),
    }
}

pub fn active(registry_dir: Option<&Path>, store: Option<&str>) -> Result<ActiveView, AppError> {
    let registry = Registry::locate(registry_dir)?;
    let (entries, unreadable) = registry.entries();
    let loops: Vec<ActiveLoop> = entries
        .into_iter()
        .map(|entry| {
            let (state, done) = match read_loop(&entry, store) {
                _ if !entry_live(&entry, pid_alive(&entry)) => ("pid_exited", None),
                LoopReading::Read { verdict, .. } => (
                    if verdict.done { "done" } else { "unfinished" },
                    Some(verdict),
                ),
                LoopReading::Missing => ("missing", None),
                _ => ("unreadable", None),
            };
            ActiveLoop { entry, state, done }
        })
        .collect();
    Ok(ActiveView {
        status: "ok",
        action: "active",
        registry: registry.display(),
        count: loops.len(),
        loops,
        unreadable,
    })
}

/// The Stop hook's verdict for a session under `root`, once the early
/// stand-downs (disabled, re-entry, a bad payload) did not apply. Never
/// fails: every doubt allows the stop.
pub fn stop_check(
    root: Option<&Path>,
    registry_dir: Option<&Path>,
    store: Option<&str>,
) -> HookVerdict {
    let (Some(root), Ok(registry)) = (root, Registry::locate(registry_dir)) else {
        return hook::verdict(None, LoopReading::NoneArmed);
    };
    let root = resolve(root);
    let (entries, _) = registry.entries();
    let Some(entry) = entries
        .iter()
        .find(|e| covers(&e.project_root, &root) && entry_live(e, pid_alive(e)))
    else {
        return hook::verdict(None, LoopReading::NoneArmed);
    };
    if let Some(verdict) = hook::driver_stand_down(entry, pid_alive(entry)) {
        return verdict;
    }
    let reading = read_loop(entry, store);
    let iterations = match &reading {
        LoopReading::Read { iterations, .. } => *iterations,
        _ => 0,
    };
    let (verdict, streak) = hook::bounded(
        hook::verdict(Some(entry), reading),
        registry.streak(&entry.run_id).as_ref(),
        iterations,
    );
    if let Some(streak) = streak {
        // Fail open: a streak that cannot be saved lets this block stand once.
        let _ = registry.save_streak(&entry.run_id, &streak);
    }
    verdict
}
