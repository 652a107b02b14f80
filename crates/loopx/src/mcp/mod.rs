//! `loopx mcp`: the Model Context Protocol over stdio, for an agent inside
//! a turn (Claude Code, Codex, OpenCode register it as a local server).
//!
//! Owns: which loop, goal, agent and dispatch the server acts for
//! ([`Binding`], fixed when the server starts, never taken from a tool's
//! input), and running the stdio session. The tools are in [`tools`], the
//! one mapping of application errors to MCP tool errors in [`error`], the
//! line framing (an answer to every line, a bound on its length) in
//! [`stdio`].
//! Does not own: any rule — every tool calls the same `loopx_app` function
//! the CLI calls.

mod error;
mod stdio;
mod tools;

use anyhow::{Context as _, Result};
use loopx_app::loop_dir::{LoopDir, Place};
use loopx_core::goal::Actor;
use loopx_store::sqlite::Access;
use rmcp::ServiceExt as _;
use std::path::PathBuf;

/// Whom the server acts for and on which loop: the driver's `LOOPX_*`
/// variables or the flags given at start. A tool cannot change any of it,
/// so an agent can only act as itself, on its own loop.
#[derive(Debug, Clone)]
pub struct Binding {
    pub dir: PathBuf,
    /// The store the loop's state is in, when not the directory's own
    /// file (`--store`).
    pub store: Option<String>,
    pub goal_id: String,
    pub actor: Actor,
    /// The driver dispatch this turn runs under ("" outside the driver).
    pub dispatch_id: String,
    /// The agent provider that runs this turn, recorded with iterations.
    pub executor_provider: String,
    /// The loop's run id, read when a tool first finds the loop: from then
    /// on the server serves that loop only, whatever is put in its place.
    pub run_id: std::sync::OnceLock<String>,
}

impl Binding {
    /// The loop this server is bound to: the first call that finds it
    /// there fixes which loop that is (its run id), and every later one is
    /// refused if the store now holds another.
    pub fn place(&self) -> anyhow::Result<Place<'_>> {
        let place = Place::new(&self.dir, self.store.as_deref());
        if self.run_id.get().is_none() {
            let run_id = LoopDir::open(place, Access::ReadOnly)?
                .read()?
                .ledger
                .run_id;
            let _ = self.run_id.set(run_id);
        }
        Ok(match self.run_id.get() {
            Some(run_id) => place.bound_to(run_id),
            None => place,
        })
    }
}

/// Serve MCP on stdin/stdout until the client closes the session.
pub fn serve(binding: Binding) -> Result<()> {
    // One thread: tool calls are short synchronous store transactions,
    // and running them one at a time keeps their order the client's.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the MCP server's runtime")?;
    runtime.block_on(async {
        let session = tools::Tools::new(binding)
            .serve(stdio::Stdio::start())
            .await
            .context("the MCP client did not complete initialization")?;
        session.waiting().await.context("the MCP session failed")?;
        Ok(())
    })
}
