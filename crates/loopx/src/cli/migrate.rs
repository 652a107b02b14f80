//! `migrate`: parse, call [`loopx_app::migrate::migrate`] (the schema) or
//! [`loopx_app::migrate::move_from_dir`] (a loop), render.

use super::Reply;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// Apply the schema migrations of this loopx to the PostgreSQL store named
/// by --store (or LOOPX_STORE). Every other command refuses a store whose
/// schema is older or newer than this loopx's. With --from-dir, move that
/// directory's SQLite loop into the store instead.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Move the SQLite loop of this directory (journal, receipts and
    /// every stream) into the --store database, which must hold no loop;
    /// one transaction, then verified as `validate` checks a loop. The
    /// directory is only read: its views, logs and artifacts stay where
    /// they are, for use with --store.
    #[arg(long, value_name = "DIR")]
    pub from_dir: Option<PathBuf>,
}

pub fn migrate(args: &MigrateArgs, store: Option<&str>) -> Result<Reply> {
    if let Some(from) = &args.from_dir {
        let view = loopx_app::migrate::move_from_dir(from, store)?;
        let text = format!(
            "moved the loop at {} into {}: {} in {} journal entries over {}, verified (state {}, journal {}); from now on run loopx with --store (or LOOPX_STORE) and --dir {}; {}/loopx.sqlite is unchanged and still answers commands run without --store: move it away once you have switched",
            view.from_dir,
            view.store,
            loopx_core::words::count(view.iterations, "iteration"),
            view.journal_entries,
            loopx_core::words::count(view.streams.len() as u64, "stream"),
            view.state_digest,
            view.journal_digest,
            view.from_dir,
            view.from_dir,
        );
        return Reply::view(&view, text);
    }
    let view = loopx_app::migrate::migrate(store)?;
    let text = if view.status == "up_to_date" {
        format!(
            "{}: schema version {}, up to date",
            view.store, view.to_version
        )
    } else {
        format!(
            "{}: migrated the schema from version {} to {}",
            view.store, view.from_version, view.to_version
        )
    };
    Reply::view(&view, text)
}
