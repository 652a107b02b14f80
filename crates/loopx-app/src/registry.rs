//! The per-user loop registry under the user's state directory
//! (`$XDG_STATE_HOME/loopx/`, else `~/.local/state/loopx/`), never inside
//! a project: one JSON file per armed loop in `armed/`, one per loop
//! `init` created on this machine in `created/`, and one per loop a driver
//! ran here in `driven/`.
//!
//! Owns: where the registry is, its files, and which of them a listing may
//! trust (a directory or file another user could have written is not read).
//! Does not own: what an armed loop forces (`loopx_core::hook`,
//! `crate::arming`) or how a listed loop is judged (`crate::all_loops`).

use crate::{fsutil, platform};
use anyhow::{Context as _, Result};
use jiff::Timestamp;
use loopx_core::hook::{ArmedLoop, BlockStreak};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The environment variable that moves the registry (what
/// `--registry-dir` defaults to), for processes that take no such flag.
pub const REGISTRY_DIR_ENV: &str = "LOOPX_REGISTRY_DIR";

/// A registry file is a few hundred bytes; anything much larger was not
/// written by loopx and is not read.
const MAX_ENTRY_BYTES: u64 = 64 * 1024;

/// A loop `init` created or a driver ran on this machine: written when
/// `loopx init` creates it and each time `loopx drive` starts on it, kept
/// after, so the all-loops page lists every loop made here, armed or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotedLoop {
    pub run_id: String,
    /// Absolute, resolved loop directory.
    pub loop_dir: String,
    /// When it was created, or when a driver last started on it.
    #[serde(alias = "driven_at")]
    pub noted_at: Timestamp,
}

/// How a loop came to be registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Armed,
    Created,
    Driven,
}

/// One registry file a listing may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub run_id: String,
    pub loop_dir: String,
    pub source: Source,
}

/// Every trusted entry, armed and driven, and why each other file or
/// directory was passed over.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub entries: Vec<Registered>,
    pub passed_over: Vec<String>,
}

pub struct Registry {
    base: PathBuf,
}

impl Registry {
    /// `explicit` (from `--registry-dir` / `LOOPX_REGISTRY_DIR`) or the
    /// user's state directory.
    pub fn locate(explicit: Option<&Path>) -> Result<Self> {
        let base = match explicit {
            Some(path) => path.to_path_buf(),
            None => match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
                Some(state) => PathBuf::from(state).join("loopx"),
                None => PathBuf::from(
                    std::env::var_os("HOME")
                        .context("neither XDG_STATE_HOME nor HOME is set: pass --registry-dir")?,
                )
                .join(".local/state/loopx"),
            },
        };
        Ok(Registry { base })
    }

    /// The registry a process without a `--registry-dir` flag uses (the
    /// driver): [`REGISTRY_DIR_ENV`] if set, else the user's state
    /// directory.
    pub fn from_env() -> Result<Self> {
        let explicit = std::env::var_os(REGISTRY_DIR_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        Self::locate(explicit.as_deref())
    }

    pub fn display(&self) -> String {
        self.base.display().to_string()
    }

    /// The user's loopx state directory the registry lives in; other
    /// per-user records (the installers' manifests) live beside it.
    pub fn state_dir(&self) -> &Path {
        &self.base
    }

    fn armed_dir(&self) -> PathBuf {
        self.noted_dir(Source::Armed)
    }

    fn entry_path(&self, run_id: &str) -> PathBuf {
        self.armed_dir().join(format!("{run_id}.json"))
    }

    /// Hold the registry lock while reading and rewriting entries, so two
    /// `arm` calls cannot both see "nothing armed here".
    pub fn lock(&self) -> Result<fsutil::Lock> {
        fsutil::create_private_dir(&self.armed_dir())?;
        fsutil::lock(&self.base.join("registry.lock"))
    }

    /// Every readable entry, in file-name order, and the names of the files
    /// that could not be read. A missing registry is an empty one.
    pub fn entries(&self) -> (Vec<ArmedLoop>, Vec<String>) {
        let mut names: Vec<PathBuf> = match std::fs::read_dir(self.armed_dir()) {
            Ok(dir) => dir
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect(),
            Err(_) => return (Vec::new(), Vec::new()),
        };
        names.sort();
        let mut entries = Vec::new();
        let mut unreadable = Vec::new();
        for path in names {
            let parsed = fsutil::read_no_follow(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<ArmedLoop>(&bytes).ok());
            match parsed {
                Some(entry) => entries.push(entry),
                None => unreadable.push(path.display().to_string()),
            }
        }
        (entries, unreadable)
    }

    pub fn write(&self, entry: &ArmedLoop) -> Result<PathBuf> {
        let path = self.entry_path(&entry.run_id);
        let mut text = serde_json::to_string_pretty(entry)?;
        text.push('\n');
        fsutil::write_durable(&path, text.as_bytes())?;
        Ok(path)
    }

    fn streak_path(&self, run_id: &str) -> PathBuf {
        self.base.join("blocks").join(format!("{run_id}.json"))
    }

    /// The Stop hook's current block streak for a loop (none if unreadable).
    pub fn streak(&self, run_id: &str) -> Option<BlockStreak> {
        let bytes = fsutil::read_no_follow(&self.streak_path(run_id)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    pub fn save_streak(&self, run_id: &str, streak: &BlockStreak) -> Result<()> {
        let path = self.streak_path(run_id);
        fsutil::create_private_dir(path.parent().context("a streak file has a directory")?)?;
        fsutil::write_durable(&path, serde_json::to_string(streak)?.as_bytes())
    }

    /// The directory of the entries a source other than arming writes.
    fn noted_dir(&self, source: Source) -> PathBuf {
        self.base.join(match source {
            Source::Armed => "armed",
            Source::Created => "created",
            Source::Driven => "driven",
        })
    }

    /// The file that records that `source` (init, a driver) noted `run_id`.
    pub fn noted_entry(&self, source: Source, run_id: &str) -> PathBuf {
        self.noted_dir(source).join(format!("{run_id}.json"))
    }

    /// Record that `source` noted the loop `run_id` at `loop_dir` (absolute
    /// and resolved). Rewriting it on every drive keeps `noted_at` fresh.
    pub fn note(&self, source: Source, entry: &NotedLoop) -> Result<PathBuf> {
        fsutil::create_private_dir(&self.base)?;
        fsutil::create_private_dir(&self.noted_dir(source))?;
        let path = self.noted_entry(source, &entry.run_id);
        let mut text = serde_json::to_string_pretty(entry)?;
        text.push('\n');
        fsutil::write_durable(&path, text.as_bytes())?;
        Ok(path)
    }

    /// The armed, created and driven entries a listing may show, in that
    /// order, each kind in file-name order.
    ///
    /// Another local user must not be able to add a loop to this list: a
    /// registry directory that is not this user's, or that others may
    /// write, is not read at all, and a file that is a symlink, not a
    /// regular file, not this user's or oversized is passed over. Every
    /// refusal is named in `passed_over`; none fails the listing.
    pub fn listing(&self) -> Listing {
        let mut listing = Listing::default();
        for source in [Source::Armed, Source::Created, Source::Driven] {
            let dir = self.noted_dir(source);
            let names = match trusted_dir_files(&dir) {
                Ok(names) => names,
                Err(problem) => {
                    listing.passed_over.push(problem);
                    continue;
                }
            };
            for path in names {
                let parsed = read_trusted(&path).and_then(|bytes| match source {
                    Source::Armed => serde_json::from_slice::<ArmedLoop>(&bytes)
                        .map(|e| (e.run_id, e.loop_dir))
                        .map_err(|e| format!("{}: not a registry entry ({e})", path.display())),
                    Source::Created | Source::Driven => serde_json::from_slice::<NotedLoop>(&bytes)
                        .map(|e| (e.run_id, e.loop_dir))
                        .map_err(|e| format!("{}: not a registry entry ({e})", path.display())),
                });
                match parsed {
                    Ok((run_id, loop_dir)) => listing.entries.push(Registered {
                        run_id,
                        loop_dir,
                        source,
                    }),
                    Err(problem) => listing.passed_over.push(problem),
                }
            }
        }
        listing
    }

    pub fn remove(&self, run_id: &str) -> Result<bool> {
        match std::fs::remove_file(self.entry_path(run_id)) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => {
                Err(e).with_context(|| format!("cannot remove the registry entry of {run_id}"))
            }
        }
    }
}

/// The `*.json` files of a registry directory this user owns and only this
/// user may write; a missing directory holds none. A refusal is the one
/// problem that names the directory.
fn trusted_dir_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: cannot read ({e})", dir.display())),
    };
    let me = platform::effective_uid();
    if !meta.is_dir() {
        return Err(format!(
            "{}: not a directory (a symlink is refused): remove it; loopx makes it again",
            dir.display()
        ));
    }
    if meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{}: belongs to uid {} with mode {:o}; only a directory of uid {me} that others cannot write is read: remove it, loopx makes it again",
            dir.display(),
            meta.uid(),
            meta.mode() & 0o777
        ));
    }
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: cannot read ({e})", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    Ok(names)
}

/// A registry file's bytes, if it is a regular file of this user's, not a
/// symlink, and small; else why not.
fn read_trusted(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    use std::os::unix::fs::MetadataExt as _;
    let shown = path.display();
    let file = platform::open_untrusted(path)
        .map_err(|e| format!("{shown}: cannot open ({e}; a symlink is refused)"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{shown}: cannot stat ({e})"))?;
    if !meta.is_file() || meta.uid() != platform::effective_uid() || meta.len() > MAX_ENTRY_BYTES {
        return Err(format!(
            "{shown}: not a regular file of this user's under {MAX_ENTRY_BYTES} bytes: passed over"
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_ENTRY_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: cannot read ({e})"))?;
    Ok(bytes)
}
