//! The one classification of what went wrong, decided here once and mapped
//! once by each adapter: to an exit code (CLI), an HTTP status (serve), a
//! tool error (MCP).
//!
//! Use cases return [`AppError`]: a class, the message a person reads, and
//! optional structured details (which rule refused, the current revision a
//! stale writer should re-read). Messages name the value that was wrong;
//! adapter-specific hints (a CLI flag, an HTTP header) are the adapter's to
//! add.

use loopx_store::{Classified, StoreError};
use serde_json::Value;

pub use loopx_core::error_class::{Classify, ErrorClass};

/// A failed use case.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    pub class: ErrorClass,
    pub message: String,
    /// Machine-readable facts about the failure (merged into `--json` and
    /// HTTP error bodies).
    pub details: Option<Value>,
}

impl AppError {
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        AppError {
            class,
            message: message.into(),
            details: None,
        }
    }

    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Refused, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::NotFound, message)
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
}

/// The full chain of an error, outermost first, without repetition.
pub fn describe(error: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

impl From<anyhow::Error> for AppError {
    fn from(error: anyhow::Error) -> Self {
        if let Some(app) = error.downcast_ref::<AppError>() {
            return AppError {
                class: app.class,
                message: describe(&error),
                details: app.details.clone(),
            };
        }
        let (class, details) = classify(&error);
        AppError {
            class,
            message: describe(&error),
            details,
        }
    }
}

/// The store error an error carries, under whatever wrapped it.
fn store_cause(error: &anyhow::Error) -> Option<&StoreError> {
    error
        .chain()
        .find_map(|cause| cause.downcast_ref::<StoreError>())
}

/// The store was unreachable (a server down or restarting), as against
/// refused, contended or damaged: the one failure a long-lived process
/// may wait out and retry with the same operation ids. Short commands
/// report it (class [`ErrorClass::Unavailable`]) and exit.
pub fn store_outage(error: &anyhow::Error) -> Option<&StoreError> {
    store_cause(error).filter(|e| matches!(e, StoreError::Unavailable { .. }))
}

/// A refusal by an owner, returned by a use case without going through
/// the authority (a check before anything is opened): carried with its
/// class, as the authority's own errors are.
pub fn refusal<E>(error: E) -> anyhow::Error
where
    E: Classify + std::fmt::Display + std::fmt::Debug + Send + Sync + 'static,
{
    anyhow::Error::new(Classified::new(error))
}

/// What kind of failure `error` is ([`classify`]).
pub fn class_of(error: &anyhow::Error) -> ErrorClass {
    classify(error).0
}

/// The class of an error: the one its first classified cause gave itself
/// (an authority's or a store's failure, an owner's refusal). An error
/// nothing classified is internal: a use case that means "refused" says so
/// with [`AppError::refused`].
fn classify(error: &anyhow::Error) -> (ErrorClass, Option<Value>) {
    for cause in error.chain() {
        if let Some(classified) = cause.downcast_ref::<Classified>() {
            return (classified.class(), classified.details().cloned());
        }
        if let Some(store) = cause.downcast_ref::<StoreError>() {
            return (store.class(), None);
        }
        if let Some(found) = loopx_core::refusals::classify_refusal(cause) {
            return found;
        }
    }
    (ErrorClass::Internal, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopx_core::goal::GoalError;
    use loopx_core::ledger::LedgerError;
    use loopx_store::AuthorityError;

    #[test]
    fn a_stale_base_is_stale_with_the_current_revision() {
        let error: AuthorityError<GoalError> = AuthorityError::StaleBase {
            stream: "goal:main".into(),
            expected: 3,
            actual: 5,
        };
        let app = AppError::from(anyhow::Error::from(error));
        assert_eq!(app.class, ErrorClass::Stale);
        assert_eq!(app.details.unwrap()["current_revision"], 5);
    }

    #[test]
    fn a_missing_store_is_not_found_and_an_untyped_error_internal() {
        let missing = StoreError::Missing {
            path: "/x/loopx.sqlite".into(),
        };
        assert_eq!(
            AppError::from(anyhow::Error::new(missing)).class,
            ErrorClass::NotFound
        );
        assert_eq!(
            AppError::from(anyhow::anyhow!("boom")).class,
            ErrorClass::Internal
        );
    }

    #[test]
    fn a_refusal_keeps_its_class_and_details_through_context_and_a_store_outage_is_found() {
        let refused: AuthorityError<LedgerError> =
            AuthorityError::Rejected(LedgerError::EarlyStopWithoutEvidence);
        let error = anyhow::Error::from(refused).context("append-iteration");
        let app = AppError::from(error);
        assert_eq!(app.class, ErrorClass::Refused);
        assert!(app.details.is_some(), "the rule that refused is named");
        let direct = AppError::from(refusal(LedgerError::EarlyStopWithoutEvidence));
        assert_eq!(
            (direct.class, direct.details.is_some()),
            (ErrorClass::Refused, true)
        );
        let down: AuthorityError<GoalError> = AuthorityError::Store(StoreError::Unavailable {
            location: "postgres://db".into(),
            reason: "connection refused".into(),
        });
        let error = anyhow::Error::from(down).context("claim");
        assert!(store_outage(&error).is_some());
        assert_eq!(AppError::from(error).class, ErrorClass::Unavailable);
    }

    #[test]
    fn an_app_error_keeps_its_class_through_context() {
        let error = anyhow::Error::new(AppError::refused("no such todo t9")).context("todo claim");
        let app = AppError::from(error);
        assert_eq!(app.class, ErrorClass::Refused);
        assert!(app.message.contains("no such todo t9"), "{}", app.message);
    }
}
