//! The `backup` use case: a complete, standalone copy of a loop's store.
//!
//! Owns what a backup is (a checkpoint first, then one consistent copy of
//! the whole store to a new file, never over an existing one) and the view
//! it returns. How a backend copies itself is the store's
//! ([`loopx_store::Store::backup_to`]); the files beside the database
//! (`proof_artifacts/`, logs) are not part of this copy.

use crate::loop_dir::{LoopDir, Place};
use anyhow::Result;
use loopx_store::sqlite::Access;
use serde::Serialize;
use std::path::Path;

/// What `backup` wrote.
#[derive(Debug, Serialize)]
pub struct BackupView {
    pub status: &'static str,
    /// The store that was copied, as messages name it.
    pub from: String,
    /// The new database file.
    pub to: String,
    pub bytes: u64,
    /// What did not go as planned after the copy was complete.
    pub warnings: Vec<String>,
}

/// Copy the store of the loop at `dir` to the new file `to`.
pub fn backup(at: Place<'_>, to: &Path) -> Result<BackupView> {
    let loop_dir = LoopDir::open(at, Access::ReadWrite)?;
    loop_dir.backup_to(to)?;
    // The copy read through the log; folding the log into the loop's own
    // file as well makes a raw copy of the directory taken now complete
    // in its main file too. After the copy, so a refusal changes nothing,
    // and never a failure: the backup the caller asked for is done.
    let warnings = match loop_dir.checkpoint() {
        Ok(()) => Vec::new(),
        Err(error) => vec![format!(
            "the backup is complete, but the loop's log could not be folded into its database file ({error:#}); nothing is lost"
        )],
    };
    let bytes = std::fs::metadata(to).map_or(0, |m| m.len());
    Ok(BackupView {
        status: "ok",
        from: loop_dir.store_location(),
        to: to.display().to_string(),
        bytes,
        warnings,
    })
}
