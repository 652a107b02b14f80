//! Where the panel's settings come from: `panel.json` (read confined and
//! bounded), the `drive --panel` switch and the environment, and the
//! Goal Focus mode a new loop gets from them. Also how a panel rule's
//! refusal becomes the application's. Not here: the rules themselves
//! (`loopx_core::panel`).

use crate::loop_dir::LoopDir;
use crate::{fsutil, AppError};
use loopx_core::panel::{PanelConfig, PanelProblem, Switch, FILE, PANEL_ENV};
use loopx_core::path::LoopPath;
use std::path::Path;

/// The largest panel.json read.
const CONFIG_BYTES: u64 = 64 * 1024;

/// The loop's panel.json, if there is one (refused when it is invalid).
pub fn load_config(dir: &LoopDir) -> Result<Option<PanelConfig>, AppError> {
    config_in(dir.root(), &dir.display())
}

/// The panel.json in the loop directory `root` (which need not be a loop
/// yet: `init` asks), read confined and bounded; `shown` names the
/// directory in messages.
pub(super) fn config_in(root: &Path, shown: &str) -> Result<Option<PanelConfig>, AppError> {
    let path = LoopPath::parse(FILE).expect("panel.json is a loop path");
    if root.join(FILE).symlink_metadata().is_err() {
        return Ok(None);
    }
    let bytes = fsutil::read_confined(root, &path, CONFIG_BYTES).map_err(|problem| {
        AppError::refused(format!(
            "{shown}: {FILE} {}; it must be a regular file of at most {CONFIG_BYTES} bytes",
            problem.describe()
        ))
    })?;
    PanelConfig::parse(&bytes)
        .map(Some)
        .map_err(|problem| AppError::refused(format!("{shown}/{problem}")))
}

/// Whether `drive --panel <switch>` runs the panel on this loop.
pub fn enabled(dir: &LoopDir, switch: Switch) -> Result<bool, AppError> {
    let config = match switch {
        Switch::Auto => load_config(dir)?,
        _ => None,
    };
    Ok(switch.resolve(std::env::var(PANEL_ENV).ok().as_deref(), config.as_ref()))
}

/// Whether a review panel is configured for the loop directory `root`:
/// what `drive --panel auto` would decide there ([`PANEL_ENV`], else
/// panel.json's `enabled`). A new loop's default mode follows it.
pub fn configured(root: &Path) -> Result<bool, AppError> {
    let config = config_in(root, &root.display().to_string())?;
    Ok(Switch::Auto.resolve(std::env::var(PANEL_ENV).ok().as_deref(), config.as_ref()))
}

/// The enforcement mode (and why) for a new loop in the directory `root`,
/// from `--goal-focus-mode`, else from whether a review panel is
/// configured there ([`configured`]: `AAS_AUTOLOOP_PANEL`,
/// else an enabled `panel.json` placed before `init`). An invalid
/// panel.json is refused rather than read as "no panel".
pub fn mode_for_new_loop(
    requested: Option<loopx_core::ledger::vocabulary::GoalFocusMode>,
    root: &Path,
) -> Result<
    (
        loopx_core::ledger::vocabulary::GoalFocusMode,
        loopx_core::ledger::mode::ModeSource,
    ),
    AppError,
> {
    let panel_configured = match requested {
        Some(_) => false,
        None => configured(root)?,
    };
    Ok(loopx_core::focus::mode::resolve(
        requested,
        panel_configured,
    ))
}

pub(super) fn refused(problem: PanelProblem) -> AppError {
    AppError::refused(problem.to_string())
}
