//! The armed-loop registry: one JSON file per armed loop under the user's
//! state directory (`$XDG_STATE_HOME/loopx/armed/`, else
//! `~/.local/state/loopx/armed/`), never inside a project.

use crate::fsutil;
use anyhow::{Context as _, Result};
use loopx_core::hook::{ArmedLoop, BlockStreak};
use std::path::{Path, PathBuf};

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

    pub fn display(&self) -> String {
        self.base.display().to_string()
    }

    /// The user's loopx state directory the registry lives in; other
    /// per-user records (the installers' manifests) live beside it.
    pub fn state_dir(&self) -> &Path {
        &self.base
    }

    fn armed_dir(&self) -> PathBuf {
        self.base.join("armed")
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
