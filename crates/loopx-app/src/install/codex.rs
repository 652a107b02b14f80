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
