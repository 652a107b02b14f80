//! The `migrate` use case: bring a shared store's schema to this build's.
//!
//! Owns when a migration runs explicitly (a PostgreSQL store: every other
//! command refuses a schema that is not exactly this build's, so that hosts
//! running different loopx versions never write through a schema one of
//! them does not know) and the view it returns. How migrations are applied
//! is the backend's ([`loopx_store::postgres::PostgresStore::migrate`]); a
//! SQLite loop needs no command, its next writer migrates it.

use crate::loop_dir::configured_store;
use anyhow::{bail, Result};
use serde::Serialize;

/// What `migrate` did.
#[derive(Debug, Serialize)]
pub struct MigrateView {
    pub status: &'static str,
    /// The store, without its password.
    pub store: String,
    /// The schema version found before, and the one it holds now.
    pub from_version: u32,
    pub to_version: u32,
}

/// Apply every migration this build has to the store `LOOPX_STORE` names.
pub fn migrate() -> Result<MigrateView> {
    let Some(locator) = configured_store()? else {
        bail!("migrate applies a shared store's schema: name the store (postgres://…); a loop directory's SQLite database is migrated by its next writer");
    };
    let Some(store) = locator.open_postgres() else {
        bail!("{locator} is a SQLite database: its next writer migrates it; migrate applies a PostgreSQL store's schema");
    };
    let (from_version, to_version) = store?.migrate()?;
    Ok(MigrateView {
        status: if from_version == to_version {
            "up_to_date"
        } else {
            "migrated"
        },
        store: locator.to_string(),
        from_version,
        to_version,
    })
}
