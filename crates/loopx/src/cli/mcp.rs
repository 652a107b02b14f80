//! `loopx mcp`: its flags, and the binding they give the MCP server.

use super::goal::GoalArgs;
use super::Reply;
use anyhow::Result;
use clap::Args;
use loopx_app::driver::env;

/// Serve the Model Context Protocol on stdin/stdout for an agent inside a
/// turn (register it as a local stdio MCP server in Claude Code, Codex or
/// OpenCode).
///
/// The loop, goal and agent are fixed here, from these flags or the
/// LOOPX_DIR / LOOPX_AGENT_ID / LOOPX_DISPATCH_ID variables `loopx drive`
/// sets; no tool input can name another. Without an agent id the tools act
/// as the goal's owner.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub goal: GoalArgs,
    /// The driver dispatch this turn runs under (set by `loopx drive`).
    #[arg(long, env = env::DISPATCH_ID, default_value = "", hide = true)]
    pub dispatch_id: String,
    /// The agent provider that runs this turn (set by `loopx drive`).
    #[arg(
        long,
        env = env::PRIMARY_PROVIDER,
        default_value = "",
        hide = true
    )]
    pub executor_provider: String,
}

pub fn mcp(args: &McpArgs, store: Option<&str>) -> Result<Reply> {
    // Started by a client in the session's directory: a relative loop
    // directory is found from the project root up.
    let project = std::env::var_os("CLAUDE_PROJECT_DIR").map(std::path::PathBuf::from);
    let dir = loopx_app::loop_dir::locate_for_session(
        &args.goal.dir.dir,
        project.as_deref(),
        &std::env::current_dir()?,
    );
    crate::mcp::serve(crate::mcp::Binding {
        dir,
        store: store.map(str::to_owned),
        goal_id: args.goal.goal_id.clone(),
        actor: args.goal.actor()?,
        dispatch_id: args.dispatch_id.clone(),
        executor_provider: args.executor_provider.clone(),
        run_id: std::sync::OnceLock::new(),
    })?;
    Ok(Reply::ok(
        serde_json::json!({"status": "ok", "action": "mcp"}),
        "",
    ))
}
