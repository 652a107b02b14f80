//! What `loopx install --target claude` writes, and where (Claude Code).
//!
//! - The skill: `.claude/skills/loopx/SKILL.md` (project) or
//!   `~/.claude/skills/loopx/SKILL.md` (user): Claude Code's skill folders,
//!   per docs.claude.com/en/docs/claude-code/skills.
//! - The MCP server: `mcpServers.loopx` of `.mcp.json` at the project root
//!   (project scope) or of `~/.claude.json` (user scope), the files
//!   `claude mcp add --scope project|user` writes (docs.claude.com, "MCP
//!   installation scopes"); a stdio entry `{type, command, args, env}`.
//! - The Stop hook: a group `{"hooks":[{"type":"command","command":…}]}`
//!   in `hooks.Stop` of `.claude/settings.json` (project) or
//!   `~/.claude/settings.json` (user) (docs.claude.com/en/docs/claude-code/hooks:
//!   Stop takes no matcher). A hook a person adds to that group is
//!   theirs: reinstall replaces, and uninstall removes, only loopx's hook.

use super::json::Json;
use super::{skill, stop_hook, Component, Edit, Places, Scope, Source};

pub fn components(scope: Scope, places: &Places, source: &Source) -> Vec<Component> {
    let (base, mcp_file) = match scope {
        Scope::Project => (places.project.clone(), places.project.join(".mcp.json")),
        Scope::User => (places.home.clone(), places.home.join(".claude.json")),
    };
    let args = source
        .mcp_args()
        .into_iter()
        .map(|a| Json::Scalar(a.into()))
        .collect();
    vec![
        skill(&base.join(".claude/skills"), source),
        Component {
            name: "mcp",
            path: mcp_file,
            edit: Edit::JsonKey {
                parents: &["mcpServers"],
                key: "loopx",
                env: "env",
                entry: Json::Object(vec![
                    ("type".into(), Json::Scalar("stdio".into())),
                    (
                        "command".into(),
                        Json::Scalar(source.loopx.display().to_string().into()),
                    ),
                    ("args".into(), Json::Array(args)),
                ]),
            },
        },
        stop_hook(base.join(".claude/settings.json"), source),
    ]
}
