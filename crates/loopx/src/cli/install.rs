//! install, uninstall and doctor: parse, call `loopx_app::install` /
//! `loopx_app::doctor`, render.

use super::Reply;
use anyhow::Result;
use clap::Args;
use loopx_app::doctor::{self, DoctorView};
use loopx_app::install::{
    self, wrapper, Action, InstallView, Places, Request, Scope, Source, Target,
};
use std::path::PathBuf;

/// Make loopx native to an agent runtime: its skill file, the `loopx mcp`
/// server in its config, and (Claude Code) the Stop hook calling `loopx
/// hook-check`.
///
/// Project scope (the current directory, or --project) unless --user.
/// Merges into existing settings, changing only loopx's entry; a second
/// run changes nothing. Every entry records the loopx version and a
/// digest, which `loopx doctor` checks. `loopx uninstall` with the same
/// flags gives back the files as they were.
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The agent runtime.
    #[arg(long, value_parser = ["claude", "codex", "opencode"])]
    pub target: String,
    /// The project to install into (default: the current directory).
    #[arg(long, conflicts_with = "user")]
    pub project: Option<PathBuf>,
    /// Install for the user (home directory files) instead of a project.
    #[arg(long)]
    pub user: bool,
    /// The loop directory the MCP server opens (default: `.loopx` in the
    /// project the runtime runs in).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print the unified diff of every change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also write `run_force_loop.sh` in the project (uninstall: remove it
    /// if loopx wrote it): a POSIX sh script mapping the reference
    /// force-loop kit's verbs to loopx (bootstrap, start, drain, stop;
    /// status is `service-status`; also replace, smoke, logs), passing the
    /// other arguments through. A file loopx did not write is refused.
    #[arg(long, conflicts_with = "user")]
    pub force_loop_wrapper: bool,
    /// With --force-loop-wrapper: replace a `run_force_loop.sh` loopx did
    /// not write.
    #[arg(long, requires = "force_loop_wrapper")]
    pub force: bool,
}

/// Check what is installed and what the loop stands on; write nothing.
///
/// For each runtime (project and user scope): whether the installed skill,
/// MCP entry and hook are complete, of this loopx version and unedited, and
/// whether the hook's loopx exists. Then the store (opens, schema current),
/// the workspace against the one the driver registered, the providers on
/// PATH (a `providers` line, then one line each with its `--version` and
/// whether loopx was qualified against that version: `warn` when not),
/// and free disk. The report goes to stdout whatever the outcome; exits 1
/// when anything needs a fix, naming the command that fixes it.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub dir: super::ledger::DirArgs,
}

fn request_parts(args: &InstallArgs) -> Result<(Target, Scope, Places, Source)> {
    let target = Target::parse(&args.target)?;
    let scope = if args.user {
        Scope::User
    } else {
        Scope::Project
    };
    let project = match &args.project {
        Some(project) => project.clone(),
        None => std::env::current_dir()?,
    };
    Ok((
        target,
        scope,
        Places::from_env(&project)?,
        Source::this_binary(args.dir.as_deref())?,
    ))
}

pub fn install(args: &InstallArgs) -> Result<Reply> {
    run(args, install::install, |places, source| {
        let script = wrapper::script(
            &source.loopx,
            &source.version,
            args.dir.is_some().then_some(source.dir.as_str()),
        );
        wrapper::install(&places.project, &script, args.force, args.dry_run)
    })
}

pub fn uninstall(args: &InstallArgs) -> Result<Reply> {
    run(args, install::uninstall, |places, _| {
        wrapper::uninstall(&places.project, args.dry_run)
    })
}

/// The use case, after the wrapper when asked for (first, so a refused
/// wrapper leaves everything as it was).
fn run(
    args: &InstallArgs,
    use_case: fn(&Request) -> Result<InstallView>,
    wrapper: impl FnOnce(&Places, &Source) -> Result<wrapper::WrapperChange>,
) -> Result<Reply> {
    let (target, scope, places, source) = request_parts(args)?;
    let wrapped = match args.force_loop_wrapper {
        true => Some(wrapper(&places, &source)?),
        false => None,
    };
    let view = use_case(&Request {
        target,
        scope,
        places: &places,
        source: &source,
        dry_run: args.dry_run,
    })?;
    let mut reply = Reply::view(&view, render(&view))?;
    if let Some(change) = wrapped {
        reply.text.push_str(&format!(
            "force-loop wrapper {}: {}\n",
            change.action, change.path
        ));
        reply.json["force_loop_wrapper"] = serde_json::to_value(&change)?;
    }
    Ok(reply)
}

fn render(view: &InstallView) -> String {
    let mut text = String::new();
    for file in &view.files {
        if let Some(diff) = &file.diff {
            text.push_str(diff);
        }
    }
    for file in &view.files {
        let verb = match (file.action, view.dry_run) {
            (Action::Created, false) => "created",
            (Action::Created, true) => "would create",
            (Action::Updated, false) => "updated",
            (Action::Updated, true) => "would update",
            (Action::Unchanged, _) => "unchanged",
            (Action::Restored, false) => "restored",
            (Action::Restored, true) => "would restore",
            (Action::Unmerged, false) => "removed loopx's entry from",
            (Action::Unmerged, true) => "would remove loopx's entry from",
            (Action::Removed, false) => "removed",
            (Action::Removed, true) => "would remove",
            (Action::Absent, _) => "nothing of loopx in",
        };
        text.push_str(&format!("{} {verb} {}\n", file.component, file.path));
    }
    if !view.changed {
        text.push_str("nothing to change\n");
    }
    for note in &view.notes {
        text.push_str(&format!("note: {note}\n"));
    }
    text
}

pub fn doctor(args: &DoctorArgs, store: Option<&str>) -> Result<Reply> {
    let project = std::env::current_dir()?;
    let places = Places::from_env(&project)?;
    let source = Source::this_binary(None)?;
    let view = doctor::doctor(args.dir.at(store), &places, &source);
    let mut reply = Reply::view(&view, render_doctor(&view))?;
    reply.code = u8::from(!view.ok);
    reply.report = true;
    Ok(reply)
}

fn render_doctor(view: &DoctorView) -> String {
    let mut text = String::new();
    for check in &view.checks {
        let mark = match (check.ok, &check.warning) {
            (false, _) => "FAIL",
            (true, Some(_)) => "warn",
            (true, None) => "ok  ",
        };
        text.push_str(&format!("{mark} {}: {}\n", check.name, check.detail));
        if let Some(warning) = &check.warning {
            text.push_str(&format!("     {warning}\n"));
        }
        if let Some(fix) = &check.fix {
            text.push_str(&format!("     fix: {fix}\n"));
        }
    }
    text
}
