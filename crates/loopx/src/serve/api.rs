//! JSON endpoints. Reads return what the CLI's `--json` reads return;
//! writes go through the same owners and answer with receipts.

use super::{Loop, Server};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use loopx_app::goal::acceptance::{self, NewRequirement, RevisionSource};
use loopx_app::{continuation, iterations, ledger, AppError, ErrorClass};
use loopx_core::cost::By;
use loopx_core::digest::Digest;
use loopx_core::goal::objective::ObjectiveDocument;
use loopx_core::goal::{self, Actor};
use loopx_core::operation::OperationId;
use loopx_store::sqlite::Access;
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
    failure(AppError::refused(message))
}

/// The one mapping of an error to an HTTP answer: its class decides the
/// status, and the body is `{"status":"failed","error":...,"class":...}`
/// with the error's details merged in, as the CLI's `--json` prints it.
pub fn failure(error: impl Into<AppError>) -> Failure {
    let error = error.into();
    let mut extra = json!({"class": error.class});
    if let (Some(extra), Some(Value::Object(details))) = (extra.as_object_mut(), error.details) {
        extra.extend(details);
    }
    Failure(status_of(error.class), error.message, extra)
}

fn status_of(class: ErrorClass) -> StatusCode {
    match class {
        ErrorClass::Refused => StatusCode::BAD_REQUEST,
        ErrorClass::Conflict | ErrorClass::Stale => StatusCode::CONFLICT,
        ErrorClass::NotFound => StatusCode::NOT_FOUND,
        ErrorClass::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorClass::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Run blocking store work off the async threads.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> Result<T, Failure> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(failure),
        Err(error) => Err(failure(AppError::new(
            ErrorClass::Internal,
            format!("the request's worker failed: {error}"),
        ))),
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

pub async fn status(Loop(app): Loop) -> Result<Response, Failure> {
    blocking(move || {
        let view = ledger::status(&*app.open(Access::ReadOnly)?)?;
        Ok(ok(serde_json::to_value(view)?))
    })
    .await
}

pub async fn health(Loop(app): Loop) -> Result<Response, Failure> {
    blocking(move || {
        let view = loopx_app::health::health(&*app.open(Access::ReadOnly)?)?;
        Ok(ok(serde_json::to_value(view)?))
    })
    .await
}

pub async fn goal(Loop(app): Loop) -> Result<Response, Failure> {
    blocking(move || {
        let dir = app.open(Access::ReadOnly)?;
        let inspection = acceptance::inspect(&dir, goal::DEFAULT_GOAL_ID, &Actor::Owner)?;
        Ok(ok(serde_json::to_value(inspection)?))
    })
    .await
}

pub async fn should_run(Loop(app): Loop) -> Result<Response, Failure> {
    blocking(move || {
        let dir = app.open(Access::ReadOnly)?;
        let decision = continuation::should_run(&dir, goal::DEFAULT_GOAL_ID, &Actor::Owner)?;
        Ok(ok(serde_json::to_value(decision)?))
    })
    .await
}

/// A page of the driver's turns with their start, end and duration.
pub async fn turns(Loop(app): Loop, Query(page): Query<Page>) -> Result<Response, Failure> {
    blocking(move || {
        let view = loopx_app::turns::page(
            &*app.open(Access::ReadOnly)?,
            page.before,
            page.limit.unwrap_or(100),
        )?;
        Ok(ok(serde_json::to_value(view)?))
    })
    .await
}

/// `?cursor=C&limit=N`: a page of the goal's todos, as `loopx todo list
/// --json` prints it.
pub async fn todos(Loop(app): Loop, Query(page): Query<TodoPage>) -> Result<Response, Failure> {
    blocking(move || {
        let dir = app.open(Access::ReadOnly)?;
        let page = loopx_app::goal::todo::Page {
            cursor: page.cursor,
            limit: page.limit,
        };
        let view = loopx_app::goal::todo::list(&dir, goal::DEFAULT_GOAL_ID, &page)?;
        Ok(ok(serde_json::to_value(view)?))
    })
    .await
}

#[derive(Deserialize)]
pub struct TodoPage {
    cursor: Option<String>,
    limit: Option<usize>,
}

/// `?limit=N&before=CURSOR`: a page of a list, the newest `limit` before
/// the cursor the page after it gave as `older`.
#[derive(Deserialize)]
pub struct Page {
    limit: Option<usize>,
    before: Option<u64>,
}

/// `--all`: every registered loop, one row each.
pub async fn all_loops(
    State(server): State<Arc<Server>>,
    Query(page): Query<super::LoopsPage>,
) -> Result<Response, Failure> {
    blocking(move || Ok(ok(serde_json::to_value(server.all_loops(&page)?)?))).await
}

#[derive(Deserialize)]
pub struct Limit {
    limit: Option<usize>,
}

pub async fn iterations(Loop(app): Loop, Query(limit): Query<Limit>) -> Result<Response, Failure> {
    let limit = limit.limit.unwrap_or(20).clamp(1, 500);
    blocking(move || {
        let view = iterations::recent(&*app.open(Access::ReadOnly)?, limit)?;
        Ok(ok(serde_json::to_value(view)?))
    })
    .await
}

/// A path naming an iteration (the route may name the loop too).
#[derive(Deserialize)]
pub struct IterationPath {
    pub n: String,
}

pub async fn iteration(
    Loop(app): Loop,
    Path(IterationPath { n }): Path<IterationPath>,
) -> Result<Response, Failure> {
    let Some(n) = super::iteration_number(&n) else {
        return Err(failure(AppError::not_found(format!(
            "no iteration {n:?} in this ledger (iterations are numbered from 1)"
        ))));
    };
    blocking(move || {
        let view = iterations::detail(&*app.open(Access::ReadOnly)?, n)?;
        Ok(ok(serde_json::to_value(view)?))
    })
    .await
}

#[derive(Deserialize)]
pub struct CostQuery {
    by: Option<String>,
    limit: Option<usize>,
    before: Option<u64>,
}

pub async fn cost(Loop(app): Loop, Query(query): Query<CostQuery>) -> Result<Response, Failure> {
    let by = match query.by.as_deref() {
        None => By::default(),
        Some(by) => by
            .parse()
            .map_err(|e: String| failure(AppError::refused(e)))?,
    };
    blocking(move || {
        let view = loopx_app::cost::cost(&*app.open(Access::ReadOnly)?, by)?
            .page(query.before, query.limit.unwrap_or(100));
        Ok(ok(serde_json::to_value(view)?))
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

/// A path naming an outcome (the route may name the loop too).
#[derive(Deserialize)]
pub struct OutcomePath {
    id: String,
}

pub async fn add_requirement(
    Loop(app): Loop,
    Path(OutcomePath { id: outcome_id }): Path<OutcomePath>,
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

pub async fn revise_objective(Loop(app): Loop, body: Bytes) -> Result<Response, Failure> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_class_has_one_status_and_the_body_names_it() {
        for (class, status) in [
            (ErrorClass::Refused, 400),
            (ErrorClass::Conflict, 409),
            (ErrorClass::Stale, 409),
            (ErrorClass::NotFound, 404),
            (ErrorClass::Unavailable, 503),
            (ErrorClass::Internal, 500),
        ] {
            let Failure(code, message, extra) = failure(AppError::new(class, "why"));
            assert_eq!((code.as_u16(), message.as_str()), (status, "why"));
            assert_eq!(extra["class"], class.as_str());
        }
    }
}
