//! `loopx`: the control plane that keeps long-horizon agents working toward
//! a goal across sessions, crashes and hand-offs.
//!
//! This binary is a thin set of adapters over `loopx-app`: the CLI
//! (`cli/`), the turn runner that starts, watches and reaps processes (`process/`), the HTTP server
//! (`serve/`) and the MCP server (`mcp/`). Each parses its input, calls the application, and renders
//! the result as text, `--json` or HTML.

mod cli;
mod mcp;
mod process;
mod serve;

fn main() -> std::process::ExitCode {
    cli::main()
}
