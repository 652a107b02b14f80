//! What `loopx install --target codex` writes, and where (OpenAI Codex).
//!
//! - The skill: `.agents/skills/loopx/SKILL.md` (project) or
//!   `~/.agents/skills/loopx/SKILL.md` (user), where Codex discovers Agent
//!   Skills (developers.openai.com/codex/skills).
//! - The MCP server: `[mcp_servers.loopx]` with `command`, `args` and `env`
//!   in `.codex/config.toml` of the project (Codex reads it in a trusted
//!   project) or `$CODEX_HOME/config.toml` (default `~/.codex`), the table
//!   `codex mcp add` writes (developers.openai.com/codex/mcp). Edited with
//!   `toml_edit`, so the user's comments and layout stay.
//!
//! Codex reads a project's `.codex/config.toml` only once the project is
//! trusted, which it records in its own config as `[projects."<root>"]
//! trust_level = "trusted"` ([`project_trust`] reads it).
//!
//! - The Stop hook: a group `{"hooks":[{"type":"command","command":…}]}`
//!   in `hooks.Stop` of `.codex/hooks.json` (project) or
//!   `$CODEX_HOME/hooks.json` (user): Codex 0.171's hooks take Claude
//!   Code's shape, input (`stop_hook_active`) and answer (`decision`,
//!   `reason`), so the hook is the same `loopx hook-check`.
//!
//! Codex runs a hook only once a person has trusted it: it records
//! `[hooks.state."<hooks.json>:stop:<group>:<hook>"] trusted_hash` in
//! `$CODEX_HOME/config.toml` when its hook review (`/hooks` in the TUI)
//! approves one ([`hook_trust`] reads it). loopx does not trust its own
//! hook on the person's behalf: install and doctor say the step.

use super::json::Json;
use super::{skill, stop_hook, Component, Edit, Places, Scope, Source};
use std::path::{Path, PathBuf};

/// Codex's hooks file for `scope`.
fn hooks_file(scope: Scope, places: &Places) -> PathBuf {
    match scope {
        Scope::Project => places.project.join(".codex/hooks.json"),
        Scope::User => places.codex_home.join("hooks.json"),
    }
}

pub fn components(scope: Scope, places: &Places, source: &Source) -> Vec<Component> {
    let (skills, config) = match scope {
        Scope::Project => (
            places.project.join(".agents/skills"),
            places.project.join(".codex/config.toml"),
        ),
        Scope::User => (
            places.home.join(".agents/skills"),
            places.codex_home.join("config.toml"),
        ),
    };
    vec![
        skill(&skills, source),
        Component {
            name: "mcp",
            path: config,
            edit: Edit::TomlKey {
                table: "mcp_servers",
                key: "loopx",
                command: source.loopx.display().to_string(),
                args: source.mcp_args(),
            },
        },
        stop_hook(hooks_file(scope, places), source),
    ]
}

/// The key Codex records its trust of loopx's Stop hook under, from where
/// the hook stands in `hooks_json` (the file at `path`): `None` when loopx's
/// hook is not in it.
fn hook_key(path: &Path, hooks_json: &str) -> Option<String> {
    let doc = Json::parse(hooks_json).ok()?;
    let Some(Json::Array(groups)) = doc.get("hooks").and_then(|h| h.get("Stop")) else {
        return None;
    };
    groups.iter().enumerate().find_map(|(g, group)| {
        let Some(Json::Array(hooks)) = group.get("hooks") else {
            return None;
        };
        let h = hooks
            .iter()
            .position(|hook| super::hook_entry_record(hook).is_some())?;
        Some(format!("{}:stop:{g}:{h}", path.display()))
    })
}

/// Whether Codex has a trust record for loopx's Stop hook installed in
/// `scope`: `None` when no loopx hook is installed there or Codex's config
/// cannot be read. (Codex asks again when the hook changes; a record is
/// what loopx can see.)
pub fn hook_trust(scope: Scope, places: &Places) -> Option<bool> {
    let path = hooks_file(scope, places);
    let key = hook_key(&path, &std::fs::read_to_string(&path).ok()?)?;
    let text = match std::fs::read_to_string(places.codex_home.join("config.toml")) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(false),
        Err(_) => return None,
    };
    let config: toml_edit::DocumentMut = text.parse().ok()?;
    Some(
        config
            .get("hooks")
            .and_then(|hooks| hooks.get("state"))
            .and_then(|state| state.get(&key))
            .and_then(|entry| entry.get("trusted_hash"))
            .and_then(|hash| hash.as_str())
            .is_some_and(|hash| !hash.is_empty()),
    )
}

/// What to say of a Codex install in `scope` that Codex will not act on
/// yet: an untrusted project (its config ignored), a Stop hook nobody
/// has trusted (never run); each with the step that fixes it.
pub fn notes(scope: Scope, places: &Places) -> Vec<String> {
    let project = (scope == Scope::Project)
        .then(|| untrusted_note(places))
        .flatten();
    let hook = (hook_trust(scope, places) == Some(false)).then(|| {
        let path = hooks_file(scope, places);
        format!(
            "Codex runs loopx's Stop hook only once you trust it: start `codex` in {}, open /hooks and trust the Stop hook from {} (Codex records it under [hooks.state] in {}); until then `loopx arm` does not hold a Codex session. Automation that vets its hooks may run `codex exec --dangerously-bypass-hook-trust` instead",
            places.project.display(),
            path.display(),
            places.codex_home.join("config.toml").display()
        )
    });
    project.into_iter().chain(hook).collect()
}

/// Whether Codex trusts `project` (its record in `$CODEX_HOME/config.toml`):
/// `Some(true)` trusted, `Some(false)` recorded otherwise or absent, and
/// `None` when Codex's config cannot be read.
pub fn project_trust(places: &Places) -> Option<bool> {
    let text = match std::fs::read_to_string(places.codex_home.join("config.toml")) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(false),
        Err(_) => return None,
    };
    let config: toml_edit::DocumentMut = text.parse().ok()?;
    let root = places
        .project
        .canonicalize()
        .unwrap_or_else(|_| places.project.clone());
    let key = root.display().to_string();
    Some(
        config
            .get("projects")
            .and_then(|projects| projects.get(&key))
            .and_then(|project| project.get("trust_level"))
            .and_then(|level| level.as_str())
            == Some("trusted"),
    )
}

/// What to say of a project install Codex will ignore: `Some` when Codex
/// does not trust the project, with the one step that makes it trusted.
pub fn untrusted_note(places: &Places) -> Option<String> {
    (project_trust(places) == Some(false)).then(|| {
        format!(
            "Codex ignores this project's .codex/config.toml until it trusts the project: {}",
            trust_step(places)
        )
    })
}

/// The one step that makes Codex read the project's config.
fn trust_step(places: &Places) -> String {
    let root = places
        .project
        .canonicalize()
        .unwrap_or_else(|_| places.project.clone());
    format!(
        "trust the project once: run `codex` in {} and accept its trust prompt (or `codex exec --trust ...` there), or add [projects.\"{}\"] trust_level = \"trusted\" to {}; or install with --user",
        root.display(),
        root.display(),
        places.codex_home.join("config.toml").display()
    )
}
