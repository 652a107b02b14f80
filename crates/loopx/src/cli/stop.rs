//! `loopx request-stop`: parse, call `loopx_app::stop::request_stop`,
//! render.

use super::ledger::DirArgs;
use super::Reply;
use anyhow::Result;
use clap::Args;
use loopx_app::loop_dir::LoopDir;
use loopx_store::sqlite::Access;

/// End a loop by hand: write its STOP_REQUESTED sentinel.
///
/// The loop ends at the next check of the stop arbiter (`loopx done`): no
/// new turn starts, and a running `loopx drive` settles its current turn
/// and exits 0. This ends the loop, not a process: to stop only a running
/// driver, send it SIGTERM or press Ctrl-C (it reaps its turn and exits
/// 143 or 130), and drive again later. Undo with `rm DIR/STOP_REQUESTED`.
#[derive(Debug, Args)]
pub struct RequestStopArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// Why, kept in the sentinel for whoever looks next (one line).
    #[arg(long, default_value = "")]
    reason: String,
}

pub fn request_stop(args: &RequestStopArgs, store: Option<&str>) -> Result<Reply> {
    let dir = LoopDir::open(args.dir.at(store), Access::ReadOnly)?;
    let view = loopx_app::stop::request_stop(&dir, &args.reason)?;
    Reply::view(&view, view.text())
}
