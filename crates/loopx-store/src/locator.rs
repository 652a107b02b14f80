//! Where a loop's state lives, named by one string (`--store` /
//! `LOOPX_STORE`), and the one factory that opens a backend from it.
//!
//! Owns the locator grammar (`sqlite:PATH`, a plain path, `postgres://…`),
//! how a locator is shown to people (never with its password), and which
//! backend each scheme opens. It does not own the default location (the
//! loop directory's `loopx.sqlite`: the application layer decides that) nor
//! any backend's behaviour.

use crate::postgres::PostgresStore;
use crate::sqlite::{Access, SqliteStore};
use crate::{Store, StoreError};
use std::fmt;
use std::path::{Path, PathBuf};

/// A parsed store locator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locator {
    /// An embedded SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database: the URL to connect with (never shown) and
    /// the same URL without its password (what every message names).
    Postgres { url: Secret, redacted: String },
}

/// A connection URL that may hold a password: `Debug` shows nothing of it,
/// so a stray `{:?}` cannot leak it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl Locator {
    /// `sqlite:PATH` (also `sqlite://PATH`), `postgres://…` /
    /// `postgresql://…`, or a plain path to a SQLite file. Any other
    /// `scheme:` prefix is refused rather than taken for a file name
    /// (`./odd:name` names such a file).
    pub fn parse(text: &str) -> Result<Self, StoreError> {
        if text.is_empty() {
            return Err(StoreError::BadLocator {
                locator: String::new(),
                reason: "it is empty; give sqlite:PATH or a path".into(),
            });
        }
        match scheme(text) {
            None => Ok(Locator::Sqlite(PathBuf::from(text))),
            Some(("sqlite", rest)) => {
                let path = rest.strip_prefix("//").unwrap_or(rest);
                if path.is_empty() {
                    return Err(StoreError::BadLocator {
                        locator: text.to_owned(),
                        reason: "it names no file; give sqlite:PATH".into(),
                    });
                }
                Ok(Locator::Sqlite(PathBuf::from(path)))
            }
            Some(("postgres" | "postgresql", _)) => Ok(Locator::Postgres {
                url: Secret(text.to_owned()),
                redacted: redact(text),
            }),
            Some((other, _)) => Err(StoreError::BadLocator {
                locator: redact(text),
                reason: format!(
                    "loopx knows no store scheme {other:?}; use sqlite:PATH, a plain path, or postgres://…"
                ),
            }),
        }
    }

    /// The SQLite file `path` (the default: a loop directory's database).
    pub fn sqlite(path: &Path) -> Self {
        Locator::Sqlite(path.to_owned())
    }

    /// Open the backend this locator names.
    pub fn open(&self, access: Access) -> Result<Box<dyn Store + Send>, StoreError> {
        match self {
            Locator::Sqlite(path) => Ok(Box::new(SqliteStore::open(path, access)?)),
            Locator::Postgres { url, redacted } => Ok(Box::new(PostgresStore::open(
                &url.0,
                redacted,
                password(&url.0),
                access,
            )?)),
        }
    }

    /// Connect to the PostgreSQL database this locator names without
    /// checking its schema (for `migrate`); `None` for a SQLite locator.
    pub fn open_postgres(&self) -> Option<Result<PostgresStore, StoreError>> {
        match self {
            Locator::Postgres { url, redacted } => {
                Some(PostgresStore::connect(&url.0, redacted, password(&url.0)))
            }
            Locator::Sqlite(_) => None,
        }
    }

    /// The locator as it was given, password included: for a process
    /// loopx starts that must reach the same store (an agent's `loopx`
    /// calls), never for a message.
    pub fn handoff_text(&self) -> String {
        match self {
            Locator::Sqlite(path) => format!("sqlite:{}", path.display()),
            Locator::Postgres { url, .. } => url.0.clone(),
        }
    }

    /// The SQLite file this locator names, if it names one.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            Locator::Sqlite(path) => Some(path),
            Locator::Postgres { .. } => None,
        }
    }
}

/// How the locator appears in messages: a SQLite locator as its path (what
/// the store's own errors name), a server without its password.
impl fmt::Display for Locator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Locator::Sqlite(path) => write!(f, "{}", path.display()),
            Locator::Postgres { redacted, .. } => f.write_str(redacted),
        }
    }
}

/// `("postgres", "//host/db")` for `postgres://host/db`; `None` for text
/// without a URI scheme (`/a/b`, `rel/x`, `a:b` is a scheme `a`).
fn scheme(text: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = text.split_once(':')?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

/// The password in `user:secret@host`, or in a `password=` query pair, if
/// any: what a message must never show.
fn password(text: &str) -> Option<&str> {
    let (_, rest) = text.split_once("://")?;
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest, None),
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let from_userinfo = authority
        .rsplit_once('@')
        .and_then(|(userinfo, _)| userinfo.split_once(':'))
        .map(|(_, secret)| secret);
    from_userinfo.or_else(|| {
        query?
            .split('&')
            .find_map(|pair| pair.strip_prefix("password="))
    })
}

/// The locator with any password removed: `user:secret@host` keeps `user`,
/// and a query string (where `password=` may hide) is dropped.
fn redact(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.split('?').next().unwrap_or_default().to_owned();
    };
    let rest = rest.split('?').next().unwrap_or_default();
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{user}@{host}")
        }
        None => authority.to_owned(),
    };
    let dropped = if text.contains('?') { "?…" } else { "" };
    format!("{scheme}://{authority}{path}{dropped}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_and_sqlite_locators_name_a_file() {
        for (text, path) in [
            ("/tmp/x/loopx.sqlite", "/tmp/x/loopx.sqlite"),
            ("rel/loopx.sqlite", "rel/loopx.sqlite"),
            ("sqlite:/tmp/a.db", "/tmp/a.db"),
            ("sqlite:///tmp/a.db", "/tmp/a.db"),
            ("sqlite:rel.db", "rel.db"),
            ("./odd:name", "./odd:name"),
        ] {
            assert_eq!(Locator::parse(text).unwrap(), Locator::Sqlite(path.into()));
        }
    }

    #[test]
    fn a_postgres_locator_is_recognised_and_never_shows_its_password() {
        let locator = Locator::parse("postgres://user:secret@127.0.0.1:1/loops").unwrap();
        assert_eq!(locator.to_string(), "postgres://user@127.0.0.1:1/loops");
        assert!(!format!("{locator:?}").contains("secret"));
        let error = locator.open(Access::ReadOnly).err().unwrap().to_string();
        assert!(
            error.contains("postgres://user@127.0.0.1:1/loops"),
            "{error}"
        );
        assert!(error.contains("unavailable"), "{error}");
        assert!(!error.contains("secret"), "{error}");
        assert_eq!(password("postgres://u:p%40ss@h/db"), Some("p%40ss"));
        assert_eq!(
            password("postgres://h/db?sslmode=disable&password=pw"),
            Some("pw")
        );
        assert_eq!(password("postgres://u@h/db"), None);
        let query = Locator::parse("postgresql://h/db?password=secret").unwrap();
        assert!(!query.to_string().contains("secret"), "{query}");
    }

    #[test]
    fn an_unknown_scheme_is_refused_by_name() {
        let error = Locator::parse("mysql://root:secret@h/db")
            .unwrap_err()
            .to_string();
        assert!(error.contains("\"mysql\""), "{error}");
        assert!(!error.contains("secret"), "{error}");
        assert!(Locator::parse("").is_err());
        assert!(Locator::parse("sqlite:").is_err());
    }
}
