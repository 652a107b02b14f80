//! Interactive forcing: arm, disarm, active, and the Stop-hook check.

use super::Reply;
use crate::clock;
use crate::loop_dir::LoopDir;
use crate::registry::Registry;
use anyhow::{bail, Result};
use clap::Args;
use loopx_core::hook::{self, covers, ArmedLoop, HookSignals, LoopReading, ARMED_SCHEMA_VERSION};
use loopx_store::sqlite::Access;
use serde_json::json;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// Where armed loops are registered (default: $XDG_STATE_HOME/loopx or
    /// ~/.local/state/loopx).
    #[arg(long, env = "LOOPX_REGISTRY_DIR")]
    pub registry_dir: Option<PathBuf>,
}

/// Arm a loop: agent sessions under --root may not end their turn while it
/// is unfinished (enforced by `loopx hook-check` in the agent's Stop hook).
#[derive(Debug, Args)]
pub struct ArmArgs {
    #[command(flatten)]
    pub dir: super::ledger::DirArgs,
    /// The project root whose sessions this loop forces (default: the
    /// current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Arm even though another unfinished loop is armed for the same root.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Disarm a loop (by --dir, or by --run-id).
#[derive(Debug, Args)]
pub struct DisarmArgs {
    /// The loop directory.
    #[arg(long, env = "LOOPX_DIR", required_unless_present = "run_id")]
    pub dir: Option<PathBuf>,
    /// The armed loop's run id (from `loopx active`), instead of --dir.
    #[arg(long)]
    pub run_id: Option<String>,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// The Stop-hook check: exit 2 (reason on stderr) only when an armed loop
/// covering this project is unfinished; exit 0 in every other case.
///
/// Reads the hook JSON on stdin (`stop_hook_active`, `cwd`). Stands down
/// when AUTOLOOP_DISABLE or AUTOLOOP_DRIVER is set, or on re-entry.
#[derive(Debug, Args)]
pub struct HookCheckArgs {
    /// The session's project root (default: $CLAUDE_PROJECT_DIR, then the
    /// payload's cwd, then the current directory).
    #[arg(long)]
    pub root: Option<PathBuf>,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

fn resolve(path: &Path) -> String {
    path.canonicalize()
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// The loop an entry names, judged now; `Missing` when it is gone.
fn read_loop(entry: &ArmedLoop) -> LoopReading {
    let dir = Path::new(&entry.loop_dir);
    if !dir.join(crate::loop_dir::DATABASE).is_file() {
        return LoopReading::Missing;
    }
    match LoopDir::open(dir, Access::ReadOnly).and_then(|d| d.read().map(|r| (d, r))) {
        Ok((dir, reading)) => LoopReading::Read(
            dir.verdict(&reading.ledger, clock::now()),
            reading.ledger.spent.iterations,
        ),
        Err(error) => LoopReading::Unreadable(error.to_string()),
    }
}

pub fn arm(args: &ArmArgs) -> Result<Reply> {
    let dir = LoopDir::open(&args.dir.dir, Access::ReadOnly)?;
    let run_id = dir.read()?.ledger.run_id;
    let root = resolve(&args.root.clone().unwrap_or(std::env::current_dir()?));
    let registry = Registry::locate(args.registry.registry_dir.as_deref())?;
    let _lock = registry.lock()?;
    let (entries, _) = registry.entries();
    for other in entries.iter().filter(|e| e.run_id != run_id) {
        if other.project_root == root && !args.force {
            if let LoopReading::Read(verdict, _) = read_loop(other) {
                if !verdict.done {
                    bail!(
                        "loop {} ({}) is already armed for {root} and unfinished: disarm it with `loopx disarm --run-id {}`, or pass --force",
                        other.run_id,
                        other.loop_dir,
                        other.run_id
                    );
                }
            }
        }
    }
    let entry = ArmedLoop {
        schema_version: ARMED_SCHEMA_VERSION.into(),
        run_id: run_id.clone(),
        loop_dir: dir.display(),
        project_root: root.clone(),
        armed_at: clock::now(),
    };
    let path = registry.write(&entry)?;
    let json = json!({
        "status": "ok", "action": "arm", "run_id": run_id, "registry": registry.display(),
        "entry": path.display().to_string(), "project_root": root, "loop_dir": entry.loop_dir,
    });
    Ok(Reply::ok(
        json,
        format!(
            "armed loop {run_id} for sessions under {root}\nkill switch: loopx disarm --dir {}",
            entry.loop_dir
        ),
    ))
}

pub fn disarm(args: &DisarmArgs) -> Result<Reply> {
    let registry = Registry::locate(args.registry.registry_dir.as_deref())?;
    let _lock = registry.lock()?;
    let dir = args.dir.as_deref().map(resolve);
    let (entries, _) = registry.entries();
    let mut removed = Vec::new();
    for entry in entries {
        let named = args.run_id.as_deref() == Some(entry.run_id.as_str())
            || dir.as_deref() == Some(entry.loop_dir.as_str());
        if named && registry.remove(&entry.run_id)? {
            removed.push(entry.run_id);
        }
    }
    let text = if removed.is_empty() {
        "nothing was armed for that loop".to_owned()
    } else {
        format!("disarmed {}", removed.join(", "))
    };
    let json = json!({"status": "ok", "action": "disarm", "removed": removed, "registry": registry.display()});
    Ok(Reply::ok(json, text))
}

pub fn active(args: &RegistryArgs) -> Result<Reply> {
    let registry = Registry::locate(args.registry_dir.as_deref())?;
    let (entries, unreadable) = registry.entries();
    let mut loops = Vec::new();
    let mut text = String::new();
    for entry in &entries {
        let (state, done) = match read_loop(entry) {
            LoopReading::Read(verdict, _) => (
                if verdict.done { "done" } else { "unfinished" },
                Some(verdict),
            ),
            LoopReading::Missing => ("missing", None),
            _ => ("unreadable", None),
        };
        text.push_str(&format!(
            "{}  {state:<10}  {}  (root {})\n",
            entry.run_id, entry.loop_dir, entry.project_root
        ));
        loops.push(json!({"entry": entry, "state": state, "done": done}));
    }
    if entries.is_empty() {
        text.push_str("no loop is armed\n");
    }
    for name in &unreadable {
        text.push_str(&format!("unreadable registry entry: {name}\n"));
    }
    let json = json!({
        "status": "ok", "action": "active", "registry": registry.display(),
        "count": loops.len(), "loops": loops, "unreadable": unreadable,
    });
    Ok(Reply::ok(json, text))
}

/// The hook payload on stdin, read with a deadline so that a hook invoked
/// with an open but silent pipe cannot hang the agent.
fn read_payload() -> serde_json::Value {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        return serde_json::Value::Null;
    }
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = std::io::stdin().take(1 << 20).read_to_end(&mut bytes);
        let _ = send.send(bytes);
    });
    let bytes = receive
        .recv_timeout(Duration::from_secs(2))
        .unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null)
}

fn env_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

pub fn hook_check(args: &HookCheckArgs, json: bool) -> ExitCode {
    let verdict = decide(args, &read_payload());
    if json {
        super::print_json(
            &json!({"status": "ok", "action": "hook-check", "block": verdict.block, "reason": verdict.reason}),
        );
    }
    match verdict.message {
        Some(message) if verdict.block => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
        _ => ExitCode::SUCCESS,
    }
}

/// The hook's verdict for this payload; never fails (every doubt allows).
pub fn decide(args: &HookCheckArgs, payload: &serde_json::Value) -> hook::HookVerdict {
    let signals = HookSignals {
        disabled: env_set("AUTOLOOP_DISABLE"),
        inside_driver: env_set("AUTOLOOP_DRIVER"),
        reentrant: payload
            .get("stop_hook_active")
            .is_some_and(|v| v.as_bool().unwrap_or(!v.is_null())),
    };
    hook::early_stand_down(signals).unwrap_or_else(|| {
        let root = args
            .root
            .clone()
            .or_else(|| {
                std::env::var_os("CLAUDE_PROJECT_DIR")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .or_else(|| {
                payload
                    .get("cwd")
                    .and_then(|v| v.as_str())
                    .map(PathBuf::from)
            })
            .or_else(|| std::env::current_dir().ok());
        let (Some(root), Ok(registry)) = (
            root,
            Registry::locate(args.registry.registry_dir.as_deref()),
        ) else {
            return hook::verdict(None, LoopReading::NoneArmed);
        };
        let root = resolve(&root);
        let (entries, _) = registry.entries();
        let Some(entry) = entries.iter().find(|e| covers(&e.project_root, &root)) else {
            return hook::verdict(None, LoopReading::NoneArmed);
        };
        let reading = read_loop(entry);
        let iterations = match &reading {
            LoopReading::Read(_, iterations) => *iterations,
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
        if verdict.reason == "block_limit_reached" {
            eprintln!(
                "loopx hook-check: {} ({})",
                verdict.message.as_deref().unwrap_or(""),
                entry.loop_dir
            );
        }
        verdict
    })
}
