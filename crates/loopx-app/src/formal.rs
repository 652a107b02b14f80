//! The formal (Lean) policy's IO around the core's rules
//! (`loopx_core::formal`): reading its sources (the loop's
//! `formal/formal_policy.json`, the standing orders in the store, the
//! `AAS_AUTOLOOP_FORMAL_*` variables, the flags), recording the standing
//! orders (`init`, and every drive start), the drive's pin file, the turn
//! prompt's section, the force tick the driver runs after an ok turn, and
//! the host's re-check of a Lean proof artifact (`formal recheck`).
//!
//! A source that says something wrong is an error naming it, before
//! anything is written. A loop none of whose sources mentions the policy
//! gets no `formal/` folder and no standing orders: the policy is off and
//! stays out of the way.
//!
//! The force tick never fails a drive and never changes the loop: it
//! spends a credit, scans, typechecks if asked, writes its report and
//! says one line. Its typecheck, like the re-check, runs Lake through the
//! [`TurnRunner`] the driver runs `--success-check` with: argv without a
//! shell, its own process group, a timeout and a bounded log.
//!
//! Not here: the rules (`loopx_core::formal`), the driver's loop
//! (`crate::driver::run`, which calls [`start_drive`] and [`after_turn`]).

use crate::continuation::NextTurn;
use crate::driver::env;
use crate::driver::options::Progress;
use crate::driver::runner::TurnRunner;
use crate::driver::turn::TurnContext;
use crate::error::AppError;
use crate::loop_dir::LoopDir;
use crate::{clock, fsutil, platform};
use anyhow::Result;
use loopx_core::digest::Digest;
use loopx_core::driver::capture::OutputCap;
use loopx_core::driver::session::TurnResult;
use loopx_core::formal::owner::{FormalRequest, OrdersSource, Recheck};
use loopx_core::formal::tick::{self, Report, Scan, Typecheck, TypecheckStatus};
use loopx_core::formal::{
    self as rule, FormalOwner, FormalProblem, Layer, Pin, Settings, Situation, Standing, STREAM,
};
use loopx_core::ledger::proof::EvidenceFiles as _;
use loopx_core::operation::{Clock, OperationId};
use loopx_core::path::{FileProblem, LoopPath};
use loopx_store::AuthorityError;
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// A force-loop profile's formal pins (`wanted`) over the loop's standing
/// orders, committed under `id` when they change them: the orders before
/// and after. A loop without orders that is pinned to the default changes
/// nothing.
pub fn pin_profile(
    dir: &LoopDir,
    id: &OperationId,
    wanted: &Layer,
) -> Result<(Settings, Settings), AppError> {
    let orders = standing(dir)?.orders;
    let before = orders.clone().unwrap_or_default();
    let after = Settings::resolve(&[&before.as_layer(), wanted]);
    let unchanged = match &orders {
        Some(_) => after == before,
        None => after == Settings::default(),
    };
    if !unchanged {
        set_orders(dir, id, &after, OrdersSource::Profile)?;
    }
    Ok((before, after))
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
/// (written once per start, private, replaced whole); a force tick whose
/// credits are all spent is said here, once.
pub fn start_drive(
    dir: &LoopDir,
    resolved: &Resolved,
    root: &Path,
    progress: &dyn Progress,
) -> Result<()> {
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
    if settings.force_tick() && standing(dir)?.credits_left(settings.force_credits) == 0 {
        progress.say(&exhausted(settings.force_credits));
    }
    Ok(())
}

fn exhausted(budget: u32) -> String {
    format!(
        "formal force tick: all {budget} credits are spent, so no tick runs after a turn (a drive with a larger --formal-force-credits allows more)"
    )
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

/// After a driven turn: when it was ok, and the policy is `force` with
/// the flag, one force tick. Whatever goes wrong is said and the drive
/// goes on; nothing here can stop, block or end the loop.
pub fn after_turn(context: TurnContext<'_>, result: TurnResult) {
    let settings = Settings::resolve(&[&context.options.formal]);
    if result != TurnResult::Advanced || !settings.force_tick() {
        return;
    }
    match force_tick(&context, &settings) {
        Ok(Some(line)) => context.progress.say(&line),
        Ok(None) => {}
        Err(error) => context.progress.say(&format!(
            "formal force tick failed ({error:#}); the drive goes on"
        )),
    }
}

fn force_tick(context: &TurnContext<'_>, settings: &Settings) -> Result<Option<String>> {
    let dir = context.dir;
    let root = context.options.root.as_path();
    let budget = settings.force_credits;
    let spent = standing(dir)?.credits_spent;
    if spent >= budget {
        // Said at the drive's start, or by the tick that spent the last.
        return Ok(None);
    }
    // Counted before anything runs: a host killed during the typecheck has
    // still spent it.
    let tick = spent + 1;
    let now = clock::now();
    let id = OperationId::parse(&crate::operation::fresh_name(&format!(
        "formal-tick-{tick}"
    )))?;
    dir.authority()
        .execute::<FormalOwner>(
            STREAM,
            &id,
            &FormalRequest::SpendCredit { tick, budget },
            &Clock { now },
            now,
        )
        .map_err(of_authority)?;
    let project_dir = find_project(dir.root(), root, &settings.project);
    let scan = project_dir.as_deref().map(scan);
    let typecheck = match (&project_dir, settings.typecheck) {
        (Some(project), true) => Some(typecheck(context, project, tick)?),
        _ => None,
    };
    let (terminal, hygiene_status) =
        tick::conclude(project_dir.is_some(), scan.as_ref(), typecheck.as_ref());
    let report = Report {
        schema_version: tick::REPORT_SCHEMA.to_owned(),
        writer: tick::WRITER.to_owned(),
        tick,
        at: now,
        iteration: dir.read()?.ledger.spent.iterations,
        driver_pid: std::process::id(),
        project: settings.project.clone(),
        project_dir: project_dir.map(|p| p.display().to_string()),
        terminal,
        hygiene_status,
        credits_budget: budget,
        credits_remaining: budget - tick,
        scan,
        typecheck,
        claim_support_status: tick::CLAIM_SUPPORT.to_owned(),
        no_claim_support_promotion: true,
    };
    let folder = fsutil::private_dir_below(dir.root(), &["formal", "force_loop_reports"])?;
    let name = format!("force_{}_tick{tick}.json", now.strftime("%Y%m%dT%H%M%SZ"));
    fsutil::write_private(
        &folder.join(&name),
        format!("{:#}\n", serde_json::to_value(&report)?).as_bytes(),
    )?;
    let build = match &report.typecheck {
        Some(t) => format!(
            ", lake build {}",
            serde_json::to_value(t.status)?.as_str().unwrap_or("?")
        ),
        None => String::new(),
    };
    let mut line = format!(
        "formal force tick {tick} of {budget}: {} ({}{build}); report {}/{name}",
        serde_json::to_value(report.hygiene_status)?
            .as_str()
            .unwrap_or("?"),
        serde_json::to_value(report.terminal)?
            .as_str()
            .unwrap_or("?"),
        rule::REPORTS,
    );
    if tick == budget {
        line.push_str(&format!("; {}", exhausted(budget)));
    }
    Ok(Some(line))
}

/// The Lake project `project` names: looked for in the loop directory,
/// then in the project root (the reference's order), confined to the one
/// it is looked for in, and only where a lakefile is.
pub fn find_project(loop_dir: &Path, root: &Path, project: &str) -> Option<PathBuf> {
    let relative = project.trim().trim_end_matches('/');
    LoopPath::parse(relative).ok()?;
    [loop_dir, root].into_iter().find_map(|base| {
        let base = base.canonicalize().ok()?;
        let found = base.join(relative).canonicalize().ok()?;
        let lakefile = ["lakefile.lean", "lakefile.toml"].iter().any(|name| {
            found
                .join(name)
                .symlink_metadata()
                .is_ok_and(|m| m.is_file())
        });
        (found.starts_with(&base) && lakefile).then_some(found)
    })
}

/// The crude scan: whole-word `sorry`s in the project's `.lean` files
/// (its build folders and hidden ones left out, no symlink followed).
fn scan(project: &Path) -> Scan {
    let mut files = Vec::new();
    let mut cut_short = false;
    let mut folders = vec![project.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && !name.starts_with('.') && name != "lake-packages" {
                folders.push(entry.path());
            } else if kind.is_file() && name.ends_with(".lean") {
                if files.len() == tick::SCAN_FILES {
                    cut_short = true;
                } else {
                    files.push(entry.path());
                }
            }
        }
    }
    let sorry_count = files
        .iter()
        .filter_map(|file| fsutil::read_bounded(file, tick::SCAN_FILE_BYTES).ok())
        .map(|bytes| tick::count_sorry(&String::from_utf8_lossy(&bytes)))
        .sum();
    Scan {
        lean_files: files.len(),
        sorry_count,
        cut_short,
    }
}

/// `lake build` in `project`, for the force tick.
fn typecheck(context: &TurnContext<'_>, project: &Path, tick: u32) -> Result<Typecheck> {
    let timeout_s = rule::typecheck_timeout(
        std::env::var(rule::ENV_TYPECHECK_TIMEOUT).ok().as_deref(),
        context.options.iteration_timeout.as_secs(),
    )
    .map_err(anyhow::Error::msg)?;
    let lake = Lake {
        dir: context.dir,
        runner: context.runner,
        cap: context.options.output_cap,
        timeout_s,
    };
    lake.run(
        project,
        vec!["lake".into(), "build".into()],
        &format!("formal-tick-{tick}"),
    )
}

/// How the host runs Lake: as it runs every command of its own
/// (`crate::driver::host`: argv without a shell, its own process group, a
/// timeout, the output bounded into a private log in the driver's logs).
struct Lake<'a> {
    dir: &'a LoopDir,
    runner: &'a dyn TurnRunner,
    cap: OutputCap,
    timeout_s: u64,
}

impl Lake<'_> {
    /// Run `argv` (its first word `lake`, found on PATH) in `project`; a
    /// `lake` that is not there, or cannot start, is `tool_unavailable`.
    fn run(&self, project: &Path, argv: Vec<String>, label: &str) -> Result<Typecheck> {
        let mut result = Typecheck {
            status: TypecheckStatus::ToolUnavailable,
            argv: argv.clone(),
            exit_code: None,
            duration_ms: 0,
            timeout_s: self.timeout_s,
            log: None,
            detail: String::new(),
        };
        let Some(lake) = platform::which("lake") else {
            result.detail = "lake is not on PATH".into();
            return Ok(result);
        };
        let ran = crate::driver::host::run(
            self.dir,
            self.runner,
            crate::driver::host::HostCommand {
                program: lake.into_os_string(),
                args: argv[1..].to_vec(),
                cwd: project.to_path_buf(),
                env: Vec::new(),
                // A host check of the agent's project: it has no business
                // with the loop's identity or the consents to send state away.
                env_removed: env::WITHHELD_FROM_REVIEWERS,
                timeout: Duration::from_secs(self.timeout_s),
                cap: self.cap,
                label: label.to_owned(),
                kind: "lake",
            },
        )?;
        result.log = Some(ran.log);
        let ran = match ran.outcome {
            Ok(ran) => ran,
            Err(error) => {
                result.detail = format!("lake could not be started: {error:#}");
                return Ok(result);
            }
        };
        result.exit_code = ran.exit_status;
        result.duration_ms = ran.elapsed.as_millis() as u64;
        result.status = if ran.stopped_by.is_some() {
            TypecheckStatus::Interrupted
        } else if ran.timed_out {
            TypecheckStatus::TimedOut
        } else if ran.exit_status == Some(0) {
            TypecheckStatus::Passed
        } else {
            TypecheckStatus::Failed
        };
        Ok(result)
    }
}

/// What `formal recheck` saw and recorded.
#[derive(Debug, Clone, Serialize)]
pub struct RecheckView {
    pub evidence_id: String,
    pub passed: bool,
    pub recheck: Recheck,
}

/// Re-check the Lean proof artifact `evidence_id` as the host: the
/// artifact must be valid, of type `lean` with Lake as its checker, and
/// its proof file inside a Lake project in the loop directory (the nearest
/// folder above it with a lakefile). `lake env lean <file>` runs there
/// through `runner`; passed means Lean passed and the file has no `sorry`.
/// The result, with the digests of what was checked, is recorded in the
/// store whatever it is. An artifact that cannot be re-checked is refused,
/// and nothing is written.
pub fn recheck_proof(
    dir: &LoopDir,
    evidence_id: &str,
    timeout_s: u64,
    cap: OutputCap,
    runner: &dyn TurnRunner,
) -> Result<RecheckView, AppError> {
    let files = dir.files();
    let problems = loopx_core::ledger::proof::artifact_problems(evidence_id, &files);
    if !problems.is_empty() {
        return Err(AppError::refused(format!(
            "{}; nothing was checked",
            problems.join("; ")
        )));
    }
    let artifact_bytes = files
        .proof_artifact(evidence_id)
        .map_err(|problem| AppError::refused(problem.describe()))?;
    let artifact: serde_json::Value =
        serde_json::from_slice(&artifact_bytes).map_err(|e| AppError::refused(e.to_string()))?;
    let proof = rule::recheck::lake_proof(&artifact)
        .map_err(|why| AppError::refused(format!("{why}; nothing was checked")))?;
    let (project, inside) = lake_project_of(dir.root(), &proof).ok_or_else(|| {
        AppError::refused(format!(
            "{} lies in no Lake project in the loop directory (no lakefile.lean or lakefile.toml in a folder above it); nothing was checked",
            proof.as_str()
        ))
    })?;
    let proof_bytes =
        fsutil::read_confined(dir.root(), &proof, tick::SCAN_FILE_BYTES).map_err(|problem| {
            AppError::refused(format!("{} {}", proof.as_str(), problem.describe()))
        })?;
    let lake = Lake {
        dir,
        runner,
        cap,
        timeout_s,
    };
    let ran = lake.run(
        &dir.root().join(project.as_str()),
        rule::recheck::argv(&inside),
        &format!("recheck-{evidence_id}"),
    )?;
    let recheck = Recheck {
        status: ran.status,
        sorry_count: tick::count_sorry(&String::from_utf8_lossy(&proof_bytes)),
        artifact_digest: Digest::of_bytes(&artifact_bytes),
        proof_digest: Digest::of_bytes(&proof_bytes),
        proof_path: proof.as_str().to_owned(),
        project: project.as_str().to_owned(),
        argv: ran.argv,
        exit_code: ran.exit_code,
        duration_ms: ran.duration_ms,
        log: ran.log,
        at: clock::now(),
    };
    let now = clock::now();
    let id = OperationId::parse(&crate::operation::fresh_name("formal-recheck"))
        .map_err(|e| AppError::refused(e.to_string()))?;
    let request = FormalRequest::RecordRecheck {
        evidence_id: evidence_id.to_owned(),
        recheck: recheck.clone(),
    };
    dir.authority()
        .execute::<FormalOwner>(STREAM, &id, &request, &Clock { now }, now)
        .map_err(of_authority)?;
    Ok(RecheckView {
        evidence_id: evidence_id.to_owned(),
        passed: recheck.passed(),
        recheck,
    })
}

/// The Lake project holding `proof`: the nearest folder above it, inside
/// the loop directory, with a lakefile, and the proof's path inside it.
/// (The proof file was read through no symlink, so neither were these.)
fn lake_project_of(root: &Path, proof: &LoopPath) -> Option<(LoopPath, String)> {
    let parts: Vec<&str> = proof.as_str().split('/').collect();
    (1..parts.len()).rev().find_map(|depth| {
        let folder = parts[..depth].join("/");
        let lakefile = ["lakefile.lean", "lakefile.toml"].iter().any(|name| {
            (root.join(&folder).join(name).symlink_metadata()).is_ok_and(|m| m.is_file())
        });
        match lakefile {
            true => Some((LoopPath::parse(&folder).ok()?, parts[depth..].join("/"))),
            false => None,
        }
    })
}

/// What `formal status` shows: the policy in force with its sources, the
/// standing orders, the credits and the host's re-checks.
#[derive(Debug, Clone, Serialize)]
pub struct StatusView {
    pub settings: Settings,
    pub in_use: bool,
    pub standing: Standing,
    pub credits_left: u32,
}

/// `formal status`: read-only.
pub fn status(dir: &LoopDir) -> Result<StatusView, AppError> {
    let resolved = resolve(dir, &Layer::default())?;
    let standing = standing(dir)?;
    Ok(StatusView {
        credits_left: standing.credits_left(resolved.settings.force_credits),
        settings: resolved.settings,
        in_use: resolved.in_use,
        standing,
    })
}
