//! The one classification of what went wrong, decided here once and mapped
//! once by each adapter: to an exit code (CLI), an HTTP status (serve), a
//! tool error (MCP).
//!
//! Use cases return [`AppError`]: a class, the message a person reads, and
//! optional structured details (which rule refused, the current revision a
//! stale writer should re-read). Messages name the value that was wrong;
//! adapter-specific hints (a CLI flag, an HTTP header) are the adapter's to
//! add.

use loopx_core::driver::DriverError;
use loopx_core::focus::candidate::CandidateError;
use loopx_core::focus::FocusError;
use loopx_core::goal::GoalError;
use loopx_core::ledger::LedgerError;
use loopx_store::{AuthorityError, StoreError};
use serde::Serialize;
use serde_json::Value;

/// What kind of failure this is, from the caller's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The request was understood and refused by a rule; nothing was
    /// written. Retrying the same request is refused again.
    Refused,
    /// The operation id was already used for a different request.
    Conflict,
    /// The request was prepared against a revision that is no longer
    /// current: read again, then retry.
    Stale,
    /// The loop, goal, iteration or file asked for does not exist.
    NotFound,
    /// The store could not be reached or is busy; retrying later may work
    /// and loses nothing.
    Unavailable,
    /// A bug or a damaged store: a person should look.
    Internal,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Refused => "refused",
            ErrorClass::Conflict => "conflict",
            ErrorClass::Stale => "stale",
            ErrorClass::NotFound => "not_found",
            ErrorClass::Unavailable => "unavailable",
            ErrorClass::Internal => "internal",
        }
    }
}

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

fn of_store(error: &StoreError) -> ErrorClass {
    match error {
        StoreError::StaleRevision { .. } | StoreError::FenceMoved { .. } => ErrorClass::Stale,
        StoreError::DuplicateOperation { .. } => ErrorClass::Conflict,
        StoreError::Missing { .. } => ErrorClass::NotFound,
        StoreError::TooOld { .. }
        | StoreError::TooNew { .. }
        | StoreError::NotMigrated { .. }
        | StoreError::Unsupported { .. }
        | StoreError::OrphanedLog { .. } => ErrorClass::Refused,
        StoreError::Corrupt { .. } => ErrorClass::Internal,
        StoreError::BadLocator { .. } | StoreError::Exists { .. } | StoreError::Occupied { .. } => {
            ErrorClass::Refused
        }
        StoreError::Unavailable { .. } | StoreError::Backend(_) => ErrorClass::Unavailable,
    }
}

fn of_authority<E>(error: &AuthorityError<E>) -> (ErrorClass, Option<Value>) {
    match error {
        AuthorityError::Rejected(_) => (ErrorClass::Refused, None),
        AuthorityError::Conflict { .. } => (
            ErrorClass::Conflict,
            Some(serde_json::json!({"reason": "operation_conflict"})),
        ),
        AuthorityError::StaleBase { actual, .. } => (
            ErrorClass::Stale,
            Some(serde_json::json!({"reason": "stale", "current_revision": actual})),
        ),
        AuthorityError::Contended { .. } => (ErrorClass::Unavailable, None),
        AuthorityError::PartiallyCommitted { .. } => (
            ErrorClass::Conflict,
            Some(serde_json::json!({"reason": "partially_committed"})),
        ),
        AuthorityError::Unreadable { .. } => (ErrorClass::Internal, None),
        AuthorityError::Store(store) => (of_store(store), None),
    }
}

/// The store error an error carries, directly or inside any owner's
/// authority error, if any.
fn store_cause(error: &anyhow::Error) -> Option<&StoreError> {
    fn inside<'a, E: std::error::Error + Send + Sync + 'static>(
        cause: &'a (dyn std::error::Error + 'static),
    ) -> Option<&'a StoreError> {
        match cause.downcast_ref::<AuthorityError<E>>()? {
            AuthorityError::Store(store) => Some(store),
            _ => None,
        }
    }
    error.chain().find_map(|cause| {
        cause
            .downcast_ref::<StoreError>()
            .or_else(|| inside::<LedgerError>(cause))
            .or_else(|| inside::<GoalError>(cause))
            .or_else(|| inside::<DriverError>(cause))
            .or_else(|| inside::<loopx_store::Either<LedgerError, DriverError>>(cause))
    })
}

/// The store was unreachable (a server down or restarting), as against
/// refused, contended or damaged: the one failure a long-lived process
/// may wait out and retry with the same operation ids. Short commands
/// report it (class [`ErrorClass::Unavailable`]) and exit.
pub fn store_outage(error: &anyhow::Error) -> Option<&StoreError> {
    store_cause(error).filter(|e| matches!(e, StoreError::Unavailable { .. }))
}

/// Decide the class of an error from the typed causes it carries. Errors
/// with no typed cause are internal: a use case that means "refused" says
/// so with [`AppError::refused`].
fn classify(error: &anyhow::Error) -> (ErrorClass, Option<Value>) {
    for cause in error.chain() {
        if let Some(e) = cause.downcast_ref::<AuthorityError<LedgerError>>() {
            let (class, details) = of_authority(e);
            let details = match e {
                AuthorityError::Rejected(refusal) => refusal.details(),
                _ => details,
            };
            return (class, details);
        }
        if let Some(e) = cause.downcast_ref::<AuthorityError<GoalError>>() {
            return of_authority(e);
        }
        if let Some(e) = cause.downcast_ref::<AuthorityError<DriverError>>() {
            return of_authority(e);
        }
        // The driver's charge and settlement, committed as one pair.
        if let Some(e) =
            cause.downcast_ref::<AuthorityError<loopx_store::Either<LedgerError, DriverError>>>()
        {
            return of_authority(e);
        }
        if let Some(e) = cause.downcast_ref::<AuthorityError<FocusError>>() {
            return of_authority(e);
        }
        // A replan: its plan and its decision, committed as one pair.
        if let Some(e) =
            cause.downcast_ref::<AuthorityError<loopx_store::Either<FocusError, FocusError>>>()
        {
            return of_authority(e);
        }
        // Staging, quarantine and release; a finalization's ledger row
        // and archive, committed as one pair.
        if let Some(e) = cause.downcast_ref::<AuthorityError<CandidateError>>() {
            return of_authority(e);
        }
        if let Some(e) =
            cause.downcast_ref::<AuthorityError<loopx_store::Either<LedgerError, CandidateError>>>()
        {
            return of_authority(e);
        }
        if let Some(e) = cause.downcast_ref::<StoreError>() {
            return (of_store(e), None);
        }
        if let Some(e) = cause.downcast_ref::<LedgerError>() {
            return (ErrorClass::Refused, e.details());
        }
        if cause.downcast_ref::<GoalError>().is_some()
            || cause.downcast_ref::<DriverError>().is_some()
            || cause.downcast_ref::<FocusError>().is_some()
            || cause.downcast_ref::<CandidateError>().is_some()
        {
            return (ErrorClass::Refused, None);
        }
    }
    (ErrorClass::Internal, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_base_is_stale_with_the_current_revision() {
        let error: AuthorityError<GoalError> = AuthorityError::StaleBase {
            stream: "goal:main".into(),
            expected: 3,
            actual: 5,
        };
        let app = AppError::from(anyhow::Error::new(error));
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
    fn an_app_error_keeps_its_class_through_context() {
        let error = anyhow::Error::new(AppError::refused("no such todo t9")).context("todo claim");
        let app = AppError::from(error);
        assert_eq!(app.class, ErrorClass::Refused);
        assert!(app.message.contains("no such todo t9"), "{}", app.message);
    }
}
