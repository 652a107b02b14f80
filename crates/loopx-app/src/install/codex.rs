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
//! Codex has no Stop hook to install.

use super::{skill, Component, Edit, Places, Scope, Source};

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
    ]
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
