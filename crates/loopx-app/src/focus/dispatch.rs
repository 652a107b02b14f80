//! `goal-focus recover-dispatch`: the driver's open dispatch intent as the
//! enforce-mode pre-dispatch gate sees it, and the operator's exact-id
//! cancel of one no driver will settle.
//!
//! Owns: gathering what a person needs to decide (the intent, whether its
//! agent is alive, whether a driver holds it, what a restarting driver's
//! recovery would do) and the cancel's preconditions as IO: the exact open
//! id, no live agent, the driver lock free. Does not own the recovery rule
//! (`loopx_core::driver::recovery_plan`, read through
//! [`crate::driver::show_recovery`]), the cancel itself (the driver
//! owner's `Cancel` request), or the gate ([`loopx_core::focus::mode`]).

use crate::driver;
use crate::loop_dir::{LoopDir, Place};
use crate::AppError;
use jiff::Timestamp;
use loopx_core::driver::{Liveness, RecoveryPlan};
use loopx_store::sqlite::Access;
use serde::Serialize;

/// The open dispatch and what can be done about it.
#[derive(Debug, Clone, Serialize)]
pub struct OpenDispatch {
    pub dispatch_id: String,
    pub provider: String,
    pub iteration: u64,
    pub since: Timestamp,
    /// The turn's log, relative to the loop directory.
    pub log: String,
    /// What the agent record says: `not_started`, `gone`, `alive`, or
    /// `unknown` (missing or unreadable: it may be running).
    pub agent: &'static str,
    /// The pid of a live driver holding it (then it is that driver's
    /// current turn, not a leftover).
    pub running_driver: Option<u32>,
    /// What a restarting driver would do with it.
    pub recovery: RecoveryPlan,
    /// The exact command that cancels it (once no driver holds it).
    pub cancel_command: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DispatchView {
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    pub open: Option<OpenDispatch>,
    /// The dispatch this call cancelled.
    pub cancelled: Option<String>,
    pub warnings: Vec<String>,
}

impl DispatchView {
    pub fn text(&self) -> String {
        if let Some(id) = &self.cancelled {
            return format!("dispatch {id} cancelled: its turn is settled as cancelled and the pre-dispatch gate no longer waits for it");
        }
        let Some(open) = &self.open else {
            return format!("no dispatch is open in {}", self.dir);
        };
        let holder = match open.running_driver {
            Some(pid) => format!("driver pid {pid} runs it (its current turn)"),
            None => "no driver runs it".into(),
        };
        let next = match (&open.recovery, open.running_driver) {
            (_, Some(_)) => "wait for the driver to settle it".to_owned(),
            (RecoveryPlan::FailClosed { inspect, .. }, None) => {
                format!("a restarting driver would stop here: {inspect}; once looked at, {}", open.cancel_command)
            }
            (RecoveryPlan::CancelUnstarted { .. }, None) => format!(
                "a restarting driver cancels it (nothing recorded, workspace unchanged); or now: {}",
                open.cancel_command
            ),
            (RecoveryPlan::SettleAdvanced { .. }, None) => {
                "a restarting driver settles it (its iteration was recorded): `loopx recover --apply`".to_owned()
            }
            (RecoveryPlan::Clear, None) => String::new(),
        };
        format!(
            "open dispatch {} (iteration {}, {}, since {}): agent {}, {holder}\n  log {}\n  {next}",
            open.dispatch_id, open.iteration, open.provider, open.since, open.agent, open.log
        )
    }
}

fn agent_word(liveness: &Liveness) -> &'static str {
    match liveness {
        Liveness::NotStarted => "not_started",
        Liveness::Gone => "gone",
        Liveness::Alive => "alive",
        Liveness::Unknown { .. } => "unknown",
    }
}

/// The command that cancels `dispatch_id` in `dir`.
pub fn cancel_command(dir: &str, dispatch_id: &str) -> String {
    format!("loopx goal-focus recover-dispatch --dir {dir} --cancel --dispatch-id {dispatch_id}")
}

fn open_dispatch(dir: &LoopDir) -> Result<Option<OpenDispatch>, AppError> {
    let recovery = driver::show_recovery(dir)?;
    Ok(recovery.open.map(|intent| OpenDispatch {
        agent: agent_word(&driver::agent_liveness(dir, &intent.dispatch_id)),
        cancel_command: cancel_command(&dir.display(), &intent.dispatch_id),
        dispatch_id: intent.dispatch_id,
        provider: intent.provider,
        iteration: intent.iteration,
        since: intent.started_at,
        log: intent.log,
        running_driver: recovery.running_driver,
        recovery: recovery.plan,
    }))
}

/// `goal-focus recover-dispatch`: the open dispatch, read-only.
pub fn show(dir: &LoopDir) -> Result<DispatchView, AppError> {
    Ok(DispatchView {
        status: "ok",
        action: "goal-focus recover-dispatch",
        dir: dir.display(),
        open: open_dispatch(dir)?,
        cancelled: None,
        warnings: Vec::new(),
    })
}

/// Settle the open dispatch `dispatch_id` as cancelled: only that exact
/// id, only with its agent not alive, only while no driver holds the loop.
/// A refusal writes nothing.
pub fn cancel(root: Place<'_>, dispatch_id: &str) -> Result<DispatchView, AppError> {
    let dir = LoopDir::open(root, Access::ReadWrite)?;
    let given = dispatch_id.trim();
    let open = open_dispatch(&dir)?;
    let open = match open {
        Some(open) if open.dispatch_id == given => open,
        Some(open) => {
            return Err(AppError::refused(format!(
                "--dispatch-id {given:?} is not the open dispatch {}: a cancel names the exact open id (`loopx goal-focus recover-dispatch` shows it)",
                open.dispatch_id
            )))
        }
        None => {
            return Err(AppError::refused(format!(
                "no dispatch is open in {}: there is nothing to cancel",
                dir.display()
            )))
        }
    };
    if let Some(pid) = open.running_driver {
        return Err(AppError::refused(format!(
            "driver pid {pid} holds dispatch {given}: it is that driver's current turn; stop the driver first"
        )));
    }
    if open.agent == "alive" {
        return Err(AppError::refused(format!(
            "the agent of dispatch {given} is still running: a cancelled turn's agent could still write; stop it (`grep -l LOOPX_DISPATCH_ID={given} /proc/*/environ` finds it), then cancel"
        )));
    }
    driver::cancel_dispatch_by(&dir, given, "loopx goal-focus recover-dispatch --cancel")?;
    let warnings = dir.refresh_views();
    Ok(DispatchView {
        status: "ok",
        action: "goal-focus recover-dispatch --cancel",
        dir: dir.display(),
        open: None,
        cancelled: Some(given.to_owned()),
        warnings,
    })
}
