//! Staging, result review and quarantine as the application reaches them:
//! `append-iteration` in enforce mode (staging), `goal-focus review`,
//! `goal-focus quarantine` and `goal-focus recover-quarantine`, each
//! returning a typed view.
//!
//! Owns: the IO these need and nothing more: reading each evidence file
//! through the loop directory's confined, no-follow, bounded read; reading
//! a review document; looking a provider's family up in the provider table
//! with the real environment; and committing a finalization as ONE atomic
//! group (the ledger row with its budget charge, and the candidate's
//! archive), pinned to the candidate stream's revision the review was
//! checked against, and with it, when the review accepted obligation
//! transitions, the goal contract they move (three streams, one
//! transaction, each compare-and-swapped). Does not own any rule: what a candidate is, what a
//! review must say and what may be archived or released are
//! `loopx_core::focus::{candidate, review}`'s; what may be banked is the
//! ledger's.

use crate::loop_dir::{LoopDir, Place, Reading};
use crate::operation::given_or_generated;
use crate::receipt::ReceiptView;
use crate::{clock, AppError};
use loopx_core::digest::Digest;
use loopx_core::driver::provider::{self, Family};
use loopx_core::driver::HostAttestation;
use loopx_core::focus::candidate::{
    self, Candidate, CandidateError, CandidateOwner, CandidateReceipt, CandidateRequest, Evidence,
    Slot, CANDIDATE_STREAM, EVIDENCE_BYTES,
};
use loopx_core::focus::compute;
use loopx_core::focus::contract::{GoalContract, ObligationStatus};
use loopx_core::focus::review::{self, ResultReview};
use loopx_core::focus::{self, banking, ContractOwner, Revise};
use loopx_core::ledger::{
    admit, nonblank, redacted, Bank, BankStatus, IterationReport, LedgerContext, LedgerOwner,
    LedgerReceipt, LedgerRequest, STREAM,
};
use loopx_core::operation::{Clock, OperationId};
use loopx_core::path::LoopPath;
use loopx_core::words;
use loopx_store::sqlite::Access;
use loopx_store::{failpoint, Grouped, Loaded, Member, Step};
use serde::Serialize;
use std::path::Path;

/// The family a launch of `provider` reaches here: the provider table's,
/// unless the name is unknown or an endpoint override is set (unverified).
pub fn family_of(provider: &str) -> Family {
    match provider::find(provider.trim()) {
        Some(found) => provider::family(found, |name| std::env::var(name).ok()),
        None => Family::Unverified,
    }
}

/// `CLAIM_ID=PATH` pairs, as `--claim-evidence` gives them.
fn claim_paths(pairs: &[String]) -> Result<Vec<(String, LoopPath)>, AppError> {
    pairs
        .iter()
        .map(|pair| {
            let (claim, path) = pair.split_once('=').ok_or_else(|| {
                AppError::refused(format!(
                    "--claim-evidence {pair:?} is not CLAIM_ID=PATH (a file below the loop directory)"
                ))
            })?;
            let path = LoopPath::parse(path.trim()).map_err(|problem| {
                AppError::refused(format!(
                    "--claim-evidence {pair:?}: the evidence path {problem}; name a file below the loop directory"
                ))
            })?;
            if let Some(control) = path.control_file() {
                return Err(AppError::refused(format!(
                    "--claim-evidence {pair:?}: {control}; name a file the iteration wrote"
                )));
            }
            Ok((claim.trim().to_owned(), path))
        })
        .collect()
}

/// What `append-iteration` says beyond the report, used only when the
/// report is staged (enforce mode).
#[derive(Debug, Clone, Copy, Default)]
pub struct Staging<'a> {
    /// `CLAIM_ID=PATH`: each claim's evidence file.
    pub claim_evidence: &'a [String],
    /// `OBLIGATION_ID=STATUS`: the status the iteration asks an obligation
    /// it moves to reach.
    pub obligation_targets: &'a [String],
    /// The executor, stated by a person staging by hand (no dispatch open).
    pub executor: Option<&'a str>,
}

/// `OBLIGATION_ID=STATUS` pairs, as `--obligation-target` gives them.
fn target_pairs(pairs: &[String]) -> Result<Vec<(String, ObligationStatus)>, AppError> {
    pairs
        .iter()
        .map(|pair| {
            let parsed = pair.split_once('=').and_then(|(id, status)| {
                Some((id.trim().to_owned(), ObligationStatus::parse(status.trim())?))
            });
            parsed.ok_or_else(|| {
                AppError::refused(format!(
                    "--obligation-target {pair:?} is not OBLIGATION_ID=STATUS with STATUS one of {}",
                    ObligationStatus::names().join(", ")
                ))
            })
        })
        .collect()
}

/// What `append-iteration` staged in enforce mode.
#[derive(Debug, Clone, Serialize)]
pub struct Staged {
    pub candidate_fingerprint: Digest,
    pub state: String,
    pub claims: usize,
    pub evidence_files: usize,
}

/// Stage `report` as the loop's pending candidate: bound to the driver's
/// open dispatch intent, whose provider is the executor (with none open,
/// `stated_executor`, the operator's `--executor`, names it; see
/// [`candidate::executor`]); admitted by the ledger as it would be banked;
/// every claim paired with its evidence, each evidence file read
/// (confined, no link followed, bounded) and embedded.
pub fn stage(
    dir: &LoopDir,
    operation_id: &OperationId,
    mut report: IterationReport,
    staging: Staging<'_>,
) -> Result<ReceiptView<Staged>, AppError> {
    let pairs = claim_paths(staging.claim_evidence)?;
    let targets = target_pairs(staging.obligation_targets)?;
    let stated_executor = staging.executor;
    let Reading { ledger, .. } = dir.read()?;
    let (_, driver) = dir.driver()?;
    let candidate::Executor {
        dispatch_id,
        provider: executor,
    } = candidate::executor(
        driver.open.as_ref(),
        &report.dispatch_id,
        &report.executor_provider,
        stated_executor,
    )
    .map_err(crate::error::refusal)?;
    // The row banked from it records the executor the dispatch names.
    report.executor_provider = executor.clone();
    let now = clock::now();
    admit(&ledger, &report, now, dir, true).map_err(crate::error::refusal)?;
    let executor_family = candidate::known_executor(&executor, family_of(&executor))
        .map_err(crate::error::refusal)?;
    let claims = candidate::claims(&report, &pairs).map_err(crate::error::refusal)?;
    let obligation_ids = nonblank(&report.direction.obligation_ids);
    let (contract, _) = super::document(dir, focus::CONTRACT_STREAM, || {
        GoalContract::from_init(&ledger.config)
    })?;
    let obligation_targets =
        candidate::obligation_targets(&obligation_ids, &targets, &contract.document)
            .map_err(crate::error::refusal)?;
    super::compute_policy(dir)?
        .admits(compute::reported_services(report.direction.compute_runs.as_deref()).as_deref())
        .map_err(|refused| crate::error::refusal(CandidateError::from(refused)))?;
    let mut evidence: Vec<Evidence> = Vec::new();
    for claim in &claims {
        let path = &claim.evidence_path;
        if evidence.iter().any(|e| &e.path == path) {
            continue;
        }
        let bytes = dir
            .read_file(path, EVIDENCE_BYTES)
            .map_err(|problem| CandidateError::EvidenceFile {
                path: path.as_str().to_owned(),
                problem: problem.describe(),
            })
            .map_err(crate::error::refusal)?;
        evidence.push(Evidence::of(path.clone(), bytes).map_err(crate::error::refusal)?);
    }
    let candidate = Candidate {
        schema: candidate::SCHEMA.to_owned(),
        candidate_id: operation_id.to_string(),
        dispatch_id,
        executor_provider: executor,
        executor_family,
        claims,
        obligation_ids,
        obligation_targets,
        evidence,
        report: redacted(&report),
    };
    let evidence_files = candidate.evidence.len();
    let claims = candidate.claims.len();
    let request = CandidateRequest::Stage {
        candidate: Box::new(candidate),
    };
    let (receipt, warnings) = execute(dir, operation_id, &request)?;
    Ok(
        ReceiptView::new("append-iteration", receipt, |body: CandidateReceipt| {
            Staged {
                candidate_fingerprint: body.fingerprint,
                state: body.state,
                claims,
                evidence_files,
            }
        })
        .in_dir(dir.display())
        .with_warnings(warnings),
    )
}

/// Commit `request` to the candidate stream, then refresh the views
/// (unless it was a replay, which wrote nothing).
fn execute(
    dir: &LoopDir,
    operation_id: &OperationId,
    request: &CandidateRequest,
) -> Result<(loopx_store::Receipt<CandidateReceipt>, Vec<String>), AppError> {
    let now = clock::now();
    let receipt = dir
        .authority()
        .execute::<CandidateOwner>(CANDIDATE_STREAM, operation_id, request, &Clock { now }, now)
        .map_err(anyhow::Error::from)?;
    let warnings = match receipt.replayed {
        true => Vec::new(),
        false => dir.refresh_views(),
    };
    Ok((receipt, warnings))
}

fn fingerprint_arg(text: &str) -> Result<Digest, AppError> {
    Digest::parse(text.trim()).map_err(|_| {
        AppError::refused(format!(
            "--candidate-fingerprint {text:?} is not a sha256:<64 hex> digest: copy it from `loopx goal-focus status`"
        ))
    })
}

/// What `goal-focus review` banked.
#[derive(Debug, Clone, Serialize)]
pub struct Finalized {
    pub candidate_fingerprint: Digest,
    pub bank_status: BankStatus,
    pub iteration: u64,
    pub decision: loopx_core::ledger::vocabulary::Decision,
    pub state_status: loopx_core::ledger::vocabulary::LoopStatus,
    pub remaining_iterations: u64,
    pub reviewer_provider: String,
    pub reviewer_family: Family,
}

/// Decide the pending candidate with the `result_review.v1` document at
/// `file`: refused (nothing written) unless it passes
/// [`review::judge`]; otherwise the candidate is banked as accepted or
/// rejected and archived in one transaction.
pub fn review(
    root: Place<'_>,
    candidate_fingerprint: &str,
    file: &Path,
    operation_id: Option<&str>,
) -> Result<ReceiptView<Finalized>, AppError> {
    let given = fingerprint_arg(candidate_fingerprint)?;
    let operation_id = given_or_generated(operation_id)?;
    let dir = LoopDir::open(root, Access::ReadWrite)?;
    let document: ResultReview = crate::goal::read_document(file).map_err(|error| {
        AppError::refused(format!(
            "{}: it must be a {} document ({error:#})",
            file.display(),
            review::SCHEMA
        ))
    })?;
    let Loaded { revision, state } = dir
        .authority()
        .load::<CandidateOwner>(CANDIDATE_STREAM)
        .map_err(anyhow::Error::from)?;
    let slot = state.unwrap_or_default();
    // The candidate this review banked already: only an exact retry of
    // that review gets an answer (its receipt), and nothing is written.
    let retried = slot
        .last_decided
        .as_ref()
        .filter(|last| slot.pending.is_none() && last.fingerprint == given);
    let held = match retried {
        Some(last) => last,
        None => pending(&slot, &given)?,
    };
    let reviewer = document.reviewer.provider.trim().to_owned();
    let reviewer_family = family_of(&reviewer);
    let status = review::judge(
        &document,
        &held.candidate,
        &held.fingerprint,
        reviewer_family,
    )
    .map_err(|problem| AppError::refused(format!("{}: {problem}", file.display())))?;
    let now = clock::now();
    // The contract the transitions apply to, at the store revision the
    // commit's compare-and-swap holds it to.
    let Reading { ledger, .. } = dir.read()?;
    let (contract, contract_at) = super::document(&dir, focus::CONTRACT_STREAM, || {
        GoalContract::from_init(&ledger.config)
    })?;
    let transitions = banking::transitions(&contract.document, &held.candidate, status);
    let bank = LedgerRequest::BankCandidate {
        report: held.candidate.report.clone(),
        bank: Bank {
            status,
            candidate_fingerprint: held.fingerprint.clone(),
            obligation_transitions: transitions.clone(),
        },
    };
    let ledger_context = LedgerContext {
        now,
        operation_id: &operation_id,
        files: &dir,
    };
    let bank_step = Step::<LedgerOwner> {
        stream: STREAM,
        operation_id: &operation_id,
        request: &bank,
        context: &ledger_context,
    };
    let banked = match retried {
        Some(last) => dir
            .authority()
            .replay::<LedgerOwner>(&bank_step)
            .map_err(anyhow::Error::from)?
            .ok_or_else(|| {
                AppError::refused(format!(
                    "candidate {given} was already finalized ({}); nothing is banked twice (to see its receipt, repeat the review with the --operation-id it was banked under)",
                    last.candidate.candidate_id
                ))
            })?,
        None => {
            // Between the review's check and the commit: a crash or a
            // concurrent writer here leaves it banked once or not at all.
            failpoint::hold("focus.review.before_finalize");
            let archive = CandidateRequest::Archive {
                base_revision: revision,
                fingerprint: held.fingerprint.clone(),
                outcome: status,
            };
            let clock = Clock { now };
            let archive_step = Step::<CandidateOwner> {
                stream: CANDIDATE_STREAM,
                operation_id: &operation_id,
                request: &archive,
                context: &clock,
            };
            // The contract moves only when an obligation does.
            let revise = banking::applied(&contract.document, &transitions).map(|document| Revise {
                base_revision: Some(contract_at),
                document,
            });
            let contract_step = revise.as_ref().map(|request| Step::<ContractOwner> {
                stream: focus::CONTRACT_STREAM,
                operation_id: &operation_id,
                request,
                context: &clock,
            });
            let mut bank_part = Member::new(&bank_step);
            let mut archive_part = Member::new(&archive_step);
            let mut contract_part = contract_step.as_ref().map(Member::new);
            let mut parts: Vec<&mut dyn Grouped> = vec![&mut bank_part, &mut archive_part];
            parts.extend(contract_part.as_mut().map(|p| p as &mut dyn Grouped));
            dir.authority()
                .execute_all(&mut parts, &[], now)
                .map_err(anyhow::Error::from)?;
            bank_part.into_receipt()
        }
    };
    let warnings = match banked.replayed {
        true => Vec::new(),
        false => dir.refresh_views(),
    };
    let fingerprint = held.fingerprint.clone();
    Ok(
        ReceiptView::new("goal-focus review", banked, |body| match body {
            LedgerReceipt::AppendIteration {
                iteration,
                decision,
                state_status,
                remaining_iterations,
            } => Finalized {
                candidate_fingerprint: fingerprint,
                bank_status: status,
                iteration,
                decision,
                state_status,
                remaining_iterations,
                reviewer_provider: reviewer,
                reviewer_family,
            },
            _ => unreachable!("banking yields an append receipt"),
        })
        .in_dir(dir.display())
        .with_warnings(warnings),
    )
}

/// The pending candidate `given` names, or why there is none to decide.
fn pending<'s>(slot: &'s Slot, given: &Digest) -> Result<&'s candidate::Held, AppError> {
    if let Some(q) = &slot.quarantine {
        return Err(crate::error::refusal(CandidateError::Quarantined {
            fingerprint: q.fingerprint.clone(),
        })
        .into());
    }
    match &slot.pending {
        Some(held) if &held.fingerprint == given => Ok(held),
        Some(held) => Err(crate::error::refusal(CandidateError::WrongFingerprint {
            what: "pending",
            given: given.clone(),
            actual: held.fingerprint.clone(),
        })
        .into()),
        None => match &slot.last_archived {
            Some(last) if &last.fingerprint == given => Err(AppError::refused(format!(
                "candidate {given} was already finalized ({:?} at {}); nothing is banked twice",
                last.outcome, last.at
            ))),
            _ => Err(crate::error::refusal(CandidateError::NothingPending).into()),
        },
    }
}

/// A candidate as status shows it: everything but the embedded content.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateSummary {
    pub fingerprint: Digest,
    pub candidate_id: String,
    /// The driver dispatch it was staged under (`None`: by hand).
    pub dispatch_id: Option<String>,
    pub executor_provider: String,
    pub executor_family: Family,
    pub claims: Vec<candidate::Claim>,
    pub obligation_ids: Vec<String>,
    /// The target statuses it requests (a review must state each exactly).
    pub obligation_targets: Vec<candidate::ObligationTarget>,
    pub evidence: Vec<EvidenceSummary>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EvidenceSummary {
    pub path: LoopPath,
    pub size: u64,
    pub digest: Digest,
}

impl CandidateSummary {
    fn of(fingerprint: &Digest, candidate: &Candidate) -> Self {
        CandidateSummary {
            fingerprint: fingerprint.clone(),
            candidate_id: candidate.candidate_id.clone(),
            dispatch_id: candidate.dispatch_id.clone(),
            executor_provider: candidate.executor_provider.clone(),
            executor_family: candidate.executor_family,
            claims: candidate.claims.clone(),
            obligation_ids: candidate.obligation_ids.clone(),
            obligation_targets: candidate.obligation_targets.clone(),
            evidence: candidate
                .evidence
                .iter()
                .map(|e| EvidenceSummary {
                    path: e.path.clone(),
                    size: e.size,
                    digest: e.digest.clone(),
                })
                .collect(),
        }
    }
}

/// Where the candidate stream stands: the pending candidate, the
/// quarantined one, and how many were archived.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CandidateStatus {
    pub pending: Option<CandidateSummary>,
    pub quarantined: Option<QuarantineSummary>,
    pub archived: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct QuarantineSummary {
    pub reason: String,
    pub at: jiff::Timestamp,
    #[serde(flatten)]
    pub candidate: CandidateSummary,
}

impl CandidateStatus {
    pub fn of(slot: Option<&Slot>) -> Self {
        let Some(slot) = slot else {
            return CandidateStatus::default();
        };
        CandidateStatus {
            pending: slot
                .pending
                .as_ref()
                .map(|h| CandidateSummary::of(&h.fingerprint, &h.candidate)),
            quarantined: slot.quarantine.as_ref().map(|q| QuarantineSummary {
                reason: q.reason.clone(),
                at: q.at,
                candidate: CandidateSummary::of(&q.fingerprint, &q.candidate),
            }),
            archived: slot.archived,
        }
    }

    /// The lines `goal-focus status` prints for it.
    pub fn text(&self) -> String {
        let mut out = String::new();
        if let Some(p) = &self.pending {
            out.push_str(&format!(
                "  candidate pending review: {} ({}, {}, executor {} / {}): `loopx goal-focus review --candidate-fingerprint {} --file REVIEW.json`\n",
                p.fingerprint,
                words::count(p.claims.len() as u64, "claim"),
                words::count(p.evidence.len() as u64, "evidence file"),
                p.executor_provider,
                p.executor_family.name(),
                p.fingerprint
            ));
        }
        if let Some(q) = &self.quarantined {
            out.push_str(&format!(
                "  candidate QUARANTINED: {} ({}): inspect it with `loopx goal-focus recover-quarantine`\n",
                q.candidate.fingerprint, q.reason
            ));
        }
        out
    }
}

/// The candidate stream as of now.
pub fn slot(dir: &LoopDir) -> anyhow::Result<Option<Slot>> {
    Ok(dir
        .authority()
        .load::<CandidateOwner>(CANDIDATE_STREAM)?
        .state)
}

/// The host's completion gate at the end of the turn of `dispatch_id`: a
/// candidate that turn staged is quarantined, atomically, when the turn
/// failed the gate ([`Slot::quarantine_after_turn`] says when). The
/// fingerprint it quarantined, if any.
pub fn quarantine_after_turn(
    dir: &LoopDir,
    operation_id: &OperationId,
    dispatch_id: &str,
    seen: &HostAttestation,
) -> anyhow::Result<Option<Digest>> {
    let Some(request) = slot(dir)?.and_then(|s| s.quarantine_after_turn(dispatch_id, seen)) else {
        return Ok(None);
    };
    execute(dir, operation_id, &request).map_err(anyhow::Error::new)?;
    Ok(match request {
        CandidateRequest::Quarantine { fingerprint, .. } => Some(fingerprint),
        _ => None,
    })
}

/// Quarantine the pending candidate `fingerprint` names, atomically: what
/// the host does when a gate around it failed (timeout, failed cleanup,
/// rejected output). Nothing is reviewed or banked until it is released.
pub fn quarantine(
    root: Place<'_>,
    candidate_fingerprint: &str,
    reason: &str,
    operation_id: Option<&str>,
) -> Result<ReceiptView<CandidateReceipt>, AppError> {
    let fingerprint = fingerprint_arg(candidate_fingerprint)?;
    let request = CandidateRequest::Quarantine {
        fingerprint,
        reason: reason.to_owned(),
    };
    commit(root, "goal-focus quarantine", &request, operation_id)
}

fn commit(
    root: Place<'_>,
    action: &str,
    request: &CandidateRequest,
    operation_id: Option<&str>,
) -> Result<ReceiptView<CandidateReceipt>, AppError> {
    let operation_id = given_or_generated(operation_id)?;
    let dir = LoopDir::open(root, Access::ReadWrite)?;
    let (receipt, warnings) = execute(&dir, &operation_id, request)?;
    Ok(ReceiptView::new(action.to_owned(), receipt, |body| body)
        .in_dir(dir.display())
        .with_warnings(warnings))
}

/// `goal-focus recover-quarantine` without `--release`: what is
/// quarantined and the one command that releases it.
#[derive(Debug, Clone, Serialize)]
pub struct QuarantineView {
    pub status: &'static str,
    pub action: &'static str,
    pub dir: String,
    pub quarantined: Option<QuarantineSummary>,
    /// The exact command that releases it (`None`: nothing quarantined).
    pub release_command: Option<String>,
}

impl QuarantineView {
    pub fn text(&self) -> String {
        match (&self.quarantined, &self.release_command) {
            (Some(q), Some(command)) => {
                let mut text = format!(
                    "quarantined: candidate {} ({}, since {})\n  executor {} / {}\n",
                    q.candidate.fingerprint,
                    q.reason,
                    q.at,
                    q.candidate.executor_provider,
                    q.candidate.executor_family.name()
                );
                for claim in &q.candidate.claims {
                    text.push_str(&format!(
                        "  claim {} <- {}\n",
                        claim.claim_id,
                        claim.evidence_path.as_str()
                    ));
                }
                text.push_str(&format!(
                    "inspect the evidence, then release it (the ledger and budget do not change): {command}"
                ));
                text
            }
            _ => format!("nothing is quarantined in {}", self.dir),
        }
    }
}

/// The command that releases the candidate `fingerprint` in `dir`.
pub fn release_command(dir: &str, fingerprint: &Digest) -> String {
    format!("loopx goal-focus recover-quarantine --dir {dir} --release --candidate-fingerprint {fingerprint}")
}

pub fn show_quarantine(dir: &LoopDir) -> Result<QuarantineView, AppError> {
    let status = CandidateStatus::of(slot(dir)?.as_ref());
    let release = status
        .quarantined
        .as_ref()
        .map(|q| release_command(&dir.display(), &q.candidate.fingerprint));
    Ok(QuarantineView {
        status: "ok",
        action: "goal-focus recover-quarantine",
        dir: dir.display(),
        quarantined: status.quarantined,
        release_command: release,
    })
}

/// Release the quarantined candidate, only by its exact fingerprint: it is
/// archived; the ledger and the budget do not change.
pub fn release_quarantine(
    root: Place<'_>,
    candidate_fingerprint: &str,
    operation_id: Option<&str>,
) -> Result<ReceiptView<CandidateReceipt>, AppError> {
    let fingerprint = fingerprint_arg(candidate_fingerprint)?;
    commit(
        root,
        "goal-focus recover-quarantine --release",
        &CandidateRequest::Release { fingerprint },
        operation_id,
    )
}
