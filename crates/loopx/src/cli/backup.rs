//! `backup`: parse, call [`loopx_app::backup::backup`], render.

use super::ledger::DirArgs;
use super::Reply;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Write a complete, standalone copy of the loop's database to a new file.
///
/// The copy is one consistent state, including commits still in the
/// write-ahead log, and is checked by `loopx validate --dir` on a
/// directory holding it as `loopx.sqlite`. Refuses to overwrite any
/// existing file. `proof_artifacts/` is not in the copy: copy it beside.
#[derive(Debug, Args)]
pub struct BackupArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The new database file to write.
    #[arg(long)]
    pub to: PathBuf,
}

pub fn backup(args: &BackupArgs, store: Option<&str>) -> Result<Reply> {
    let view = loopx_app::backup::backup(args.dir.at(store), &args.to)?;
    let text = format!(
        "backed up {} to {} ({} bytes)",
        view.from, view.to, view.bytes
    );
    Ok(Reply::ok(serde_json::to_value(&view)?, text))
}
