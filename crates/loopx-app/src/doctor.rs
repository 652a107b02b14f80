//! `doctor`: read back what is installed and what the loop stands on, and
//! say what a person must fix, with the command that fixes it.
//!
//! Checks, each a [`Check`]: for every runtime and scope, the installed
//! skill, MCP entry and Stop hook against this binary (version, digest,
//! all three of one revision); that the Stop hook calls a loopx that
//! exists; that the store opens read-only with the current schema; the
//! workspace (repository root, HEAD, dirty or clean) against the root the
//! driver registered; which providers are on PATH, each binary's
//! `--version` and whether the provider table was qualified against it;
//! each model or thinking pin set, and whether it is usable;
//! free disk in the loop directory.
//!
//! Writes nothing: the store is opened read-only, config files are only
//! read. Not here: what an install writes (`crate::install`).

use crate::install::{self, Found, Places, Scope, Source, Target};
use crate::loop_dir::{LoopDir, Place};
use crate::{driver, launchers, platform};
use loopx_core::driver::provider::{self, Fit};
use loopx_store::sqlite::Access;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One finding. `fix` is the command to run when `ok` is false.
#[derive(Debug, Serialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
    /// Not a failure, but worth a look (a provider CLI of a version loopx
    /// was not qualified against).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct DoctorView {
    /// Every check passed.
    pub ok: bool,
    pub checks: Vec<Check>,
}

/// Below this, a loop is one long turn log away from a full disk.
const LOW_DISK: u64 = 256 * 1024 * 1024;

pub fn doctor(at: Place<'_>, places: &Places, source: &Source) -> DoctorView {
    let dir = at.dir;
    let mut checks = Vec::new();
    for target in Target::ALL {
        for scope in [Scope::Project, Scope::User] {
            installs(target, scope, places, source, &mut checks);
        }
    }
    store_and_workspace(at, places, &mut checks);
    let found: Vec<Check> = provider::PROVIDERS
        .iter()
        .filter_map(provider_check)
        .collect();
    let names: Vec<&str> = found
        .iter()
        .filter_map(|c| c.name.strip_prefix("provider."))
        .collect();
    checks.push(providers_summary(&names));
    checks.extend(found);
    checks.extend(pin_checks());
    let transport = crate::containment::readiness();
    checks.push(Check {
        name: "transport".into(),
        ok: transport.ok,
        detail: transport.detail,
        fix: transport.fix,
        warning: None,
    });
    checks.push(disk(dir));
    DoctorView {
        ok: checks.iter().all(|c| c.ok),
        checks,
    }
}

fn install_command(target: Target, scope: Scope) -> String {
    match scope {
        Scope::Project => format!("loopx install --target {}", target.name()),
        Scope::User => format!("loopx install --target {} --user", target.name()),
    }
}

fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Project => "project",
        Scope::User => "user",
    }
}

/// One check per runtime and scope: nothing installed is fine; anything
/// installed must be complete, of this binary's version, and unedited.
fn installs(
    target: Target,
    scope: Scope,
    places: &Places,
    source: &Source,
    checks: &mut Vec<Check>,
) {
    let name = format!("install.{}.{}", target.name(), scope_name(scope));
    let fix = install_command(target, scope);
    let mut problems = Vec::new();
    let mut present = Vec::new();
    let mut missing = Vec::new();
    let mut foreign = Vec::new();
    for component in install::components(target, scope, places, source) {
        let text = install::read_for_inspection(&component.path);
        let path = component.path.display();
        match component.edit.inspect(text.as_deref()) {
            Found::Absent => missing.push(component.name),
            // Only a problem beside a loopx install: then install refuses
            // to replace it, and the runtime gets someone else's entry.
            Found::Foreign => foreign.push(format!(
                "the {} at {path} was not written by loopx (it has no install record): move it away",
                component.name
            )),
            Found::Installed { record, intact } => {
                present.push(format!("{} {}", component.name, record.version));
                if record.version != source.version {
                    problems.push(format!(
                        "the {} at {path} was installed by loopx {}, this is loopx {} (mixed revisions)",
                        component.name, record.version, source.version
                    ));
                }
                if !intact {
                    problems.push(format!(
                        "the {} at {path} was edited since install (its content no longer has digest {})",
                        component.name, record.digest
                    ));
                }
                if let Some(command) = text.as_deref().and_then(|t| component.edit.hook_command(t))
                {
                    if let Some(problem) = missing_binary(&command) {
                        problems.push(format!("the Stop hook in {path} {problem}"));
                    }
                }
            }
        }
    }
    if present.is_empty() {
        checks.push(Check {
            name,
            ok: true,
            detail: "not installed".into(),
            fix: None,
            warning: None,
        });
        return;
    }
    problems.extend(foreign);
    if !missing.is_empty() {
        problems.push(format!("incomplete: {} missing", missing.join(", ")));
    }
    let ok = problems.is_empty();
    // Codex reads a project's config only in a project it trusts: an
    // install it ignores is not an install.
    let untrusted = (target == Target::Codex)
        .then(|| crate::install::codex::notes(scope, places).join("; "))
        .filter(|notes| !notes.is_empty());
    checks.push(Check {
        name,
        ok,
        detail: if ok {
            format!("installed, matches this binary ({})", present.join(", "))
        } else {
            problems.join("; ")
        },
        fix: (!ok).then_some(fix),
        warning: untrusted,
    });
}

/// Why the hook `command` cannot run, if it cannot: its program is
/// neither an executable file nor found on PATH.
fn missing_binary(command: &str) -> Option<String> {
    let program = install::first_word(command);
    let found = if program.contains('/') {
        is_executable(Path::new(&program))
    } else {
        platform::which(&program).is_some()
    };
    (!found).then(|| format!("calls {program:?}, which does not exist or is not executable"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn store_and_workspace(at: Place<'_>, places: &Places, checks: &mut Vec<Check>) {
    let dir = at.dir;
    let shown = dir.display();
    let opened = LoopDir::open(at, Access::ReadOnly).and_then(|loop_dir| {
        loop_dir.read()?;
        Ok(loop_dir)
    });
    let loop_dir = match opened {
        Ok(loop_dir) => {
            checks.push(Check {
                name: "store".into(),
                ok: true,
                detail: format!(
                    "{} opens read-only; its schema is current",
                    loop_dir.display()
                ),
                fix: None,
                warning: None,
            });
            // A supervisor that ever ran here: is it running (informative).
            if let Some(line) = crate::supervisor::status_line(&loop_dir) {
                checks.push(Check {
                    name: "supervisor".into(),
                    ok: true,
                    detail: line,
                    fix: None,
                    warning: None,
                });
            }
            loop_dir
        }
        Err(error) => {
            checks.push(Check {
                name: "store".into(),
                ok: false,
                detail: crate::error::describe(&error),
                fix: Some(format!(
                    "loopx init --dir {shown} (or pass the loop's --dir)"
                )),
                warning: None,
            });
            return;
        }
    };
    let now = driver::workspace(&places.project);
    let state = match (&now.changes, &now.head) {
        (Some(_), Some(head)) => format!(
            "HEAD {head}, {}",
            if is_clean(&places.project) {
                "clean"
            } else {
                "dirty"
            }
        ),
        (Some(_), None) => "a git repository with no commits yet".into(),
        (None, _) => "not a git repository".into(),
    };
    // What `drive` would do by default here, in the driver's own words.
    let snapshots = loopx_core::driver::snapshot::decide(
        loopx_core::driver::snapshot::Setting::Auto,
        crate::snapshot::git::probe(&places.project),
    )
    .map(|decision| decision.note.unwrap_or_else(|| "git snapshots on".into()))
    .unwrap_or_default();
    let state = format!("{state}; {snapshots}");
    let recorded = loop_dir
        .driver()
        .ok()
        .and_then(|(_, state)| state.workspace_root);
    let check = match recorded {
        None => Check {
            name: "workspace".into(),
            ok: true,
            detail: format!(
                "{} ({state}); no driver has registered a workspace yet",
                now.root
            ),
            fix: None,
            warning: None,
        },
        Some(root) if same_dir(&root, &now.root) => Check {
            name: "workspace".into(),
            ok: true,
            detail: format!("{} ({state}), as the driver registered", now.root),
            fix: None,
            warning: None,
        },
        Some(root) => Check {
            name: "workspace".into(),
            ok: false,
            detail: format!(
                "the loop was driven from {root}, this is {} ({state})",
                now.root
            ),
            fix: Some(format!("cd {root} (the loop belongs to that workspace)")),
            warning: None,
        },
    };
    checks.push(check);
}

fn same_dir(a: &str, b: &str) -> bool {
    let canon = |p: &str| {
        PathBuf::from(p)
            .canonicalize()
            .unwrap_or_else(|_| PathBuf::from(p))
    };
    canon(a) == canon(b)
}

/// The porcelain status is empty. (The workspace probe's `changes` is a
/// digest, equal for every clean tree; this asks git directly.)
fn is_clean(root: &Path) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["status", "--porcelain=v1"])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success() && o.stdout.is_empty())
}

/// The providers line: which CLIs are on PATH, so an empty PATH is said
/// and not left to be inferred from missing lines.
fn providers_summary(found: &[&str]) -> Check {
    let detail = if found.is_empty() {
        format!(
            "no provider CLI on PATH (known: {}); drive --provider needs one, drive --cmd does not",
            provider::names().join(", ")
        )
    } else {
        format!("on PATH: {}", found.join(", "))
    };
    Check {
        name: "providers".into(),
        ok: true,
        detail,
        fix: None,
        warning: None,
    }
}

/// A provider whose binary is on PATH, with its `--version` and whether
/// the table was qualified against that version. Providers not on PATH
/// are not reported: nobody must install every runtime.
fn provider_check(provider: &provider::Provider) -> Option<Check> {
    let installed = launchers::installed(provider)?;
    let binary = installed.choice.launcher.binary;
    let name = format!("provider.{}", provider.name);
    let path = installed.path.display();
    let line = match installed.version_line.clone() {
        Some(line) => line,
        // Not probed when choosing the row: ask now, to show it.
        None => launchers::version(&installed.path),
    };
    Some(match line {
        Ok(line) => {
            let standing = match installed.choice.fit {
                Fit::Qualified => "a qualified version".to_owned(),
                Fit::Unqualified => "loopx has not qualified any version of it".to_owned(),
                _ => "not a qualified version".to_owned(),
            };
            let root = platform::effective_uid() == 0;
            let warning = [
                installed.warning(),
                provider::root_refusal(provider, root, |name| std::env::var(name).ok()),
            ]
            .into_iter()
            .flatten()
            .reduce(|a, b| format!("{a}; {b}"));
            Check {
                name,
                ok: true,
                detail: format!("{path} ({line}; {standing})"),
                fix: None,
                warning,
            }
        }
        Err(problem) => Check {
            name,
            ok: false,
            detail: format!("{path}: `{binary} --version` {problem}"),
            fix: Some(format!("reinstall {binary}, or remove it from PATH")),
            warning: None,
        },
    })
}

/// A line per model or thinking pin set here
/// (`AAS_<PROVIDER>_LATEST_MODEL`, `AAS_<PROVIDER>_HIGHEST_THINKING`):
/// what the provider's turns and reviewers start with, or why `drive`
/// would refuse it.
fn pin_checks() -> Vec<Check> {
    let env = |name: &str| std::env::var(name).ok();
    let mut checks = Vec::new();
    for each in provider::PROVIDERS {
        for (variable, value) in provider::pins_set(each, env) {
            let usable = provider::check_pin(variable, &value);
            checks.push(Check {
                name: format!("pin.{variable}"),
                ok: usable.is_ok(),
                detail: match &usable {
                    Ok(()) => format!("{} starts with {variable}={value}", each.name),
                    Err(problem) => problem.clone(),
                },
                fix: usable
                    .err()
                    .map(|_| format!("unset {variable}, or set it to one model or effort name")),
                warning: None,
            });
        }
    }
    checks
}

fn disk(dir: &Path) -> Check {
    // The loop directory, or the nearest existing directory above it.
    let at = dir
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("."));
    match platform::free_bytes(at) {
        Ok(free) => Check {
            name: "disk".into(),
            ok: free >= LOW_DISK,
            detail: format!("{} MiB free at {}", free / (1024 * 1024), at.display()),
            fix: (free < LOW_DISK)
                .then(|| format!("free space on the file system of {}", at.display())),
            warning: None,
        },
        Err(e) => Check {
            name: "disk".into(),
            ok: false,
            detail: format!("cannot measure free space at {}: {e}", at.display()),
            fix: Some("check the loop directory's file system".into()),
            warning: None,
        },
    }
}
