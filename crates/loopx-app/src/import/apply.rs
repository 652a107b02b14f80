//! Creating the imported loop so that a crash leaves either no loop at
//! `--dir` or a complete one: where it may go ([`check_target`]), the
//! requests committed through the authority in a fresh directory beside
//! it, then the rename into place. Not here: deciding the requests
//! (`map.rs`).

use super::map::{import_request, ledger_context, operation, Plan, FOCUS_OPERATION};
use super::source::refused;
use super::view::ImportView;
use crate::loop_dir::{LoopDir, Reading, DATABASE};
use crate::AppError;
use anyhow::Context as _;
use jiff::Timestamp;
use loopx_core::focus::decisions::{DecisionContext, ImportedDecisionOwner, RecordImport};
use loopx_core::focus::replan::{ImportedPlanOwner, PlanContext};
use loopx_core::focus::{self, ContractOwner, RegistryOwner, Revise};
use loopx_core::ledger::{LedgerOwner, LedgerRequest, STREAM};
use loopx_core::operation::Clock;
use loopx_store::sqlite::Access;
use std::path::{Path, PathBuf};

/// Where the new loop may go: `to` must not exist, or be an empty
/// directory, and must not be inside the source (which import never
/// writes to).
pub(super) fn check_target(from: &Path, to: &Path) -> Result<(), AppError> {
    if to.join(DATABASE).symlink_metadata().is_ok() {
        return Err(refused(format!(
            "{} already holds a loop: import creates a new loop and never writes into an existing one; choose a new --dir; nothing was written",
            to.display()
        )));
    }
    match std::fs::read_dir(to) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(refused(format!(
                    "{} exists and is not empty: import creates the loop directory itself; choose a new --dir; nothing was written",
                    to.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(refused(format!(
                "{} cannot be used as the new loop directory ({e}); choose a new --dir; nothing was written",
                to.display()
            )))
        }
    }
    let target = absolute(to)?;
    if target.starts_with(from) {
        return Err(refused(format!(
            "{} is inside the source {}: import never writes into the source; choose a --dir outside it; nothing was written",
            to.display(),
            from.display()
        )));
    }
    Ok(())
}

/// `path` made absolute through its nearest existing ancestor (links in
/// that ancestor resolved), so it compares with a canonical source path.
fn absolute(path: &Path) -> Result<PathBuf, AppError> {
    let path = std::path::absolute(path).map_err(anyhow::Error::new)?;
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return Ok(out);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            // `..` below a directory that does not exist: where it leads
            // cannot be known before it is created, so it is not guessed.
            (Some(_), None) => {
                return Err(refused(format!(
                    "{} goes up (`..`) out of a directory that does not exist yet: name the new loop directory without it; nothing was written",
                    path.display()
                )))
            }
            _ => return Ok(path.clone()),
        }
    }
}

/// Build the loop in a fresh directory beside `to`, then rename it into
/// place: until the rename there is no loop at `to`; after it, a complete
/// one. A build that fails removes its directory.
pub(super) fn create(plan: Plan, to: &Path, now: Timestamp) -> Result<ImportView, AppError> {
    let target = absolute(to)?;
    let parent = target
        .parent()
        .ok_or_else(|| refused(format!("{} has no parent directory", to.display())))?;
    let name = target
        .file_name()
        .ok_or_else(|| refused(format!("{} names no directory", to.display())))?;
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let building = parent.join(format!(
        ".{}.import-{:016x}",
        name.to_string_lossy(),
        crate::platform::random_u64()
    ));
    let built = build(&plan, &building, now);
    let result = built.and_then(|mut view| {
        loopx_store::failpoint::reached("import.before_rename");
        // rename(2) replaces an empty directory and refuses a non-empty one.
        std::fs::rename(&building, &target).with_context(|| {
            format!(
                "cannot move the new loop into {} (did something appear there meanwhile?)",
                to.display()
            )
        })?;
        crate::platform::sync_dir(parent)?;
        view.dry_run = false;
        Ok(view)
    });
    let mut view = match result {
        Ok(view) => view,
        Err(error) => {
            let _ = std::fs::remove_dir_all(&building);
            return Err(error.into());
        }
    };
    // The loop is in place: the views (which name its directory) are
    // written from there, and what goes wrong now is only a warning.
    match LoopDir::open(
        crate::loop_dir::Place::new(&target, None),
        Access::ReadWrite,
    ) {
        Ok(dir) => {
            view.dir = dir.display();
            view.warnings.extend(dir.refresh_views());
        }
        Err(error) => view
            .warnings
            .push(crate::loop_dir::view_warning("the views", error)),
    }
    Ok(view)
}

fn build(plan: &Plan, building: &Path, now: Timestamp) -> anyhow::Result<ImportView> {
    // Unsynced while it is built: nobody sees this directory until it is
    // complete, synced (below) and renamed into place.
    let dir = LoopDir::create_unsynced(building)?;
    let authority = dir.authority();
    let init_id = plan.init_operation.clone();
    let receipt = authority.execute::<LedgerOwner>(
        STREAM,
        &init_id,
        &LedgerRequest::Init(plan.init.clone()),
        &ledger_context(plan.created_at, &init_id),
        now,
    )?;
    let run_id = match receipt.body {
        loopx_core::ledger::LedgerReceipt::Init { run_id, .. } => run_id,
        _ => unreachable!("init yields an init receipt"),
    };
    if let Some(iterations) = &plan.iterations {
        iterations.each(&mut |_, source_record| {
            let request = import_request(&source_record);
            let LedgerRequest::ImportIteration(record) = &request else {
                unreachable!("an import request imports")
            };
            let id = record.operation_id.clone();
            authority
                .execute::<LedgerOwner>(STREAM, &id, &request, &ledger_context(now, &id), now)
                .map_err(|e| AppError::from(anyhow::Error::from(e)))?;
            Ok(())
        })?;
    }
    let focus_id = operation(FOCUS_OPERATION);
    let clock = Clock { now };
    if let Some(contract) = &plan.contract {
        let request = Revise {
            base_revision: Some(0),
            document: contract.clone(),
        };
        authority.execute::<ContractOwner>(
            focus::CONTRACT_STREAM,
            &focus_id,
            &request,
            &clock,
            now,
        )?;
    }
    if let Some(registry) = &plan.registry {
        let request = Revise {
            base_revision: Some(0),
            document: registry.clone(),
        };
        authority.execute::<RegistryOwner>(
            focus::REGISTRY_STREAM,
            &focus_id,
            &request,
            &clock,
            now,
        )?;
    }
    if let Some(request) = &plan.plan {
        let reading = dir.focus()?;
        let context = PlanContext {
            now,
            mode: reading.mode(),
            ledger: &reading.ledger,
            contract: &reading.contract,
            registry: &reading.registry,
            read_plan_revision: 0,
        };
        authority.execute::<ImportedPlanOwner>(
            focus::PLAN_STREAM,
            &focus_id,
            request,
            &context,
            now,
        )?;
        authority.execute::<ImportedDecisionOwner>(
            focus::DECISIONS_STREAM,
            &focus_id,
            &RecordImport {
                decision_id: focus_id.to_string(),
                plan: request.clone(),
            },
            &DecisionContext {
                plan: &context,
                replaced: None,
            },
            now,
        )?;
    }
    let Reading { ledger, .. } = dir.read()?;
    anyhow::ensure!(
        ledger == plan.ledger,
        "the committed ledger differs from the one decided in memory: nothing is moved into place"
    );
    let mut view = plan.view.clone();
    view.run_id = Some(run_id);
    dir.sync_built()?;
    Ok(view)
}
