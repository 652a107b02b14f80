//! The owners' errors, listed once: each is a refusal (a rule said no, and
//! nothing was written), with its [`Classify`], and [`classify_refusal`],
//! which finds one behind a `dyn Error` (an owner's refusal a use case
//! returns before anything reaches the authority).
//!
//! Apart from `crate::error_class` because it names every owner, and every
//! owner names the `Owner` trait, which names the class.

use crate::error_class::{Classify, ErrorClass};
use serde_json::Value;

/// Each owner error's [`Classify`], and [`classify_refusal`] over them.
macro_rules! owner_errors {
    ($($error:ty $(=> $details:path)?),+ $(,)?) => {
        $(impl Classify for $error {
            fn class(&self) -> ErrorClass {
                ErrorClass::Refused
            }
            $(fn details(&self) -> Option<Value> {
                $details(self)
            })?
        })+

        /// The class and details of `error` when it is one of the owners'
        /// errors.
        pub fn classify_refusal(
            error: &(dyn std::error::Error + 'static),
        ) -> Option<(ErrorClass, Option<Value>)> {
            $(if let Some(refusal) = error.downcast_ref::<$error>() {
                return Some((refusal.class(), refusal.details()));
            })+
            None
        }
    };
}

owner_errors!(
    crate::goal::GoalError,
    crate::driver::DriverError,
    crate::focus::FocusError => crate::focus::FocusError::details,
    crate::focus::candidate::CandidateError => crate::focus::candidate::CandidateError::details,
    crate::panel::PanelProblem,
    crate::formal::FormalProblem,
    crate::ledger::LedgerError => crate::ledger::LedgerError::details,
    crate::workers::QueueError,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owners_refusal_is_found_behind_a_dyn_error_with_its_details() {
        let refused = crate::ledger::LedgerError::EarlyStopWithoutEvidence;
        let (class, details) = classify_refusal(&refused).expect("an owner's error");
        assert_eq!(class, ErrorClass::Refused);
        assert!(details.is_some(), "the ledger names the rule that refused");
        assert_eq!(details, refused.details());
        let unknown = std::io::Error::other("disk on fire");
        assert!(classify_refusal(&unknown).is_none());
    }
}
