//! `result_review.v1`: a reviewer's verdict on one staged candidate, and
//! the rule that decides whether it may bank that candidate.
//!
//! Owns: the schema (unknown fields are refused, so a typo is never a
//! silent omission), and [`judge`]: the reviewer's family must be known
//! and differ from the executor's; the review binds the candidate's exact
//! fingerprint; it covers the candidate's complete claim and obligation
//! sets by itself (split coverage across reviewers is not unanimity); every
//! supported claim and met obligation cites staged evidence the reviewer
//! lists as inspected; a met obligation states exactly the target status
//! the candidate requests for it; and a `pass` verdict agrees with its
//! entries. Does
//! not own where the family comes from (the provider table and the
//! environment, read by the application) or the banking.

use super::candidate::Candidate;
use crate::digest::Digest;
use crate::driver::provider::Family;
use crate::focus::contract::ObligationStatus as TargetStatus;
use crate::ledger::BankStatus;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

pub const SCHEMA: &str = "result_review.v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultReview {
    pub schema: String,
    pub candidate_fingerprint: Digest,
    pub reviewer: Reviewer,
    pub verdict: Verdict,
    pub claims: Vec<ClaimReview>,
    pub obligations: Vec<ObligationReview>,
    pub inspected_paths: Vec<String>,
    #[serde(default)]
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reviewer {
    /// A provider of the provider table (`claude`, `codex`, ...).
    pub provider: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimStatus {
    Supported,
    Unsupported,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObligationStatus {
    Met,
    Unmet,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimReview {
    pub claim_id: String,
    pub status: ClaimStatus,
    #[serde(default)]
    pub evidence_paths: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObligationReview {
    pub obligation_id: String,
    pub status: ObligationStatus,
    /// The status the reviewer finds the obligation reaches: with `met`,
    /// exactly the one the candidate requests (none when it requests none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_status: Option<TargetStatus>,
    #[serde(default)]
    pub evidence_paths: Vec<String>,
}

/// Why a review cannot decide the candidate. Nothing is written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReviewProblem {
    #[error("the review's schema is {got:?}, not {SCHEMA:?}")]
    Schema { got: String },
    #[error("the review binds candidate {given}, but the pending candidate is {actual}: a review decides only the exact candidate it read")]
    WrongFingerprint { given: Digest, actual: Digest },
    #[error("reviewer provider {provider:?} has no verified family (unknown to the provider table, or an endpoint override is set): enforce mode fails closed")]
    UnverifiedReviewer { provider: String },
    #[error("reviewer {provider:?} is of the {family} family, the executor's own: a result review must come from a different family")]
    SameFamily {
        provider: String,
        family: &'static str,
    },
    #[error("the review does not cover {kind} {id:?}: one review must cover every claim and obligation of the candidate (split coverage across reviewers is not unanimity)")]
    NotCovered { kind: &'static str, id: String },
    #[error("the review judges {kind} {id:?}, which the candidate does not make")]
    Unknown { kind: &'static str, id: String },
    #[error("the review judges {kind} {id:?} twice")]
    Twice { kind: &'static str, id: String },
    #[error("the review finds {kind} {id:?} {status} but cites no staged evidence it lists in inspected_paths")]
    Uncited {
        kind: &'static str,
        id: String,
        status: &'static str,
    },
    #[error("the review lists {path:?} as inspected, but the candidate staged no such evidence")]
    NotStaged { path: String },
    #[error("the review finds obligation {id:?} met with target status {}, but the candidate requests {}: an accepted obligation review states exactly the requested target status", word(*stated), word(*requested))]
    TargetStatus {
        id: String,
        requested: Option<TargetStatus>,
        stated: Option<TargetStatus>,
    },
    #[error("the review's verdict is pass, but it finds {kind} {id:?} not supported: a pass needs every claim supported and every obligation met")]
    PassDisagrees { kind: &'static str, id: String },
}

/// Whether `review` decides `candidate` (whose fingerprint is
/// `fingerprint`), written by a reviewer of `reviewer_family`: the bank
/// status it decides, or why it cannot.
pub fn judge(
    review: &ResultReview,
    candidate: &Candidate,
    fingerprint: &Digest,
    reviewer_family: Family,
) -> Result<BankStatus, ReviewProblem> {
    if review.schema != SCHEMA {
        return Err(ReviewProblem::Schema {
            got: review.schema.clone(),
        });
    }
    if &review.candidate_fingerprint != fingerprint {
        return Err(ReviewProblem::WrongFingerprint {
            given: review.candidate_fingerprint.clone(),
            actual: fingerprint.clone(),
        });
    }
    let provider = review.reviewer.provider.clone();
    if reviewer_family == Family::Unverified {
        return Err(ReviewProblem::UnverifiedReviewer { provider });
    }
    if reviewer_family == candidate.executor_family {
        return Err(ReviewProblem::SameFamily {
            provider,
            family: reviewer_family.name(),
        });
    }
    let inspected: BTreeSet<&str> = review.inspected_paths.iter().map(String::as_str).collect();
    if let Some(path) = inspected
        .iter()
        .find(|p| candidate.evidence_at(p).is_none())
    {
        return Err(ReviewProblem::NotStaged {
            path: (*path).to_owned(),
        });
    }
    let cites = |paths: &[String]| paths.iter().any(|p| inspected.contains(p.as_str()));
    let claims = candidate.claim_ids();
    let reviewed = review.claims.iter().map(|c| {
        let supported = c.status == ClaimStatus::Supported;
        (c.claim_id.as_str(), supported, cites(&c.evidence_paths))
    });
    coverage("claim", &claims, reviewed, review.verdict, "supported")?;
    let obligations: BTreeSet<&str> = candidate
        .obligation_ids
        .iter()
        .map(String::as_str)
        .collect();
    let reviewed = review.obligations.iter().map(|o| {
        let met = o.status == ObligationStatus::Met;
        (o.obligation_id.as_str(), met, cites(&o.evidence_paths))
    });
    coverage("obligation", &obligations, reviewed, review.verdict, "met")?;
    if let Some(mismatch) = (review.obligations.iter())
        .filter(|o| o.status == ObligationStatus::Met)
        .find(|o| o.target_status != candidate.target_of(&o.obligation_id))
    {
        return Err(ReviewProblem::TargetStatus {
            id: mismatch.obligation_id.clone(),
            requested: candidate.target_of(&mismatch.obligation_id),
            stated: mismatch.target_status,
        });
    }
    Ok(match review.verdict {
        Verdict::Pass => BankStatus::Accepted,
        Verdict::Fail => BankStatus::Rejected,
    })
}

/// A target status as messages name it.
fn word(status: Option<TargetStatus>) -> String {
    status.map_or("none".to_owned(), |s| s.to_string())
}

/// Every id of `expected` judged exactly once, nothing else judged, each
/// positive finding cited, and a pass only with positive findings.
fn coverage<'a>(
    kind: &'static str,
    expected: &BTreeSet<&str>,
    reviewed: impl Iterator<Item = (&'a str, bool, bool)>,
    verdict: Verdict,
    positive: &'static str,
) -> Result<(), ReviewProblem> {
    let mut seen = BTreeSet::new();
    for (id, ok, cited) in reviewed {
        let name = || id.to_owned();
        if !expected.contains(id) {
            return Err(ReviewProblem::Unknown { kind, id: name() });
        }
        if !seen.insert(id) {
            return Err(ReviewProblem::Twice { kind, id: name() });
        }
        if ok && !cited {
            return Err(ReviewProblem::Uncited {
                kind,
                id: name(),
                status: positive,
            });
        }
        if !ok && verdict == Verdict::Pass {
            return Err(ReviewProblem::PassDisagrees { kind, id: name() });
        }
    }
    if let Some(missing) = expected.iter().find(|id| !seen.contains(*id)) {
        return Err(ReviewProblem::NotCovered {
            kind,
            id: (*missing).to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::focus::candidate::{Claim, Evidence, SCHEMA as CANDIDATE};
    use crate::ledger::IterationReport;
    use crate::path::LoopPath;

    fn candidate() -> Candidate {
        let path = |p: &str| LoopPath::parse(p).unwrap();
        Candidate {
            schema: CANDIDATE.into(),
            candidate_id: "op1".into(),
            dispatch_id: None,
            executor_provider: "claude".into(),
            executor_family: Family::Anthropic,
            claims: vec![
                Claim {
                    claim_id: "c1".into(),
                    evidence_path: path("a.md"),
                },
                Claim {
                    claim_id: "c2".into(),
                    evidence_path: path("b.md"),
                },
            ],
            obligation_ids: vec!["o1".into()],
            obligation_targets: vec![],
            evidence: vec![
                Evidence::of(path("a.md"), b"a".to_vec()).unwrap(),
                Evidence::of(path("b.md"), b"b".to_vec()).unwrap(),
            ],
            report: IterationReport::default(),
        }
    }

    fn review(c: &Candidate, verdict: &str) -> ResultReview {
        serde_json::from_value(serde_json::json!({
            "schema": SCHEMA,
            "candidate_fingerprint": c.fingerprint(),
            "reviewer": {"provider": "codex"},
            "verdict": verdict,
            "claims": [
                {"claim_id": "c1", "status": "supported", "evidence_paths": ["a.md"]},
                {"claim_id": "c2", "status": "supported", "evidence_paths": ["b.md"]}
            ],
            "obligations": [{"obligation_id": "o1", "status": "met", "evidence_paths": ["a.md"]}],
            "inspected_paths": ["a.md", "b.md"]
        }))
        .unwrap()
    }

    #[test]
    fn a_complete_different_family_review_decides_and_nothing_less_does() {
        let c = candidate();
        let f = c.fingerprint();
        assert_eq!(
            judge(&review(&c, "pass"), &c, &f, Family::Openai),
            Ok(BankStatus::Accepted)
        );
        assert_eq!(
            judge(&review(&c, "fail"), &c, &f, Family::Openai),
            Ok(BankStatus::Rejected)
        );
        assert!(matches!(
            judge(&review(&c, "pass"), &c, &f, Family::Anthropic),
            Err(ReviewProblem::SameFamily { .. })
        ));
        assert!(matches!(
            judge(&review(&c, "pass"), &c, &f, Family::Unverified),
            Err(ReviewProblem::UnverifiedReviewer { .. })
        ));
        // Split coverage: two reviews, each covering one claim.
        for keep in 0..2 {
            let mut half = review(&c, "pass");
            half.claims = vec![half.claims[keep].clone()];
            assert!(matches!(
                judge(&half, &c, &f, Family::Openai),
                Err(ReviewProblem::NotCovered { kind: "claim", .. })
            ));
        }
        let other = Digest::of_bytes(b"another candidate");
        assert!(matches!(
            judge(&review(&c, "pass"), &c, &other, Family::Openai),
            Err(ReviewProblem::WrongFingerprint { .. })
        ));
        let mut unknown = serde_json::to_value(review(&c, "pass")).unwrap();
        unknown["verdict_reason"] = serde_json::json!("looks fine");
        assert!(serde_json::from_value::<ResultReview>(unknown).is_err());
    }

    #[test]
    fn an_accepted_obligation_states_exactly_the_requested_target_status() {
        let mut c = candidate();
        c.obligation_targets = vec![crate::focus::candidate::ObligationTarget {
            obligation_id: "o1".into(),
            target_status: TargetStatus::Satisfied,
        }];
        let f = c.fingerprint();
        let stating = |target: Option<TargetStatus>, status: ObligationStatus| {
            let mut r = review(
                &c,
                if status == ObligationStatus::Met {
                    "pass"
                } else {
                    "fail"
                },
            );
            r.obligations[0].status = status;
            r.obligations[0].target_status = target;
            if status == ObligationStatus::Unmet {
                r.claims[0].status = ClaimStatus::Unsupported;
            }
            judge(&r, &c, &f, Family::Openai)
        };
        assert_eq!(
            stating(Some(TargetStatus::Satisfied), ObligationStatus::Met),
            Ok(BankStatus::Accepted)
        );
        for wrong in [
            None,
            Some(TargetStatus::Partial),
            Some(TargetStatus::Closed),
        ] {
            assert!(matches!(
                stating(wrong, ObligationStatus::Met),
                Err(ReviewProblem::TargetStatus { .. })
            ));
        }
        // Rejecting needs no target status.
        assert_eq!(
            stating(None, ObligationStatus::Unmet),
            Ok(BankStatus::Rejected)
        );
        // No target requested: a met review states none.
        let plain = candidate();
        let pf = plain.fingerprint();
        let mut r = review(&plain, "pass");
        r.obligations[0].target_status = Some(TargetStatus::Satisfied);
        assert!(matches!(
            judge(&r, &plain, &pf, Family::Openai),
            Err(ReviewProblem::TargetStatus { .. })
        ));
    }
}
