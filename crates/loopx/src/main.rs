//! `loopx`: the control plane that keeps long-horizon agents working toward
//! a goal across sessions, crashes and hand-offs.
//!
//! This binary is a thin set of adapters over `loopx-app`: the CLI
//! (`cli/`), the driver's processes (`drive`) and the HTTP server
//! (`serve/`). Each parses its input, calls the application, and renders
//! the result as text, `--json` or HTML.

mod cli;
mod drive;
mod serve;

fn main() -> std::process::ExitCode {
    cli::main()
}
