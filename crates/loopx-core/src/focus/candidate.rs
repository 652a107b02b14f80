//! Staged candidates: in enforce mode an iteration is not banked when the
//! agent reports it; it is staged as an immutable candidate that a
//! different-family result review must decide.
//!
//! Owns: who the executor is ([`executor`]: the live dispatch intent's
//! provider, never the report's own claim; one candidate per dispatch),
//! what a candidate is (the report, the executor's family, every
//! material claim with its loop-relative evidence path, and the evidence
//! itself embedded with its size and digest), its canonical fingerprint,
//! and the candidate stream's rules: one pending candidate at a time; a
//! pending candidate leaves only by being archived (after its review) or
//! quarantined, each naming its exact fingerprint; a quarantined one
//! leaves only by an exact-fingerprint release, and nothing new is staged
//! while it is there. Does not own reading the evidence files (the
//! application does that without following links, and hands the bytes
//! here), what a review must say ([`super::review`]), or banking (the
//! ledger's, committed in the same transaction as the archive).

use crate::digest::Digest;
use crate::driver::provider::Family;
use crate::driver::{HostAttestation, Intent};
use crate::focus::contract::{GoalContract, ObligationStatus};
use crate::ledger::{BankStatus, IterationReport};
use crate::operation::{Clock, Decided, Owner};
use crate::path::LoopPath;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The stream that holds the pending candidate and its quarantine.
pub const CANDIDATE_STREAM: &str = "focus:candidate";

pub const SCHEMA: &str = "iteration_candidate.v1";

/// The largest evidence file a candidate embeds. Reviewers read it whole,
/// and the candidate is stored in the journal forever.
pub const EVIDENCE_BYTES: u64 = 256 * 1024;

/// The most evidence files one candidate embeds.
pub const MAX_EVIDENCE_FILES: usize = 16;

/// An obligation the iteration asks to move to `target_status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObligationTarget {
    pub obligation_id: String,
    pub target_status: ObligationStatus,
}

/// The requested target statuses (`OBLIGATION_ID=STATUS` pairs, parsed):
/// each for an obligation the report moves and `contract` defines (banking
/// moves only the contract's obligations), at most one per obligation.
pub fn obligation_targets(
    obligation_ids: &[String],
    pairs: &[(String, ObligationStatus)],
    contract: &GoalContract,
) -> Result<Vec<ObligationTarget>, CandidateError> {
    let mut out: Vec<ObligationTarget> = Vec::new();
    for (obligation_id, target_status) in pairs {
        if !obligation_ids.contains(obligation_id) {
            return Err(CandidateError::TargetWithoutObligation {
                obligation_id: obligation_id.clone(),
            });
        }
        if contract.obligation(obligation_id).is_none() {
            return Err(CandidateError::TargetNotInContract {
                obligation_id: obligation_id.clone(),
            });
        }
        if out.iter().any(|t| &t.obligation_id == obligation_id) {
            return Err(CandidateError::TargetTwice {
                obligation_id: obligation_id.clone(),
            });
        }
        out.push(ObligationTarget {
            obligation_id: obligation_id.clone(),
            target_status: *target_status,
        });
    }
    Ok(out)
}

/// One material claim and the file that is its evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub claim_id: String,
    pub evidence_path: LoopPath,
}

/// An evidence file as the host read it: an identifier alone is not
/// evidence, so the content travels with the candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub path: LoopPath,
    /// Size and digest of the file exactly as read.
    pub size: u64,
    pub digest: Digest,
    /// The file's text with credentials redacted (the journal keeps it
    /// forever); `redacted` says whether anything was.
    pub content: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

impl Evidence {
    /// The evidence of `bytes` read from `path`, refused unless UTF-8.
    pub fn of(path: LoopPath, bytes: Vec<u8>) -> Result<Evidence, CandidateError> {
        let size = bytes.len() as u64;
        let digest = Digest::of_bytes(&bytes);
        let text = String::from_utf8(bytes).map_err(|_| CandidateError::EvidenceNotText {
            path: path.as_str().to_owned(),
        })?;
        let content = crate::redact::redact_owned(&text);
        Ok(Evidence {
            path,
            size,
            digest,
            redacted: content != text,
            content,
        })
    }
}

/// An iteration staged for review. Immutable: its fingerprint is what a
/// review binds, so any change makes it another candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub schema: String,
    /// The operation id the agent staged it under. (No timestamp: a retry
    /// of the same staging must be the same request; the journal keeps
    /// when it was committed.)
    pub candidate_id: String,
    /// The driver dispatch whose turn produced it (`None`: staged by hand
    /// with the executor stated by the operator). Absent when `None`, so
    /// fingerprints of candidates staged before it existed stay the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_id: Option<String>,
    pub executor_provider: String,
    pub executor_family: Family,
    pub claims: Vec<Claim>,
    /// The obligations the report says this iteration moved.
    pub obligation_ids: Vec<String>,
    /// The status the iteration asks some of them to reach; an accepting
    /// review must state exactly this status for each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub obligation_targets: Vec<ObligationTarget>,
    pub evidence: Vec<Evidence>,
    pub report: IterationReport,
}

impl Candidate {
    /// The canonical fingerprint a review binds.
    pub fn fingerprint(&self) -> Digest {
        Digest::of_json(self)
    }

    /// The claim ids, each once.
    pub fn claim_ids(&self) -> BTreeSet<&str> {
        self.claims.iter().map(|c| c.claim_id.as_str()).collect()
    }

    /// The target status the candidate requests for `obligation_id`.
    pub fn target_of(&self, obligation_id: &str) -> Option<ObligationStatus> {
        (self.obligation_targets.iter())
            .find(|t| t.obligation_id == obligation_id)
            .map(|t| t.target_status)
    }

    pub fn evidence_at(&self, path: &str) -> Option<&Evidence> {
        self.evidence.iter().find(|e| e.path.as_str() == path)
    }
}

/// The claims of `report`, each paired with its evidence path from
/// `claim_evidence` (`CLAIM_ID=PATH`): every claim id needs a path, and
/// every path names a claim the report makes.
pub fn claims(
    report: &IterationReport,
    claim_evidence: &[(String, LoopPath)],
) -> Result<Vec<Claim>, CandidateError> {
    let reported: BTreeSet<&str> = report
        .evidence_checked
        .claim_ids
        .iter()
        .map(|c| c.trim())
        .filter(|c| !c.is_empty())
        .collect();
    let mut out: Vec<Claim> = Vec::new();
    for (claim_id, path) in claim_evidence {
        if !reported.contains(claim_id.as_str()) {
            return Err(CandidateError::EvidenceWithoutClaim {
                claim_id: claim_id.clone(),
            });
        }
        if out.iter().any(|c| &c.claim_id == claim_id) {
            return Err(CandidateError::ClaimTwice {
                claim_id: claim_id.clone(),
            });
        }
        out.push(Claim {
            claim_id: claim_id.clone(),
            evidence_path: path.clone(),
        });
    }
    if let Some(missing) = reported
        .iter()
        .find(|id| !out.iter().any(|c| c.claim_id == **id))
    {
        return Err(CandidateError::ClaimWithoutEvidence {
            claim_id: (*missing).to_owned(),
        });
    }
    // Refused before any file is read: a report may not make the host
    // read an unbounded number of files.
    let files: BTreeSet<&LoopPath> = out.iter().map(|c| &c.evidence_path).collect();
    if files.len() > MAX_EVIDENCE_FILES {
        return Err(CandidateError::TooMuchEvidence { count: files.len() });
    }
    Ok(out)
}

/// Who ran the iteration being staged, and under which dispatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executor {
    pub dispatch_id: Option<String>,
    pub provider: String,
}

/// The executor of a staged iteration: the driver's open dispatch intent
/// names it, never the agent's own report (a hostile agent could claim
/// another family to pick its own reviewer). The report must run under
/// that exact dispatch, and any provider the report or the operator names
/// must be the intent's. With no dispatch open (a person appending by
/// hand), the operator states the executor explicitly (`--executor`); a
/// report claiming a dispatch that is not open is refused.
pub fn executor(
    open: Option<&Intent>,
    reported_dispatch: &str,
    reported_executor: &str,
    stated: Option<&str>,
) -> Result<Executor, CandidateError> {
    let named = |p: &str| Some(p.trim()).filter(|p| !p.is_empty()).map(str::to_owned);
    let reported_dispatch = reported_dispatch.trim();
    let (dispatch_id, provider, by) = match open {
        Some(intent) => {
            if reported_dispatch != intent.dispatch_id {
                return Err(CandidateError::NotTheOpenDispatch {
                    given: reported_dispatch.to_owned(),
                    open: Some(intent.dispatch_id.clone()),
                });
            }
            let by = format!("dispatch {}", intent.dispatch_id);
            (
                Some(intent.dispatch_id.clone()),
                intent.provider.clone(),
                by,
            )
        }
        None if !reported_dispatch.is_empty() => {
            return Err(CandidateError::NotTheOpenDispatch {
                given: reported_dispatch.to_owned(),
                open: None,
            })
        }
        None => {
            let stated = stated
                .and_then(named)
                .ok_or(CandidateError::NoOpenDispatch)?;
            (None, stated, "--executor".to_owned())
        }
    };
    for claimed in [named(reported_executor), stated.and_then(named)]
        .into_iter()
        .flatten()
    {
        if claimed != provider {
            return Err(CandidateError::ExecutorDiffers {
                claimed,
                provider,
                by,
            });
        }
    }
    Ok(Executor {
        dispatch_id,
        provider,
    })
}

/// The executor's family, which must be known: a review is independent
/// only of a family it can be told apart from.
pub fn known_executor(provider: &str, family: Family) -> Result<Family, CandidateError> {
    match family {
        Family::Unverified => Err(CandidateError::ExecutorUnverified {
            provider: provider.to_owned(),
        }),
        known => Ok(known),
    }
}

/// A candidate that was pending, as the stream holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Held {
    pub fingerprint: Digest,
    pub candidate: Candidate,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quarantine {
    pub fingerprint: Digest,
    pub candidate: Candidate,
    pub reason: String,
    pub at: Timestamp,
}

/// How a candidate left the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Reviewed and banked as accepted.
    Accepted,
    /// Reviewed and banked as rejected.
    Rejected,
    /// Released from quarantine; nothing was banked.
    Released,
}

impl From<BankStatus> for Outcome {
    fn from(status: BankStatus) -> Self {
        match status {
            BankStatus::Accepted => Outcome::Accepted,
            BankStatus::Rejected => Outcome::Rejected,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Archived {
    pub fingerprint: Digest,
    pub outcome: Outcome,
    pub at: Timestamp,
}

/// The candidate stream's state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Slot {
    pub pending: Option<Held>,
    pub quarantine: Option<Quarantine>,
    pub archived: u64,
    pub last_archived: Option<Archived>,
    /// The candidate the last review banked, kept so that an exact retry
    /// of that review (a lost reply) is answered with its receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_decided: Option<Held>,
    /// The dispatch of the last candidate staged under one: a dispatch
    /// stages one candidate at most. (Dispatches are sequential and only
    /// the open one can stage, so the last is the only one to remember.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_dispatch_id: Option<String>,
}

/// What the candidate stream holds back: no new turn is dispatched while
/// a candidate awaits review, and none (without a person) while one is
/// quarantined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "fingerprint", rename_all = "snake_case")]
pub enum Hold {
    Pending(Digest),
    Quarantined(Digest),
}

impl Slot {
    /// What the host does with this slot once the turn of `dispatch_id`
    /// is over: a candidate that turn staged is quarantined when the
    /// turn failed the host's completion gate (it ran out of time and was
    /// killed, so what it staged may be partial or unfinished). The
    /// quarantine request, or `None` when nothing is to be held.
    pub fn quarantine_after_turn(
        &self,
        dispatch_id: &str,
        seen: &HostAttestation,
    ) -> Option<CandidateRequest> {
        let held = self.pending.as_ref()?;
        let staged_by_this_turn = held.candidate.dispatch_id.as_deref() == Some(dispatch_id);
        let failures = seen.failures();
        (staged_by_this_turn && !failures.is_empty()).then(|| CandidateRequest::Quarantine {
            fingerprint: held.fingerprint.clone(),
            reason: format!(
                "the host's completion gate failed for the turn of dispatch {dispatch_id} that staged it ({}): what it staged may be unfinished or unsafe",
                failures.join("; ")
            ),
        })
    }

    pub fn hold(&self) -> Option<Hold> {
        match (&self.quarantine, &self.pending) {
            (Some(q), _) => Some(Hold::Quarantined(q.fingerprint.clone())),
            (None, Some(p)) => Some(Hold::Pending(p.fingerprint.clone())),
            (None, None) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CandidateRequest {
    Stage {
        candidate: Box<Candidate>,
    },
    /// Archive the pending candidate after its review; `base_revision` is
    /// the revision of the stream the review was checked against, so any
    /// change in between refuses the archive (and the banking with it).
    Archive {
        base_revision: u64,
        fingerprint: Digest,
        outcome: BankStatus,
    },
    Quarantine {
        fingerprint: Digest,
        reason: String,
    },
    Release {
        fingerprint: Digest,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CandidateEvent {
    Staged {
        fingerprint: Digest,
        candidate: Box<Candidate>,
    },
    Archived(Archived),
    Quarantined {
        fingerprint: Digest,
        reason: String,
        at: Timestamp,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateReceipt {
    pub fingerprint: Digest,
    /// `pending_review`, `banked_accepted`, `banked_rejected`,
    /// `quarantined` or `released`.
    pub state: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CandidateError {
    #[error("candidate {fingerprint} is already pending review: review it (`loopx goal-focus review --candidate-fingerprint {fingerprint} --file REVIEW.json`) before staging another")]
    AlreadyPending { fingerprint: Digest },
    #[error("candidate {fingerprint} is quarantined: nothing is staged, reviewed or banked until it is released; inspect it with `loopx goal-focus recover-quarantine`")]
    Quarantined { fingerprint: Digest },
    #[error("no candidate is pending review: `loopx goal-focus status` shows the stream")]
    NothingPending,
    #[error("no candidate is quarantined: there is nothing to release")]
    NothingQuarantined,
    #[error("candidate fingerprint {given} is not the {what} one ({actual}): copy the exact fingerprint from `loopx goal-focus status`")]
    WrongFingerprint {
        what: &'static str,
        given: Digest,
        actual: Digest,
    },
    #[error("claim {claim_id:?} has no evidence path: every material claim needs a claim_evidence entry {claim_id}=PATH (a file below the loop directory)")]
    ClaimWithoutEvidence { claim_id: String },
    #[error("claim_evidence names claim {claim_id:?}, which the report does not make: add {claim_id} to its claim_ids")]
    EvidenceWithoutClaim { claim_id: String },
    #[error("claim {claim_id:?} has two evidence paths: give one claim_evidence entry per claim")]
    ClaimTwice { claim_id: String },
    #[error("executor provider {provider:?} has no verified family (unknown to the provider table, or an endpoint override is set): enforce mode fails closed; use a provider from `loopx drive --help` without endpoint overrides")]
    ExecutorUnverified { provider: String },
    #[error("evidence file {path} {problem}: evidence must be a regular UTF-8 file below the loop directory, at most {EVIDENCE_BYTES} bytes, reached through no symlink")]
    EvidenceFile { path: String, problem: String },
    #[error("evidence file {path} is not UTF-8 text: a reviewer reads evidence as text")]
    EvidenceNotText { path: String },
    #[error("a candidate embeds at most {MAX_EVIDENCE_FILES} evidence files (got {count})")]
    TooMuchEvidence { count: usize },
    #[error("the quarantine reason must not be empty")]
    EmptyReason,
    #[error("no driver dispatch is open, so no dispatch names the executor: an iteration staged by hand in enforce mode names it as the executor (a provider) (`loopx goal-focus recover-dispatch` shows the driver's dispatch)")]
    NoOpenDispatch,
    #[error("{}", match open {
        Some(open) if given.is_empty() => format!("driver dispatch {open} is open: an iteration staged now belongs to its turn and must run under it (LOOPX_DISPATCH_ID={open}); if that turn is over, `loopx goal-focus recover-dispatch` settles it"),
        Some(open) => format!("this report runs under dispatch {given:?}, but the open dispatch is {open}: a candidate binds to the live dispatch only"),
        None => format!("this report runs under dispatch {given:?}, which is not open (settled or cancelled): a candidate binds to the live dispatch only"),
    })]
    NotTheOpenDispatch { given: String, open: Option<String> },
    #[error("executor {claimed:?} is named, but {by} ran {provider:?}: the executor comes from {by}, never from the report")]
    ExecutorDiffers {
        claimed: String,
        provider: String,
        by: String,
    },
    #[error("obligation_targets names obligation {obligation_id:?}, which the report does not move: add {obligation_id} to its obligation_ids")]
    TargetWithoutObligation { obligation_id: String },
    #[error("obligation_targets names obligation {obligation_id:?}, which the goal contract does not define: a target moves one of its obligations (`loopx goal-focus status` shows the contract; `loopx goal-focus revise --contract FILE` adds one)")]
    TargetNotInContract { obligation_id: String },
    #[error("obligation {obligation_id:?} has two target statuses: give one obligation_targets entry per obligation")]
    TargetTwice { obligation_id: String },
    #[error("dispatch {dispatch_id} already staged a candidate: one candidate per dispatch")]
    DispatchUsed { dispatch_id: String },
    #[error("{0}")]
    Compute(#[from] super::compute::ComputeRefused),
}

impl CandidateError {
    /// Which input, left out, would have let the request through (the
    /// adapter names its own spelling of it).
    pub fn details(&self) -> Option<serde_json::Value> {
        match self {
            CandidateError::NoOpenDispatch => Some(serde_json::json!({ "missing": "executor" })),
            _ => None,
        }
    }
}

pub struct CandidateOwner;

impl CandidateOwner {
    fn pending<'s>(state: &'s Slot, given: &Digest) -> Result<&'s Held, CandidateError> {
        if let Some(q) = &state.quarantine {
            return Err(CandidateError::Quarantined {
                fingerprint: q.fingerprint.clone(),
            });
        }
        let held = state
            .pending
            .as_ref()
            .ok_or(CandidateError::NothingPending)?;
        if &held.fingerprint != given {
            return Err(CandidateError::WrongFingerprint {
                what: "pending",
                given: given.clone(),
                actual: held.fingerprint.clone(),
            });
        }
        Ok(held)
    }
}

impl Owner for CandidateOwner {
    type State = Slot;
    type Request = CandidateRequest;
    type Event = CandidateEvent;
    type Receipt = CandidateReceipt;
    type Error = CandidateError;
    type Context<'a> = Clock;

    fn expected_revision(request: &CandidateRequest) -> Option<u64> {
        match request {
            CandidateRequest::Archive { base_revision, .. } => Some(*base_revision),
            _ => None,
        }
    }

    fn decide(
        state: Option<&Slot>,
        request: &CandidateRequest,
        clock: &Clock,
    ) -> Result<Decided<CandidateEvent, CandidateReceipt>, CandidateError> {
        let empty = Slot::default();
        let state = state.unwrap_or(&empty);
        match request {
            CandidateRequest::Stage { candidate } => {
                if let Some(q) = &state.quarantine {
                    return Err(CandidateError::Quarantined {
                        fingerprint: q.fingerprint.clone(),
                    });
                }
                if let Some(held) = &state.pending {
                    return Err(CandidateError::AlreadyPending {
                        fingerprint: held.fingerprint.clone(),
                    });
                }
                if let Some(id) = (candidate.dispatch_id.as_ref())
                    .filter(|id| state.last_dispatch_id.as_ref() == Some(*id))
                {
                    return Err(CandidateError::DispatchUsed {
                        dispatch_id: id.clone(),
                    });
                }
                if candidate.evidence.len() > MAX_EVIDENCE_FILES {
                    return Err(CandidateError::TooMuchEvidence {
                        count: candidate.evidence.len(),
                    });
                }
                let fingerprint = candidate.fingerprint();
                Ok(Decided::write(
                    CandidateEvent::Staged {
                        fingerprint: fingerprint.clone(),
                        candidate: candidate.clone(),
                    },
                    CandidateReceipt {
                        fingerprint,
                        state: "pending_review".into(),
                    },
                ))
            }
            CandidateRequest::Archive {
                fingerprint,
                outcome,
                ..
            } => {
                Self::pending(state, fingerprint)?;
                let outcome = Outcome::from(*outcome);
                Ok(Decided::write(
                    CandidateEvent::Archived(Archived {
                        fingerprint: fingerprint.clone(),
                        outcome,
                        at: clock.now,
                    }),
                    CandidateReceipt {
                        fingerprint: fingerprint.clone(),
                        state: match outcome {
                            Outcome::Accepted => "banked_accepted",
                            _ => "banked_rejected",
                        }
                        .into(),
                    },
                ))
            }
            CandidateRequest::Quarantine {
                fingerprint,
                reason,
            } => {
                if reason.trim().is_empty() {
                    return Err(CandidateError::EmptyReason);
                }
                Self::pending(state, fingerprint)?;
                Ok(Decided::write(
                    CandidateEvent::Quarantined {
                        fingerprint: fingerprint.clone(),
                        reason: crate::redact::redact_owned(reason.trim()),
                        at: clock.now,
                    },
                    CandidateReceipt {
                        fingerprint: fingerprint.clone(),
                        state: "quarantined".into(),
                    },
                ))
            }
            CandidateRequest::Release { fingerprint } => {
                let q = state
                    .quarantine
                    .as_ref()
                    .ok_or(CandidateError::NothingQuarantined)?;
                if &q.fingerprint != fingerprint {
                    return Err(CandidateError::WrongFingerprint {
                        what: "quarantined",
                        given: fingerprint.clone(),
                        actual: q.fingerprint.clone(),
                    });
                }
                Ok(Decided::write(
                    CandidateEvent::Archived(Archived {
                        fingerprint: fingerprint.clone(),
                        outcome: Outcome::Released,
                        at: clock.now,
                    }),
                    CandidateReceipt {
                        fingerprint: fingerprint.clone(),
                        state: "released".into(),
                    },
                ))
            }
        }
    }

    fn evolve(state: Option<Slot>, event: &CandidateEvent) -> Slot {
        let mut slot = state.unwrap_or_default();
        match event {
            CandidateEvent::Staged {
                fingerprint,
                candidate,
            } => {
                if candidate.dispatch_id.is_some() {
                    slot.last_dispatch_id = candidate.dispatch_id.clone();
                }
                slot.pending = Some(Held {
                    fingerprint: fingerprint.clone(),
                    candidate: (**candidate).clone(),
                });
            }
            CandidateEvent::Archived(archived) => {
                let decided = slot.pending.take();
                slot.last_decided = decided.filter(|_| archived.outcome != Outcome::Released);
                slot.quarantine = None;
                slot.archived += 1;
                slot.last_archived = Some(archived.clone());
            }
            CandidateEvent::Quarantined {
                fingerprint,
                reason,
                at,
            } => {
                if let Some(held) = slot.pending.take() {
                    slot.quarantine = Some(Quarantine {
                        fingerprint: fingerprint.clone(),
                        candidate: held.candidate,
                        reason: reason.clone(),
                        at: *at,
                    });
                }
            }
        }
        slot
    }

    fn event_kind(event: &CandidateEvent) -> &'static str {
        match event {
            CandidateEvent::Staged { .. } => "focus.candidate_staged",
            CandidateEvent::Archived(_) => "focus.candidate_archived",
            CandidateEvent::Quarantined { .. } => "focus.candidate_quarantined",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(claim: &str) -> Candidate {
        let path = LoopPath::parse("notes/b.md").unwrap();
        Candidate {
            schema: SCHEMA.into(),
            candidate_id: "op1".into(),
            dispatch_id: None,
            executor_provider: "claude".into(),
            executor_family: Family::Anthropic,
            claims: vec![Claim {
                claim_id: claim.into(),
                evidence_path: path.clone(),
            }],
            obligation_ids: vec![],
            obligation_targets: vec![],
            evidence: vec![Evidence::of(path, b"text".to_vec()).unwrap()],
            report: IterationReport::default(),
        }
    }

    /// A slot with `candidate` staged in it.
    fn staged(candidate: Candidate) -> Slot {
        let request = CandidateRequest::Stage {
            candidate: Box::new(candidate),
        };
        apply(None, request).unwrap()
    }

    fn apply(state: Option<Slot>, request: CandidateRequest) -> Result<Slot, CandidateError> {
        let clock = Clock {
            now: Timestamp::UNIX_EPOCH,
        };
        let decided = CandidateOwner::decide(state.as_ref(), &request, &clock)?;
        Ok(CandidateOwner::evolve(state, &decided.event.unwrap()))
    }

    #[test]
    fn only_a_candidate_staged_by_a_turn_the_host_gate_failed_is_quarantined_after_it() {
        let mut c = candidate("c1");
        c.dispatch_id = Some("d1".into());
        let fingerprint = c.fingerprint();
        let slot = staged(c);
        let clean = HostAttestation {
            prompt_delivered: true,
            timed_out: false,
            output_truncated: false,
            cleaned_up: true,
            sensitive_output: false,
        };
        let timed_out = HostAttestation {
            timed_out: true,
            ..clean
        };
        assert_eq!(slot.quarantine_after_turn("d1", &clean), None);
        assert_eq!(slot.quarantine_after_turn("d2", &timed_out), None);
        match slot.quarantine_after_turn("d1", &timed_out) {
            Some(CandidateRequest::Quarantine {
                fingerprint: held,
                reason,
            }) => {
                assert_eq!(held, fingerprint);
                assert!(
                    reason.contains("d1") && reason.contains("ran out of time"),
                    "{reason}"
                );
            }
            other => panic!("expected a quarantine, got {other:?}"),
        }
        // Every other failure of the gate holds it too, each named.
        for (failed, says) in [
            (
                HostAttestation {
                    prompt_delivered: false,
                    ..clean
                },
                "prompt was not delivered",
            ),
            (
                HostAttestation {
                    output_truncated: true,
                    ..clean
                },
                "output passed the cap",
            ),
            (
                HostAttestation {
                    cleaned_up: false,
                    ..clean
                },
                "outlived the cleanup",
            ),
            (
                HostAttestation {
                    sensitive_output: true,
                    ..clean
                },
                "held a credential",
            ),
        ] {
            match slot.quarantine_after_turn("d1", &failed) {
                Some(CandidateRequest::Quarantine { reason, .. }) => {
                    assert!(reason.contains(says), "{reason}")
                }
                other => panic!("expected a quarantine for {says}, got {other:?}"),
            }
        }
        assert_eq!(
            Slot::default().quarantine_after_turn("d1", &timed_out),
            None
        );
    }

    #[test]
    fn one_pending_candidate_leaves_only_by_its_exact_fingerprint() {
        let c = candidate("c1");
        let fingerprint = c.fingerprint();
        let slot = staged(c);
        let again = apply(
            Some(slot.clone()),
            CandidateRequest::Stage {
                candidate: Box::new(candidate("c2")),
            },
        );
        assert!(matches!(again, Err(CandidateError::AlreadyPending { .. })));
        let wrong = apply(
            Some(slot.clone()),
            CandidateRequest::Archive {
                base_revision: 1,
                fingerprint: candidate("c2").fingerprint(),
                outcome: BankStatus::Accepted,
            },
        );
        assert!(matches!(
            wrong,
            Err(CandidateError::WrongFingerprint { .. })
        ));
        let archived = apply(
            Some(slot),
            CandidateRequest::Archive {
                base_revision: 1,
                fingerprint,
                outcome: BankStatus::Rejected,
            },
        )
        .unwrap();
        assert_eq!(archived.pending, None);
        assert_eq!(archived.archived, 1);
        assert_eq!(archived.last_archived.unwrap().outcome, Outcome::Rejected);
    }

    #[test]
    fn a_quarantine_blocks_staging_and_review_until_an_exact_release() {
        let c = candidate("c1");
        let fingerprint = c.fingerprint();
        let slot = staged(c);
        let slot = apply(
            Some(slot),
            CandidateRequest::Quarantine {
                fingerprint: fingerprint.clone(),
                reason: "timeout".into(),
            },
        )
        .unwrap();
        assert_eq!(slot.hold(), Some(Hold::Quarantined(fingerprint.clone())));
        let staged = apply(
            Some(slot.clone()),
            CandidateRequest::Stage {
                candidate: Box::new(candidate("c2")),
            },
        );
        assert!(matches!(staged, Err(CandidateError::Quarantined { .. })));
        let archived = apply(
            Some(slot.clone()),
            CandidateRequest::Archive {
                base_revision: 2,
                fingerprint: fingerprint.clone(),
                outcome: BankStatus::Accepted,
            },
        );
        assert!(matches!(archived, Err(CandidateError::Quarantined { .. })));
        let wrong = apply(
            Some(slot.clone()),
            CandidateRequest::Release {
                fingerprint: candidate("c2").fingerprint(),
            },
        );
        assert!(matches!(
            wrong,
            Err(CandidateError::WrongFingerprint { .. })
        ));
        let released = apply(Some(slot), CandidateRequest::Release { fingerprint }).unwrap();
        assert_eq!(released.hold(), None);
        assert_eq!(released.last_archived.unwrap().outcome, Outcome::Released);
    }

    #[test]
    fn every_claim_needs_evidence_and_every_path_a_claim() {
        let mut report = IterationReport::default();
        report.evidence_checked.claim_ids = vec!["c1".into()];
        let path = LoopPath::parse("notes/b.md").unwrap();
        assert!(matches!(
            claims(&report, &[]),
            Err(CandidateError::ClaimWithoutEvidence { .. })
        ));
        assert!(matches!(
            claims(&report, &[("c2".into(), path.clone())]),
            Err(CandidateError::EvidenceWithoutClaim { .. })
        ));
        assert_eq!(claims(&report, &[("c1".into(), path)]).unwrap().len(), 1);
        assert!(matches!(
            known_executor("gateway", Family::Unverified),
            Err(CandidateError::ExecutorUnverified { .. })
        ));
    }

    fn intent(dispatch_id: &str, provider: &str) -> Intent {
        Intent {
            dispatch_id: dispatch_id.into(),
            iteration: 1,
            provider: provider.into(),
            prompt_digest: String::new(),
            ledger_revision: 1,
            iterations_before: 0,
            workspace: crate::driver::Workspace {
                root: "/p".into(),
                head: None,
                changes: None,
            },
            log: String::new(),
            started_at: Timestamp::UNIX_EPOCH,
        }
    }

    #[test]
    fn the_executor_is_the_open_dispatchs_never_the_reports() {
        let open = intent("d1", "claude");
        let bound = executor(Some(&open), "d1", "", None).unwrap();
        assert_eq!(bound.dispatch_id.as_deref(), Some("d1"));
        assert_eq!(bound.provider, "claude");
        assert!(executor(Some(&open), "d1", "claude", Some("claude")).is_ok());
        assert!(matches!(
            executor(Some(&open), "d1", "codex", None),
            Err(CandidateError::ExecutorDiffers { .. })
        ));
        assert!(matches!(
            executor(Some(&open), "d1", "", Some("codex")),
            Err(CandidateError::ExecutorDiffers { .. })
        ));
        for given in ["", "d2"] {
            assert!(matches!(
                executor(Some(&open), given, "", Some("claude")),
                Err(CandidateError::NotTheOpenDispatch { .. })
            ));
        }
        // No dispatch open: only the operator's explicit statement names it.
        assert_eq!(
            executor(None, "", "codex", None),
            Err(CandidateError::NoOpenDispatch)
        );
        assert!(matches!(
            executor(None, "", "codex", Some("claude")),
            Err(CandidateError::ExecutorDiffers { .. })
        ));
        assert!(matches!(
            executor(None, "d1", "", Some("claude")),
            Err(CandidateError::NotTheOpenDispatch { open: None, .. })
        ));
        let by_hand = executor(None, "", "", Some(" claude ")).unwrap();
        assert_eq!(
            (by_hand.dispatch_id, by_hand.provider.as_str()),
            (None, "claude")
        );
    }

    #[test]
    fn a_dispatch_stages_one_candidate_at_most() {
        let mut c = candidate("c1");
        c.dispatch_id = Some("d1".into());
        let fingerprint = c.fingerprint();
        let slot = apply(
            None,
            CandidateRequest::Stage {
                candidate: Box::new(c.clone()),
            },
        )
        .unwrap();
        let archived = apply(
            Some(slot),
            CandidateRequest::Archive {
                base_revision: 1,
                fingerprint,
                outcome: BankStatus::Accepted,
            },
        )
        .unwrap();
        c.claims[0].claim_id = "c2".into();
        let again = apply(
            Some(archived.clone()),
            CandidateRequest::Stage {
                candidate: Box::new(c.clone()),
            },
        );
        assert!(matches!(again, Err(CandidateError::DispatchUsed { .. })));
        c.dispatch_id = Some("d2".into());
        assert!(apply(
            Some(archived),
            CandidateRequest::Stage {
                candidate: Box::new(c)
            }
        )
        .is_ok());
    }
}
