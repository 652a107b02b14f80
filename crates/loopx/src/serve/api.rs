//! JSON endpoints. Reads return what the CLI's `--json` reads return;
//! writes go through the same owners and answer with receipts.

use super::App;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use loopx_app::goal::acceptance::{self, NewRequirement, RevisionSource};
use loopx_app::{clock, continuation};
use loopx_core::digest::Digest;
use loopx_core::goal::objective::ObjectiveDocument;
use loopx_core::goal::{self, Actor, GoalError};
use loopx_core::ledger::{view, LedgerError};
use loopx_core::operation::OperationId;
use loopx_store::sqlite::Access;
use loopx_store::AuthorityError;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// A failed request: status and a message that says what to do.
pub struct Failure(pub StatusCode, pub String, pub Value);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let mut body = json!({"status": "failed", "error": self.1});
        if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), self.2) {
            body.extend(extra);
        }
        (
            self.0,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}

fn bad(message: impl Into<String>) -> Failure {
    Failure(StatusCode::BAD_REQUEST, message.into(), Value::Null)
}

/// Map an error from the owners and the store to an HTTP answer.
pub fn failure(error: anyhow::Error) -> Failure {
    let message = loopx_app::error::describe(&error);
    if let Some(error) = error.downcast_ref::<AuthorityError<GoalError>>() {
        return match error {
            AuthorityError::Rejected(_) => bad(message),
            AuthorityError::Conflict { .. } => Failure(
                StatusCode::CONFLICT,
                message,
                json!({"reason": "operation_conflict"}),
            ),
            AuthorityError::StaleBase { actual, .. } => Failure(
                StatusCode::CONFLICT,
                message,
                json!({"reason": "stale", "current_revision": actual}),
            ),
            _ => Failure(StatusCode::INTERNAL_SERVER_ERROR, message, Value::Null),
        };
    }
    if error
        .downcast_ref::<AuthorityError<LedgerError>>()
        .is_some()
        || error.downcast_ref::<GoalError>().is_some()
    {
        return bad(message);
    }
    Failure(StatusCode::INTERNAL_SERVER_ERROR, message, Value::Null)
}

/// Run blocking store work off the async threads.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> Result<T, Failure> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(failure),
        Err(error) => Err(Failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            error.to_string(),
            Value::Null,
        )),
    }
}

fn ok(value: Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

pub async fn status(State(app): State<Arc<App>>) -> Result<Response, Failure> {
    blocking(move || {
        let dir = app.open(Access::ReadOnly)?;
        let reading = dir.read()?;
        let verdict = dir.verdict(&reading.ledger, clock::now());
        let mut json = view::status_json(&reading.ledger, reading.revision, &verdict);
        json["dir"] = dir.display().into();
        json["driver"] = serde_json::to_value(loopx_core::dispatch::summary(
            &dir.driver()?.1,
            loopx_app::platform::alive,
        ))?;
        Ok(ok(json))
    })
    .await
}

pub async fn goal(State(app): State<Arc<App>>) -> Result<Response, Failure> {
    blocking(move || {
        let dir = app.open(Access::ReadOnly)?;
        let inspection = acceptance::inspect(&dir, goal::DEFAULT_GOAL_ID, &Actor::Owner)?;
        Ok(ok(serde_json::to_value(inspection)?))
    })
    .await
}

pub async fn should_run(State(app): State<Arc<App>>) -> Result<Response, Failure> {
    blocking(move || {
        let dir = app.open(Access::ReadOnly)?;
        let decision = continuation::should_run(&dir, goal::DEFAULT_GOAL_ID, &Actor::Owner)?;
        Ok(ok(serde_json::to_value(decision)?))
    })
    .await
}

#[derive(Deserialize)]
pub struct Limit {
    limit: Option<usize>,
}

pub async fn iterations(
    State(app): State<Arc<App>>,
    Query(limit): Query<Limit>,
) -> Result<Response, Failure> {
    let limit = limit.limit.unwrap_or(20).clamp(1, 500);
    blocking(move || {
        let dir = app.open(Access::ReadOnly)?;
        let records: Vec<_> = dir.recent_records(limit)?.into_iter().rev().collect();
        Ok(ok(json!({"status": "ok", "iterations": records})))
    })
    .await
}

pub async fn iteration(
    State(app): State<Arc<App>>,
    Path(n): Path<String>,
) -> Result<Response, Failure> {
    let not_found = |n: &str| {
        Failure(
            StatusCode::NOT_FOUND,
            format!("no iteration {n:?} in this ledger (iterations are numbered from 1)"),
            Value::Null,
        )
    };
    let Some(n) = super::iteration_number(&n) else {
        return Err(not_found(&n));
    };
    blocking(move || {
        let dir = app.open(Access::ReadOnly)?;
        Ok(match dir.iteration_detail(n)? {
            Some(detail) => ok(serde_json::to_value(detail)?),
            None => not_found(&n.to_string()).into_response(),
        })
    })
    .await
}

fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, Failure> {
    serde_json::from_slice(body).map_err(|e| bad(format!("the request body is not valid: {e}")))
}

fn operation(id: &str) -> Result<OperationId, Failure> {
    OperationId::parse(id).map_err(|e| bad(e.to_string()))
}

/// A write's answer: its receipt view, with `status`.
fn written(view: impl serde::Serialize) -> anyhow::Result<Response> {
    let mut json = serde_json::to_value(view)?;
    json["status"] = "ok".into();
    Ok(ok(json))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequirementForm {
    requirement_id: String,
    description: String,
    source_ref: String,
    #[serde(default)]
    source_summary: String,
    operation_id: String,
    /// The goal's provider revision when the form was read.
    base_revision: u64,
}

pub async fn add_requirement(
    State(app): State<Arc<App>>,
    Path(outcome_id): Path<String>,
    body: Bytes,
) -> Result<Response, Failure> {
    let form: RequirementForm = parse(&body)?;
    let id = operation(&form.operation_id)?;
    let input = NewRequirement {
        outcome_id,
        requirement_id: form.requirement_id,
        description: form.description,
        source_ref: form.source_ref,
        source_summary: form.source_summary,
        base_revision: form.base_revision,
    };
    blocking(move || {
        let dir = app.open(Access::ReadWrite)?;
        written(acceptance::add_requirement(&dir, input, &id)?)
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevisionForm {
    /// Apply this pending proposal...
    #[serde(default)]
    proposal_digest: Option<String>,
    /// ...or this revision entered by the owner.
    #[serde(default)]
    document: Option<ObjectiveDocument>,
    expected_provider_revision: u64,
    operation_id: String,
}

pub async fn revise_objective(
    State(app): State<Arc<App>>,
    body: Bytes,
) -> Result<Response, Failure> {
    let form: RevisionForm = parse(&body)?;
    let id = operation(&form.operation_id)?;
    let source = match (form.document, form.proposal_digest) {
        (Some(document), None) => RevisionSource::Document(document),
        (None, Some(digest)) => {
            RevisionSource::Proposal(Digest::parse(&digest).map_err(|e| bad(e.to_string()))?)
        }
        _ => return Err(bad("send exactly one of proposal_digest and document")),
    };
    let expected = form.expected_provider_revision;
    blocking(move || {
        let dir = app.open(Access::ReadWrite)?;
        written(acceptance::apply_revision(&dir, source, expected, &id)?)
    })
    .await
}
