//! What banking a reviewed candidate does to the goal contract: an
//! accepted candidate's requested obligation target statuses (each one the
//! review stated exactly, [`super::review::judge`]) become the statuses of
//! those obligations; a rejected candidate changes nothing (its
//! transitions are cleared with its claims, as the ledger clears them from
//! its row).
//!
//! Owns: which transitions a banking applies, the contract they produce,
//! and whether a banked row reduced the open obligations (what the "three
//! iterations without global obligation reduction" trigger counts). Does
//! not own the review (`review`), the row (the ledger's) or committing the
//! three together (the application, in one transaction).

use super::candidate::{Candidate, ObligationTarget};
use super::contract::GoalContract;
use crate::ledger::{BankStatus, IterationRecord};

/// The transitions banking `candidate` as `status` applies to `contract`:
/// none when rejected; when accepted, each requested target of an
/// obligation the contract defines (one the contract no longer defines,
/// revised away since staging, has nothing to move).
pub fn transitions(
    contract: &GoalContract,
    candidate: &Candidate,
    status: BankStatus,
) -> Vec<ObligationTarget> {
    match status {
        BankStatus::Rejected => Vec::new(),
        BankStatus::Accepted => (candidate.obligation_targets.iter())
            .filter(|t| contract.obligation(&t.obligation_id).is_some())
            .cloned()
            .collect(),
    }
}

/// `contract` with `transitions` applied, or `None` when they change
/// nothing (no revision is written for a banking that moves nothing).
pub fn applied(contract: &GoalContract, transitions: &[ObligationTarget]) -> Option<GoalContract> {
    let mut next = contract.clone();
    for transition in transitions {
        if let Some(obligation) =
            (next.obligations.iter_mut()).find(|o| o.obligation_id == transition.obligation_id)
        {
            obligation.status = transition.target_status;
        }
    }
    (next != *contract).then_some(next)
}

/// Whether `record` reduced the open obligations: a reviewed banking that
/// discharged one. In enforce mode only a review's transitions count (an
/// agent's own `global_delta` is its claim, not a reduction); a row no
/// review banked (monitor mode, legacy) counts its declared
/// `global_delta` of `reduced` or `satisfied`.
pub fn reduced(record: &IterationRecord) -> bool {
    match &record.bank {
        Some(bank) => (bank.obligation_transitions.iter()).any(|t| t.target_status.is_discharged()),
        None => matches!(
            record.direction.global_delta.as_str(),
            "reduced" | "satisfied"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::focus::contract::{Obligation, ObligationKind, ObligationStatus};
    use crate::ledger::{Bank, IterationReport};

    fn contract() -> GoalContract {
        let obligation = |id: &str| Obligation {
            obligation_id: id.into(),
            description: format!("prove {id}"),
            kind: ObligationKind::Bridge,
            status: ObligationStatus::Open,
            depends_on: Vec::new(),
        };
        GoalContract {
            goal: "g".into(),
            criteria: Vec::new(),
            scope: Default::default(),
            obligations: vec![obligation("o1"), obligation("o2")],
            trip_wires: Vec::new(),
        }
    }

    fn asking(targets: &[(&str, ObligationStatus)]) -> Candidate {
        Candidate {
            schema: crate::focus::candidate::SCHEMA.into(),
            candidate_id: "op".into(),
            dispatch_id: None,
            executor_provider: "claude".into(),
            executor_family: crate::driver::provider::Family::Anthropic,
            claims: Vec::new(),
            obligation_ids: targets.iter().map(|(id, _)| (*id).to_owned()).collect(),
            obligation_targets: targets
                .iter()
                .map(|(id, status)| ObligationTarget {
                    obligation_id: (*id).to_owned(),
                    target_status: *status,
                })
                .collect(),
            evidence: Vec::new(),
            report: IterationReport::default(),
        }
    }

    #[test]
    fn an_accepted_candidate_moves_exactly_its_defined_targets_and_a_rejected_one_none() {
        let candidate = asking(&[
            ("o1", ObligationStatus::Satisfied),
            ("gone", ObligationStatus::Closed),
        ]);
        let contract = contract();
        assert!(transitions(&contract, &candidate, BankStatus::Rejected).is_empty());
        let moved = transitions(&contract, &candidate, BankStatus::Accepted);
        assert_eq!(
            moved.len(),
            1,
            "an obligation the contract lacks moves nothing"
        );
        let next = applied(&contract, &moved).expect("o1 moved");
        assert_eq!(next.obligations[0].status, ObligationStatus::Satisfied);
        assert_eq!(next.obligations[1].status, ObligationStatus::Open);
        assert_eq!(next.open_obligations(), 1);
        assert_eq!(
            applied(&next, &moved),
            None,
            "applying again changes nothing"
        );
    }

    #[test]
    fn only_a_reviewed_discharge_counts_as_a_reduction_once_a_review_banks() {
        let mut record = crate::focus::tests::record(1);
        record.direction.global_delta = "reduced".into();
        assert!(
            reduced(&record),
            "an unreviewed row counts its declared delta"
        );
        record.bank = Some(Bank {
            status: BankStatus::Accepted,
            candidate_fingerprint: crate::digest::Digest::of_bytes(b"c"),
            obligation_transitions: vec![ObligationTarget {
                obligation_id: "o1".into(),
                target_status: ObligationStatus::Partial,
            }],
        });
        assert!(!reduced(&record), "a banked row's own claim does not count");
        record.bank.as_mut().unwrap().obligation_transitions[0].target_status =
            ObligationStatus::Satisfied;
        assert!(reduced(&record));
    }
}
