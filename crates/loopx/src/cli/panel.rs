//! `loopx panel`: one panel phase on a loop, now, without a driver.

use super::Reply;
use crate::process::Plain;
use anyhow::Result;
use clap::Args;
use loopx_app::containment::Containment;
use loopx_app::driver;
use loopx_core::panel::Phase;

/// Run the review panel once: invite reviewers of another model family
/// than the executor as real child processes (each in its own process
/// group, killed at its timeout, stdout captured up to 1 MiB) until one's
/// answer decides, every one was tried, or the attempts run out.
///
/// result_review: on the candidate pending review; a deciding
/// result_review.v1 banks it (accepted or rejected) exactly as `loopx
/// goal-focus review` does. strategy_review: on the plan a replan left
/// awaiting review; a deciding strategy_advice.v1 commits the next plan
/// exactly as `loopx goal-focus strategy-review` does. target_advice (the
/// legacy flow, for loops Goal Focus does not enforce; refused in enforce
/// mode): every invited reviewer is asked once for free-text advice on the
/// loop's single next path; the host writes
/// panel/<state>/target_advice/host_synthesis.md, which the next driven
/// turn's prompt points at. Advice decides nothing.
///
/// Configuration: <dir>/panel.json (providers, exclude_until_credit,
/// timeout_mode, timeouts, timeouts_by_provider, timeout_calc,
/// require_different_family, max_attempts; unknown keys are refused).
/// AAS_AUTOLOOP_PANEL_PROVIDERS=codex,claude overrides the invite list.
///
/// Consent: the brief holds the candidate and its evidence, so in enforce
/// mode nothing is started unless AAS_AUTOLOOP_EXTERNAL_PANEL_EGRESS=allow.
///
/// Artifacts: <dir>/panel/<candidate>/<phase>/<attempt>-<provider>.prompt,
/// .out (redacted) and .json, private to you. Exit 0 when an answer
/// decided (target_advice: when a reviewer advised); 1 when the subject
/// stays pending (every reviewer failed,
/// timed out, answered malformed or was refused) or the run was refused.
///
/// --smoke: before a long run, check that the reviewers start and answer.
/// Each reviewer the panel would invite (panel.json in --dir if there is
/// one) is sent a fixed one-line prompt holding nothing of any loop, in a
/// private temporary directory; no loop is needed and nothing is written.
/// Exit 0 when at least one answered.
#[derive(Debug, Args)]
pub struct PanelArgs {
    #[command(flatten)]
    pub dir: super::ledger::DirArgs,
    /// The review to run.
    #[arg(long, value_enum, required_unless_present = "smoke")]
    pub phase: Option<PhaseArg>,
    /// Check that the reviewers start and answer a one-line prompt, and
    /// review nothing.
    #[arg(long, conflicts_with_all = ["phase", "executor"])]
    pub smoke: bool,
    /// Seconds per reviewer: in adaptive mode a floor for the phase's base
    /// (scaled and clamped as panel.json says); in fixed mode the cap.
    /// With --smoke, the cap (default 120).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// strategy_review: the executor's provider, when no driver has named
    /// one (must agree with the driver's when one has). target_advice: the
    /// provider that will run the turn (its family is not invited when
    /// panel.json requires a different family).
    #[arg(long)]
    pub executor: Option<String>,
    /// Accepted so the reference runtime's command line works; unused:
    /// reviewers never work in the project (each runs in its own artifact
    /// folder and answers from its brief).
    #[arg(long, value_name = "PROJECT")]
    pub root: Option<std::path::PathBuf>,
    /// How reviewer processes run: trusted-local (an explicit opt-in:
    /// attested claude, codex or codewhale binaries, each reviewer in its
    /// own cgroup scope under bubblewrap; see `loopx attest`) or
    /// strict-isolated (not available yet: refused). Default:
    /// AAS_AUTOLOOP_PROVIDER_TRANSPORT; without either, refused in Goal
    /// Focus enforce mode (where the panel runs), unconfined elsewhere.
    #[arg(long, value_name = "TRANSPORT")]
    pub transport: Option<String>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum PhaseArg {
    StrategyReview,
    ResultReview,
    TargetAdvice,
}

pub fn panel(args: &PanelArgs, store: Option<&str>) -> Result<Reply> {
    if args.timeout == Some(0) {
        return Err(loopx_app::AppError::refused("--timeout must be at least 1 second").into());
    }
    let phase = match args.phase {
        None => return smoke(args),
        Some(PhaseArg::StrategyReview) => Phase::StrategyReview,
        Some(PhaseArg::ResultReview) => Phase::ResultReview,
        Some(PhaseArg::TargetAdvice) => Phase::TargetAdvice,
    };
    let prepared = loopx_app::panel::prepare(
        args.dir.at(store),
        phase,
        args.executor.as_deref(),
        args.transport.as_deref(),
    )?;
    // One process works a loop at a time: a driver running this loop runs
    // its own panel.
    let _lock = driver::take_lock(prepared.dir())?;
    loopx_app::platform::catch_stop_signals()?;
    let announce = |line: &str| eprintln!("loopx panel: {}", loopx_core::text::printable(line));
    let view = driver::reviewer::review(prepared, args.timeout, &Plain, &announce)?;
    let mut reply = Reply::view(&view, view.text())?;
    if !view.answered() {
        reply.code = 1;
    }
    Ok(reply)
}

/// How a smoke prompt is run (`panel --smoke`, `smoke --live`): as a
/// reviewer, unconfined, saying on stderr what it tries (as `who`).
pub(crate) fn smoke_runner(
    who: &'static str,
) -> impl FnMut(&loopx_app::panel::Launch) -> Result<loopx_app::panel::Ran> {
    move |launch| {
        eprintln!(
            "{who}: smoke-testing {} (timeout {}s)",
            launch.provider,
            launch.timeout.as_secs()
        );
        // Its process record goes beside it, in the temporary directory.
        driver::reviewer::run_reviewer(&Plain, &launch.cwd, launch, &Containment::Unconfined)
    }
}

/// `loopx panel --smoke`.
fn smoke(args: &PanelArgs) -> Result<Reply> {
    let mut runner = smoke_runner("loopx panel");
    let view = loopx_app::panel::smoke(&args.dir.dir, args.timeout, &mut runner)?;
    let mut reply = Reply::view(&view, view.text())?;
    if !view.passed() {
        reply.code = 1;
    }
    Ok(reply)
}
