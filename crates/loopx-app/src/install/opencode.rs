//! What `loopx install --target opencode` writes, and where (OpenCode).
//!
//! - The skill: `.opencode/skills/loopx/SKILL.md` (project) or
//!   `$XDG_CONFIG_HOME/opencode/skills/loopx/SKILL.md` (user, default
//!   `~/.config`), per opencode.ai/docs/skills.
//! - The MCP server: `mcp.loopx` of `opencode.json` at the project root or
//!   of `$XDG_CONFIG_HOME/opencode/opencode.json`, a local server
//!   `{type: "local", command: [...], enabled, environment}`
//!   (opencode.ai/docs/mcp-servers, the form OpenCode V1 documents).
//!
//! OpenCode has no Stop hook to install.

use super::json::Json;
use super::{skill, Component, Edit, Places, Scope, Source};

pub fn components(scope: Scope, places: &Places, source: &Source) -> Vec<Component> {
    let base = match scope {
        Scope::Project => places.project.clone(),
        Scope::User => places.config_home.join("opencode"),
    };
    let skills = match scope {
        Scope::Project => base.join(".opencode/skills"),
        Scope::User => base.join("skills"),
    };
    let mut command = vec![Json::Scalar(source.loopx.display().to_string().into())];
    command.extend(
        source
            .mcp_args()
            .into_iter()
            .map(|a| Json::Scalar(a.into())),
    );
    vec![
        skill(&skills, source),
        Component {
            name: "mcp",
            path: base.join("opencode.json"),
            edit: Edit::JsonKey {
                parents: &["mcp"],
                key: "loopx",
                env: "environment",
                entry: Json::Object(vec![
                    ("type".into(), Json::Scalar("local".into())),
                    ("command".into(), Json::Array(command)),
                    ("enabled".into(), Json::Scalar(true.into())),
                ]),
            },
        },
    ]
}
