//! Interactive forcing: arm, disarm, active, and the Stop-hook check.

use super::Reply;
use anyhow::{bail, Result};
use clap::Args;
use loopx_app::clock;
use loopx_app::loop_dir::LoopDir;
use loopx_app::registry::Registry;
use loopx_core::hook::{
    self, covers, entry_live, ArmedLoop, HookSignals, LoopReading, ARMED_SCHEMA_VERSION,
};
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
    /// Tie the arming to this process: once it has exited, the entry forces
    /// nothing (0 = not tied to a process).
    #[arg(long, default_value_t = 0)]
    pub pid: u32,
    /// A headless driver owns the loop: while --pid lives, the Stop hook
    /// lets interactive sessions stop.
    #[arg(long)]
    pub driver: bool,
    /// Notification preference, stored in the registry entry for notify:
    /// auto, on, off, or a channel name (zulip, telegram, both).
    #[arg(long, value_parser = ["auto", "on", "off", "zulip", "telegram", "both"])]
    pub notify: Option<String>,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Disarm a loop: by --dir, by --run-id, or (with neither) the one armed
/// loop whose project root covers the current directory.
#[derive(Debug, Args)]
pub struct DisarmArgs {
    /// The loop directory.
    #[arg(long, env = "LOOPX_DIR")]
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
/// Reads the hook JSON on stdin. Stands down (exit 0) when AUTOLOOP_DISABLE
/// or AUTOLOOP_DRIVER is set, when stdin is not exactly one UTF-8 JSON
/// object, on re-entry (`stop_hook_active` truthy: anything but null,
/// false, 0, "", [] and {}), when a live `arm --driver` process owns the
/// loop, when a success claim awaits `loopx verify`, and after 5 blocked
/// stops without a new iteration.
///
/// The project is --root, else $GROK_WORKSPACE_ROOT, else
/// $CLAUDE_PROJECT_DIR, else the hook process's working directory. The
/// payload's `cwd` is never used: the agent can change it, and the
/// reference runtime ignores it too.
#[derive(Debug, Args)]
pub struct HookCheckArgs {
    /// The session's project root (default: $GROK_WORKSPACE_ROOT, then
    /// $CLAUDE_PROJECT_DIR, then the current directory).
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
    if !dir.join(loopx_app::loop_dir::DATABASE).is_file() {
        return LoopReading::Missing;
    }
    match LoopDir::open(dir, Access::ReadOnly).and_then(|d| d.read().map(|r| (d, r))) {
        Ok((dir, reading)) => LoopReading::Read {
            verdict: dir.verdict(&reading.ledger, clock::now()),
            iterations: reading.ledger.spent.iterations,
            pending_claim: reading.ledger.pending_claim,
        },
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
        if other.project_root == root && !args.force && entry_live(other, pid_alive(other)) {
            if let LoopReading::Read { verdict, .. } = read_loop(other) {
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
        pid: args.pid,
        driver: args.driver,
        notify_channel: args.notify.clone(),
    };
    let path = registry.write(&entry)?;
    let json = json!({
        "status": "ok", "action": "arm", "run_id": run_id, "registry": registry.display(),
        "entry": path.display().to_string(), "project_root": root, "loop_dir": entry.loop_dir,
        "pid": entry.pid, "driver": entry.driver, "notify_channel": entry.notify_channel,
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
    let (entries, _) = registry.entries();
    let mut dir = args.dir.as_deref().map(resolve);
    if dir.is_none() && args.run_id.is_none() {
        dir = Some(covering_here(&entries)?);
    }
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

/// The loop directory of the one armed loop whose root covers the current
/// directory; none or several is an error naming what to pass instead.
fn covering_here(entries: &[ArmedLoop]) -> Result<String> {
    let here = resolve(&std::env::current_dir()?);
    let covering: Vec<&ArmedLoop> = entries
        .iter()
        .filter(|e| covers(&e.project_root, &here))
        .collect();
    match covering.as_slice() {
        [one] => Ok(one.loop_dir.clone()),
        [] => bail!(
            "no armed loop covers {here}: pass --dir or --run-id (`loopx active` lists the armed loops)"
        ),
        several => bail!(
            "{} armed loops cover {here} ({}): pass --dir or --run-id to say which",
            several.len(),
            several
                .iter()
                .map(|e| format!("{} at {}", e.run_id, e.loop_dir))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

pub fn active(args: &RegistryArgs) -> Result<Reply> {
    let registry = Registry::locate(args.registry_dir.as_deref())?;
    let (entries, unreadable) = registry.entries();
    let mut loops = Vec::new();
    let mut text = String::new();
    for entry in &entries {
        let (state, done) = match read_loop(entry) {
            _ if !entry_live(entry, pid_alive(entry)) => ("pid_exited", None),
            LoopReading::Read { verdict, .. } => (
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

/// The hook payload's bytes on stdin, read with a deadline so that a hook
/// invoked with an open but silent pipe cannot hang the agent. A terminal
/// gives no payload.
fn read_payload() -> Vec<u8> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        return Vec::new();
    }
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = std::io::stdin().take(1 << 20).read_to_end(&mut bytes);
        let _ = send.send(bytes);
    });
    receive
        .recv_timeout(Duration::from_secs(2))
        .unwrap_or_default()
}

fn env_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

pub fn hook_check(args: &HookCheckArgs, json: bool) -> ExitCode {
    let verdict = decide(args, hook::parse_payload(&read_payload()).as_ref());
    if json {
        super::print_json(&json!({
            "status": "ok", "action": "hook-check", "block": verdict.block,
            "reason": verdict.reason, "message": verdict.message,
        }));
    }
    match verdict.message {
        Some(message) if verdict.block => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
        Some(message) => {
            // Exit 0: the agent CLI lets the session stop; the note is for
            // whoever reads the hook's output.
            eprintln!("loopx hook-check: {message}");
            ExitCode::SUCCESS
        }
        None => ExitCode::SUCCESS,
    }
}

/// Whether an entry's `--pid` process is alive (false when it has none).
fn pid_alive(entry: &ArmedLoop) -> bool {
    entry.pid != 0 && loopx_app::platform::exists(entry.pid)
}

/// The hook's verdict for this payload; never fails (every doubt allows).
pub fn decide(
    args: &HookCheckArgs,
    payload: Result<&serde_json::Map<String, serde_json::Value>, &hook::PayloadError>,
) -> hook::HookVerdict {
    let signals = HookSignals {
        disabled: env_set("AUTOLOOP_DISABLE"),
        inside_driver: env_set("AUTOLOOP_DRIVER"),
        reentrant: payload
            .ok()
            .and_then(|p| p.get("stop_hook_active"))
            .is_some_and(hook::truthy),
        bad_payload: payload.err().copied(),
    };
    hook::early_stand_down(signals).unwrap_or_else(|| {
        let env_root = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let root = args
            .root
            .clone()
            .or_else(|| env_root("GROK_WORKSPACE_ROOT"))
            .or_else(|| env_root("CLAUDE_PROJECT_DIR"))
            .or_else(|| std::env::current_dir().ok());
        let (Some(root), Ok(registry)) = (
            root,
            Registry::locate(args.registry.registry_dir.as_deref()),
        ) else {
            return hook::verdict(None, LoopReading::NoneArmed);
        };
        let root = resolve(&root);
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
        let reading = read_loop(entry);
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
    })
}
