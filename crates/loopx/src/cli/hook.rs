//! Interactive forcing: arm, disarm, active, and the Stop-hook check.
//! The use cases are `loopx_app::arming`'s; `hook-check` keeps its own
//! rendering (it must fail open and speak the agent CLI's protocol).

use super::Reply;
use anyhow::Result;
use clap::Args;
use loopx_app::arming::{self, ArmRequest};
use loopx_app::driver::env;
use loopx_core::hook::{self, HookSignals};
use serde_json::json;
use std::io::Read as _;
use std::path::PathBuf;
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
    #[arg(long, env = env::LOOP_DIR)]
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

pub fn arm(args: &ArmArgs, store: Option<&str>) -> Result<Reply> {
    let armed = arming::arm(ArmRequest {
        loop_dir: args.dir.at(store),
        root: args.root.as_deref(),
        force: args.force,
        pid: args.pid,
        driver: args.driver,
        notify: args.notify.clone(),
        registry_dir: args.registry.registry_dir.as_deref(),
    })?;
    let text = format!(
        "armed loop {} for sessions under {}\nkill switch: loopx disarm --dir {}",
        armed.run_id, armed.project_root, armed.loop_dir
    );
    Reply::view(&armed, text)
}

pub fn disarm(args: &DisarmArgs) -> Result<Reply> {
    let disarmed = arming::disarm(
        args.registry.registry_dir.as_deref(),
        args.dir.as_deref(),
        args.run_id.as_deref(),
    )?;
    let text = if disarmed.removed.is_empty() {
        "nothing was armed for that loop".to_owned()
    } else {
        format!("disarmed {}", disarmed.removed.join(", "))
    };
    Reply::view(&disarmed, text)
}

pub fn active(args: &RegistryArgs, store: Option<&str>) -> Result<Reply> {
    let view = arming::active(args.registry_dir.as_deref(), store)?;
    Reply::view(&view, view.text())
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

pub fn hook_check(args: &HookCheckArgs, json: bool, store: Option<&str>) -> ExitCode {
    let verdict = decide(args, hook::parse_payload(&read_payload()).as_ref(), store);
    if json {
        super::print_json(&json!({
            "status": "ok", "action": "hook-check", "block": verdict.block,
            "reason": verdict.reason, "message": verdict.message,
        }));
    }
    match verdict.message {
        Some(message) if verdict.block => {
            eprintln!("{}", loopx_core::text::printable(&message));
            ExitCode::from(2)
        }
        Some(message) => {
            // Exit 0: the agent CLI lets the session stop; the note is for
            // whoever reads the hook's output.
            eprintln!(
                "loopx hook-check: {}",
                loopx_core::text::printable(&message)
            );
            ExitCode::SUCCESS
        }
        None => ExitCode::SUCCESS,
    }
}

/// The hook's verdict for this payload; never fails (every doubt allows).
pub fn decide(
    args: &HookCheckArgs,
    payload: Result<&serde_json::Map<String, serde_json::Value>, &hook::PayloadError>,
    store: Option<&str>,
) -> hook::HookVerdict {
    let signals = HookSignals {
        disabled: env_set("AUTOLOOP_DISABLE"),
        inside_driver: env_set(env::UNDER_DRIVER),
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
        arming::stop_check(
            root.as_deref(),
            args.registry.registry_dir.as_deref(),
            store,
        )
    })
}
