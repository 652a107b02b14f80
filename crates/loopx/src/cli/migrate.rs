//! `migrate`: parse, call [`loopx_app::migrate::migrate`], render.

use super::Reply;
use anyhow::Result;
use clap::Args;

/// Apply the schema migrations of this loopx to the PostgreSQL store named
/// by --store (or LOOPX_STORE). Every other command refuses a store whose
/// schema is older or newer than this loopx's.
#[derive(Debug, Args)]
pub struct MigrateArgs {}

pub fn migrate(_args: &MigrateArgs) -> Result<Reply> {
    let view = loopx_app::migrate::migrate()?;
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
