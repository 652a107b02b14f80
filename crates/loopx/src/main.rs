//! `loopx`: the control plane that keeps long-horizon agents working toward
//! a goal across sessions, crashes and hand-offs.
//!
//! This binary is a thin set of adapters: each command parses its flags,
//! calls an owner in `loopx-core` through the `loopx-store` authority, and
//! renders the result as text or `--json`.

mod cli;
mod clock;
mod drive;
mod fsutil;
mod loop_dir;
mod platform;
mod registry;
mod serve;

fn main() -> std::process::ExitCode {
    cli::main()
}
