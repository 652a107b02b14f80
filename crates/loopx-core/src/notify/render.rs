//! How a notification event reads: the blocks each profile shows, in its
//! order, and the four renderings of them (Markdown, plain text,
//! Telegram-safe HTML, compact). Pure text from the event alone: a
//! re-render of a stored event reads the same.
//!
//! Not here: redaction (the caller renders a redacted event) or delivery.

use super::event::{Event, IterationStatus, Profile, ReviewStatus};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Markdown,
    Plain,
    /// HTML with Telegram's small tag set, escaped and bounded.
    TelegramHtml,
    /// A few short lines for narrow channels.
    Compact,
}

/// Telegram refuses messages longer than this many characters.
pub const TELEGRAM_LIMIT: usize = 4096;
/// Mandatory blocks are cut to this many characters each, so that all of
/// them always fit in a Telegram message.
const MANDATORY_BLOCK_CHARS: usize = 600;
const COMPACT_BLOCK_CHARS: usize = 160;

/// One labelled part of the body.
struct Block {
    label: &'static str,
    lines: Vec<String>,
    /// Kept whatever the length limit: title, status, event time, plan.
    mandatory: bool,
}

fn block(label: &'static str, text: &str) -> Option<Block> {
    (!text.trim().is_empty()).then(|| Block {
        label,
        lines: vec![text.trim().to_owned()],
        mandatory: false,
    })
}

fn list(label: &'static str, items: &[String]) -> Option<Block> {
    (!items.is_empty()).then(|| Block {
        label,
        lines: items.to_vec(),
        mandatory: false,
    })
}

fn mandatory(block: Option<Block>) -> Option<Block> {
    block.map(|b| Block {
        mandatory: true,
        ..b
    })
}

fn status_text(event: &Event) -> String {
    let mut parts = vec![format!("iteration {}", event.status.iteration.as_str())];
    if event.status.review != ReviewStatus::NotRequired {
        parts.push(format!("review {}", event.status.review.as_str()));
    }
    if !event.status.loop_status.is_empty() {
        parts.push(format!("loop {}", event.status.loop_status));
    }
    parts.join(" · ")
}

fn progress_text(event: &Event) -> String {
    let p = &event.progress;
    let mut text = match p.iterations_remaining {
        Some(left) => format!("{} iterations used, {left} remaining", p.iterations_used),
        None => format!("{} iterations used", p.iterations_used),
    };
    if p.tokens_used > 0 || p.usd_used > 0.0 {
        let _ = write!(text, "; {} tokens, ${:.2}", p.tokens_used, p.usd_used);
    }
    if !p.goal.is_empty() {
        let _ = write!(text, "; {}", p.goal);
    }
    text
}

fn finished_text(event: &Event) -> String {
    let Some(finished) = event.timing.finished_at else {
        return String::new();
    };
    match event.timing.started_at {
        Some(started) if started <= finished => {
            let seconds = finished.as_second() - started.as_second();
            format!("{finished} (took {}m {:02}s)", seconds / 60, seconds % 60)
        }
        _ => finished.to_string(),
    }
}

fn group(agents: &super::event::AgentGroup) -> String {
    match (agents.reported, agents.agents.is_empty()) {
        (false, _) => String::new(),
        (true, true) => "none".into(),
        (true, false) => agents.agents.join(", "),
    }
}

fn compute_text(event: &Event) -> String {
    if !event.compute.reported {
        return String::new();
    }
    if event.compute.runs.is_empty() {
        return "none used".into();
    }
    event
        .compute
        .runs
        .iter()
        .map(|run| {
            let status = run.status.as_str();
            match &run.job_ref {
                Some(job) => format!("{} {status} ({job})", run.service),
                None => format!("{} {status}", run.service),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The blocks of `event` under its own profile, in order, empty ones left out.
fn blocks(event: &Event) -> Vec<Block> {
    let waiting = matches!(
        event.status.iteration,
        IterationStatus::Waiting | IterationStatus::Running | IterationStatus::Paused
    );
    let status = mandatory(block("Status", &status_text(event)));
    let time = mandatory(block(
        "Event time",
        &event.occurred_at.map(|t| t.to_string()).unwrap_or_default(),
    ));
    let progress = block("Progress", &progress_text(event));
    let started = block(
        "Started",
        &event
            .timing
            .started_at
            .map(|t| t.to_string())
            .unwrap_or_default(),
    );
    let finished = block("Finished", &finished_text(event));
    let errors = list("Runtime errors", &event.issues.runtime_errors);
    let failures = list("Review failures", &event.issues.review_failures);
    let goal = block("Goal", &event.goal);
    let completed = block("Completed", &event.completed);
    let results = list("Results", &event.results);
    let current = block("Current", &event.current);
    // A wait has no decision yet: "pending" would only be noise.
    let decision = (!waiting)
        .then(|| block("Decision", &event.decision))
        .flatten();
    let reason = (!waiting)
        .then(|| block("Decision reason", &event.decision_reason))
        .flatten();
    let plan = mandatory(block("Plan", &event.plan));
    let chosen: Vec<Option<Block>> = match event.presentation.body_profile {
        Profile::OperatorFull => vec![
            status,
            time,
            progress,
            started,
            finished,
            block("Executor", &event.agents.executor),
            block("Driver agent", &group(&event.agents.driver)),
            block("Panel agents", &group(&event.agents.panel)),
            block("Other agents", &group(&event.agents.other)),
            block("Compute", &compute_text(event)),
            errors,
            failures,
            goal,
            completed,
            results,
            current,
            decision,
            reason,
            plan,
        ],
        Profile::OperatorCompact => vec![
            status, time, completed, current, plan, progress, errors, failures,
        ],
        Profile::Legacy => vec![goal, completed, current, plan, status, time, progress],
    };
    chosen.into_iter().flatten().collect()
}

fn trailer(event: &Event) -> Option<String> {
    (event.presentation.body_profile == Profile::OperatorFull).then(|| {
        format!(
            "{} · {} · {} {}",
            event.event, event.event_id, event.schema, event.schema_version
        )
    })
}

/// `event` as text in `format`, laid out by the profile stored on it.
pub fn render(event: &Event, format: Format) -> String {
    match format {
        Format::Markdown => markdown(event),
        Format::Plain => plain(event),
        Format::TelegramHtml => telegram_html(event),
        Format::Compact => compact(event),
    }
}

fn markdown(event: &Event) -> String {
    let mut out = format!("**{}**\n", event.title);
    for b in blocks(event) {
        if b.lines.len() == 1 {
            let _ = writeln!(out, "**{}:** {}", b.label, b.lines[0]);
        } else {
            let _ = writeln!(out, "**{}:**", b.label);
            for line in &b.lines {
                let _ = writeln!(out, "- {line}");
            }
        }
    }
    if let Some(t) = trailer(event) {
        let _ = writeln!(out, "\n_{t}_");
    }
    out
}

fn plain(event: &Event) -> String {
    let mut out = format!("{}\n", event.title);
    for b in blocks(event) {
        if b.lines.len() == 1 {
            let _ = writeln!(out, "{}: {}", b.label, b.lines[0]);
        } else {
            let _ = writeln!(out, "{}:", b.label);
            for line in &b.lines {
                let _ = writeln!(out, "  - {line}");
            }
        }
    }
    if let Some(t) = trailer(event) {
        let _ = writeln!(out, "\n{t}");
    }
    out
}

fn compact(event: &Event) -> String {
    let shown = ["Status", "Event time", "Completed", "Current", "Plan"];
    let mut out = format!(
        "{}\n",
        super::event::shorten(&event.title, COMPACT_BLOCK_CHARS)
    );
    for b in blocks(event)
        .into_iter()
        .filter(|b| shown.contains(&b.label))
    {
        let text = super::event::shorten(&b.lines.join("; "), COMPACT_BLOCK_CHARS);
        let _ = writeln!(out, "{}: {text}", b.label);
    }
    out
}

/// Escapes the three characters Telegram's HTML parser gives meaning to.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

fn html_block(b: &Block, max_chars: usize) -> String {
    let text = super::event::shorten(&b.lines.join("\n• "), max_chars);
    let body = if b.lines.len() > 1 {
        format!("\n• {}", escape_html(&text))
    } else {
        escape_html(&text)
    };
    format!("<b>{}:</b> {body}\n", b.label)
}

/// Mandatory blocks first in the budget (each cut to a fixed size so all
/// fit), then the others in order while they fit; the output keeps the
/// profile's order and never exceeds [`TELEGRAM_LIMIT`] characters.
fn telegram_html(event: &Event) -> String {
    let title = format!(
        "<b>{}</b>\n",
        escape_html(&super::event::shorten(&event.title, 200))
    );
    let all = blocks(event);
    let mut rendered: Vec<Option<String>> = vec![None; all.len()];
    let mut used = title.chars().count();
    for (i, b) in all.iter().enumerate().filter(|(_, b)| b.mandatory) {
        let text = html_block(b, MANDATORY_BLOCK_CHARS);
        used += text.chars().count();
        rendered[i] = Some(text);
    }
    const CUT_NOTE: &str = "…(cut)\n";
    let reserve = CUT_NOTE.chars().count();
    let mut cut = false;
    for (i, b) in all.iter().enumerate().filter(|(_, b)| !b.mandatory) {
        let text = html_block(b, TELEGRAM_LIMIT);
        let size = text.chars().count();
        if used + size + reserve <= TELEGRAM_LIMIT {
            used += size;
            rendered[i] = Some(text);
        } else {
            // Escaping can lengthen text: shrink on the raw side until
            // the escaped block fits what is left.
            let room = TELEGRAM_LIMIT.saturating_sub(used + reserve);
            let mut max = room;
            while max > 40 {
                let text = html_block(b, max);
                if text.chars().count() <= room {
                    used += text.chars().count();
                    rendered[i] = Some(text);
                    break;
                }
                max = max * 3 / 4;
            }
            cut = true;
        }
    }
    let mut out = title;
    out.extend(rendered.into_iter().flatten());
    if cut {
        out.push_str(CUT_NOTE);
    } else if let Some(t) = trailer(event) {
        let line = format!("<i>{}</i>\n", escape_html(&t));
        if out.chars().count() + line.chars().count() <= TELEGRAM_LIMIT {
            out.push_str(&line);
        }
    }
    out
}
