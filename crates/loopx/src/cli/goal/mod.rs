//! The goal commands: goal-acceptance, todo, quota should-run,
//! refresh-state and task-body. Each parses its flags ([`args`]), calls its
//! use case in `loopx_app::goal` / `loopx_app::continuation`, and renders
//! the view: `--json` is the view with `status` and `action`, the text is
//! written here.

mod args;

pub use args::*;

use super::Reply;
use anyhow::Result;
use loopx_app::continuation;
use loopx_app::goal::acceptance::{self, Adoption, GoalInspection};
use loopx_app::goal::checks;
use loopx_app::goal::refresh::{self, Refresh, RefreshView};
use loopx_app::goal::todo::{self as todos, Page, TodoList};
use loopx_app::goal::{read_document, GoalReceiptView, GoalTarget, GoalWrite};
use loopx_app::loop_dir::LoopDir;
use loopx_core::goal::Actor;
use loopx_core::words;
use loopx_store::sqlite::Access;
use serde::Serialize;

/// The `--json` object of a command: its view, with `status` and `action`.
fn reply(action: &str, view: &impl Serialize, text: String) -> Result<Reply> {
    let mut json = serde_json::to_value(view)?;
    json["status"] = "ok".into();
    json["action"] = action.into();
    Ok(Reply::ok(json, text))
}

fn receipt_reply(action: &str, receipt: &GoalReceiptView) -> Result<Reply> {
    reply(action, receipt, receipt.text())
}

/// A write that may have been a preview; `to_write` says how to write it.
fn write_reply(action: &str, write: &GoalWrite, to_write: &str) -> Result<Reply> {
    match write {
        GoalWrite::Committed(receipt) => receipt_reply(action, receipt),
        GoalWrite::Previewed(preview) => {
            let text = format!(
                "preview (nothing written): {}; {to_write} to write",
                preview.receipt.effects.join(", ")
            );
            reply("preview", preview, text)
        }
    }
}

pub fn acceptance(command: &AcceptanceCommand, store: Option<&str>) -> Result<Reply> {
    match command {
        AcceptanceCommand::Inspect(args) => {
            let dir = args.open(Access::ReadOnly, store)?;
            let inspection = acceptance::inspect(&dir, &args.goal_id, &args.actor()?)?;
            let text = inspect_text(&inspection);
            reply("goal-acceptance-inspect", &inspection, text)
        }
        AcceptanceCommand::PrepareObjective(args) => {
            let document = read_document(&args.document)?;
            let how = args.write.submit(!args.execute)?;
            let dir = args.goal.open(how.access(), store)?;
            let target = args.goal.target(&args.write)?;
            let written = acceptance::prepare_objective(&dir, &target, document, &how)?;
            write_reply("prepare-objective", &written, "pass --execute")
        }
        AcceptanceCommand::ReviseObjective(ReviseArgs {
            objective: args,
            expected_provider_revision,
        }) => {
            let document = read_document(&args.document)?;
            let how = args.write.submit(!args.execute)?;
            let dir = args.goal.open(how.access(), store)?;
            let target = args.goal.target(&args.write)?;
            let written = acceptance::revise_objective(
                &dir,
                &target,
                document,
                *expected_provider_revision,
                &how,
            )?;
            write_reply("revise-objective", &written, "pass --execute")
        }
        AcceptanceCommand::AdoptObjective(args) => {
            let adoption = Adoption {
                revision: args.revision,
                digest: args.digest.clone(),
                work_digest: args.work_digest.clone(),
                review_summary: args.review_summary.clone(),
            };
            let (dir, target, op) = args.goal.writer(&args.write, store)?;
            let receipt = acceptance::adopt_objective(&dir, &target, adoption, &op)?;
            receipt_reply("adopt-objective", &receipt)
        }
        AcceptanceCommand::RefineOutcome(args) => {
            let update = read_document(&args.document)?;
            let how = args.write.submit(args.dry_run)?;
            let dir = args.goal.open(how.access(), store)?;
            let target = args.goal.target(&args.write)?;
            let written = acceptance::refine_outcome(&dir, &target, update, &how)?;
            write_reply("refine-outcome", &written, "run it without --dry-run")
        }
        AcceptanceCommand::AckGap(args) => {
            let (dir, target, op) = args.goal.writer(&args.write, store)?;
            let receipt = acceptance::ack_gap(
                &dir,
                &target,
                args.outcome_id.clone(),
                args.checkpoint.clone(),
                &op,
            )?;
            receipt_reply("ack-gap", &receipt)
        }
        AcceptanceCommand::RegisterAgent(args) => {
            let dir = LoopDir::open(args.dir.at(store), Access::ReadWrite)?;
            let target = GoalTarget {
                goal_id: args.goal_id.clone(),
                actor: Actor::Owner,
                expected_instance: args.write.goal_instance.clone(),
            };
            let receipt = acceptance::register_agent(
                &dir,
                &target,
                args.agent_id.clone(),
                &args.write.id()?,
            )?;
            receipt_reply("register-agent", &receipt)
        }
        AcceptanceCommand::Recreate(args) => {
            let (dir, target, op) = args.goal.writer(&args.write, store)?;
            let receipt = acceptance::recreate(
                &dir,
                &target,
                args.objective.clone(),
                args.reason.clone(),
                &op,
            )?;
            receipt_reply("recreate", &receipt)
        }
        AcceptanceCommand::PrepareChecks(args) => {
            let config = read_document(&args.file)?;
            let dir = args.goal.open(Access::ReadOnly, store)?;
            let proposal = checks::prepare(&dir, &args.goal.goal_id, &config)?;
            let text = proposal_text(&proposal, &args.file);
            reply("prepare-checks", &proposal, text)
        }
        AcceptanceCommand::ApplyChecks(args) => {
            let config = read_document(&args.file)?;
            let (dir, target, op) = args.goal.writer(&args.write, store)?;
            let receipt = checks::apply(&dir, &target, config, args.basis.clone(), &op)?;
            receipt_reply("apply-checks", &receipt)
        }
    }
}

/// A proposal as the owner reviews it: the outcome, then each argv, each
/// word quoted so what runs is exactly what is read.
fn proposal_text(proposal: &loopx_core::goal::checks::Proposal, file: &std::path::Path) -> String {
    let mut out = format!(
        "outcome {} ({}): {}\n",
        proposal.outcome_id, proposal.responsible_agent, proposal.objective
    );
    for r in &proposal.requirements {
        let mark = if r.checked { "checked" } else { "not checked" };
        out.push_str(&format!(
            "  requirement {} [{mark}]: {}\n",
            r.id, r.description
        ));
    }
    if !proposal.linked_todos.is_empty() {
        out.push_str(&format!(
            "  linked work: {}\n",
            proposal.linked_todos.join(", ")
        ));
    }
    for c in &proposal.criteria {
        let argv: Vec<String> = c.validation_argv.iter().map(|w| format!("{w:?}")).collect();
        out.push_str(&format!(
            "  check {}: [{}] in {} within {}s (no shell)\n",
            c.id,
            argv.join(", "),
            c.cwd.as_deref().unwrap_or("the project root"),
            c.timeout_seconds
        ));
    }
    out.push_str(&format!(
        "basis {}\napply as the owner: loopx goal-acceptance apply-checks --file {} --basis {}",
        proposal.basis,
        file.display(),
        proposal.basis
    ));
    out
}

fn inspect_text(inspection: &GoalInspection) -> String {
    let readback = inspection.readback();
    let mut out = format!(
        "goal {} (lifetime {}, provider revision {})\n  original objective: {}\n",
        readback.instance_id,
        readback.lifetime,
        readback.provider_revision,
        readback.original_objective
    );
    let objective = &readback.objective;
    if objective.current_revision > 0 {
        out.push_str(&format!(
            "  current objective (revision {}): {}\n",
            objective.current_revision, objective.current_objective
        ));
    }
    out.push_str(&format!(
        "  objective digest: {}\n",
        objective.current_digest
    ));
    for line in &objective.adoption {
        out.push_str(&format!("  agent {}: {}\n", line.agent_id, line.state));
    }
    if let Some(work) = &objective.objective_work_digest {
        out.push_str(&format!("  objective work digest: {work}\n"));
    }
    for proposal in objective.pending_proposals {
        out.push_str(&format!(
            "  proposal by {} (would be revision {}): {}\n",
            proposal.proposed_by, proposal.revision, proposal.objective
        ));
    }
    for outcome in &readback.outcomes {
        out.push_str(&format!(
            "  outcome {} [{}] ({}): {}\n",
            outcome.id, outcome.status, outcome.responsible_agent, outcome.original_objective
        ));
        for requirement in &outcome.requirements {
            out.push_str(&format!(
                "    {} [{}] {}\n",
                requirement.id,
                requirement.state.as_str(),
                requirement.description
            ));
        }
        for work in &outcome.linked_work {
            out.push_str(&format!(
                "    work {} {}\n",
                work.todo_id,
                work.status.map_or("missing", |s| s.as_str())
            ));
        }
    }
    for gap in &readback.gaps {
        out.push_str(&format!(
            "  gap {} {} checkpoint {}\n",
            gap.outcome_id,
            if gap.acknowledged {
                "(acknowledged)"
            } else {
                "(open)"
            },
            gap.checkpoint
        ));
    }
    out
}

fn todo_list_text(list: &TodoList) -> String {
    let now = list.read_at;
    let mut text = String::new();
    for todo in &list.todos {
        let holder = match (todo.holder(now), &todo.lease) {
            (Some(holder), Some(lease)) => format!(
                " leased to {holder} until {} (in {})",
                lease.expires_at,
                words::duration(lease.expires_at.duration_since(now).as_secs().max(0) as u64)
            ),
            _ => String::new(),
        };
        text.push_str(&format!(
            "{:<6} {:<9} {}{holder}\n",
            todo.id,
            todo.status.as_str(),
            todo.title
        ));
    }
    if list.total == 0 {
        text.push_str("no todos\n");
    }
    if let Some(next) = &list.next_cursor {
        text.push_str(&format!(
            "todos {}-{} of {}; the next page: loopx todo list --cursor {next}\n",
            list.start + 1,
            list.start + list.todos.len(),
            list.total
        ));
    }
    text
}

pub fn todo(command: &TodoCommand, store: Option<&str>) -> Result<Reply> {
    let receipt = match command {
        TodoCommand::List(TodoListArgs {
            goal,
            limit,
            cursor,
        }) => {
            let page = Page {
                cursor: cursor.clone(),
                limit: *limit,
            };
            let list = todos::list(&goal.open(Access::ReadOnly, store)?, &goal.goal_id, &page)?;
            let text = todo_list_text(&list);
            return reply("todo-list", &list, text);
        }
        TodoCommand::Add(TodoAddArgs {
            goal,
            from_file: Some(file),
            write,
            ..
        }) => {
            // Read (and bound) the file before the loop is opened for writing.
            let batch = todos::read_batch(file)?;
            let (dir, target, op) = goal.writer(write, store)?;
            todos::add_batch(&dir, &target, batch, &op)?
        }
        TodoCommand::Add(args) => {
            let (dir, target, op) = args.goal.writer(&args.write, store)?;
            let title = args.title.clone().or_else(|| args.title_flag.clone());
            todos::add(
                &dir,
                &target,
                args.id.clone(),
                title.unwrap_or_default(),
                &op,
            )?
        }
        TodoCommand::Claim(TodoLeaseArgs { todo, ttl }) => {
            let (dir, target, op) = todo.goal.writer(&todo.write, store)?;
            todos::claim(&dir, &target, &todo.id, *ttl, &todo.note, &op)?
        }
        TodoCommand::Renew(TodoLeaseArgs { todo, ttl }) => {
            let (dir, target, op) = todo.goal.writer(&todo.write, store)?;
            todos::renew(&dir, &target, &todo.id, *ttl, &todo.note, &op)?
        }
        TodoCommand::Release(todo) => {
            let (dir, target, op) = todo.goal.writer(&todo.write, store)?;
            todos::release(&dir, &target, &todo.id, &todo.note, &op)?
        }
        TodoCommand::Complete(todo) => {
            let (dir, target, op) = todo.goal.writer(&todo.write, store)?;
            todos::complete(&dir, &target, &todo.id, &todo.note, &op)?
        }
        TodoCommand::Block(TodoBlockArgs { todo, reason }) => {
            let (dir, target, op) = todo.goal.writer(&todo.write, store)?;
            todos::block(&dir, &target, &todo.id, reason.clone(), &todo.note, &op)?
        }
        TodoCommand::Defer(TodoDeferArgs { todo, duration }) => {
            let (dir, target, op) = todo.goal.writer(&todo.write, store)?;
            todos::defer(&dir, &target, &todo.id, *duration, &todo.note, &op)?
        }
    };
    receipt_reply("todo", &receipt)
}

pub fn quota(command: &QuotaCommand, store: Option<&str>) -> Result<Reply> {
    let QuotaCommand::ShouldRun(ShouldRunArgs { goal, detail }) = command;
    let dir = goal.open(Access::ReadOnly, store)?;
    let answer = continuation::should_run_answer(&dir, &goal.goal_id, &goal.actor()?, *detail)?;
    let hint = &answer.decision.scheduler_hint;
    let text = format!(
        "{} ({}): {}",
        hint.action.as_str(),
        hint.reason_code,
        hint.reason
    );
    reply("quota-should-run", &answer, text)
}

pub fn task_body(args: &TaskBodyArgs, store: Option<&str>) -> Result<Reply> {
    let dir = args.goal.open(Access::ReadOnly, store)?;
    let body = continuation::task_body(&dir, &args.goal.goal_id, &args.goal.actor()?)?;
    let text = body.body.clone();
    reply("task-body", &body, text)
}

pub fn refresh_state(args: &RefreshArgs, store: Option<&str>) -> Result<Reply> {
    // Read (and bound) the document before the loop is opened for writing.
    let outcome_update = match &args.goal_outcome_update_json {
        Some(path) => Some(read_document(path)?),
        None => None,
    };
    let (dir, target, base) = args.goal.writer(&args.write, store)?;
    let refresh = Refresh {
        note: args.note.clone(),
        evidence_refs: args.evidence_refs.clone(),
        complete: args.complete.clone(),
        release: args.release.clone(),
        block: args.block.clone(),
        outcome_update,
    };
    let view = refresh::refresh_state(&dir, &target, refresh, &base)?;
    let text = refresh_text(&view);
    reply("refresh-state", &view, text)
}

fn refresh_text(view: &RefreshView) -> String {
    let writeback = view.writeback.text();
    match &view.outcome {
        Some(o) => format!(
            "outcome: {} (revision {})\nwriteback: {writeback}",
            o.effects.join(", "),
            o.revision
        ),
        None => writeback,
    }
}
