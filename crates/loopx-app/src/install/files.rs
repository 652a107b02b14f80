//! The installers' file IO, all of it: reading a target (never through a
//! symlink), the manifests that let `uninstall` give back a file's exact
//! bytes, planning every change before the first write, dry-run diffs,
//! the atomic writes, and putting back what was written when a later
//! write fails (so an install or uninstall is whole or not at all, or says
//! exactly which file it could not put back). What each change is comes
//! from the pure [`super::Edit`] rules.

use super::{components, Component, Found, Places, Scope, Source, Target};
use crate::fsutil;
use anyhow::{bail, Context as _, Result};
use loopx_core::digest::Digest;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A file's bytes before loopx's first install and what install wrote,
/// so that `uninstall` can give the bytes back exactly.
#[derive(Serialize, Deserialize)]
struct Manifest {
    path: PathBuf,
    /// `None`: install created the file.
    original: Option<String>,
    installed: Digest,
    /// Directories install created for the file, deepest first.
    created_dirs: Vec<PathBuf>,
}

fn manifest_path(places: &Places, path: &Path) -> PathBuf {
    let digest = Digest::of_bytes(path.as_os_str().as_encoded_bytes());
    places.state.join("installs").join(format!(
        "{}.json",
        &digest.as_str()["sha256:".len()..][..24]
    ))
}

fn read_manifest(places: &Places, path: &Path) -> Option<Manifest> {
    let bytes = fsutil::read_no_follow(&manifest_path(places, path)).ok()?;
    serde_json::from_slice::<Manifest>(&bytes)
        .ok()
        .filter(|m| m.path == path)
}

/// The text at `path`, `None` when there is no file. Refuses a symlink:
/// following one would read (and a merge then rewrite) a file the user
/// never named.
fn read_target(path: &Path) -> Result<Option<String>> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        Ok(meta) if meta.file_type().is_symlink() => bail!(
            "{} is a symbolic link: loopx does not write through links; edit the file it points to by hand, or replace the link with a file",
            path.display()
        ),
        Ok(meta) if !meta.is_file() => bail!("{} is not a regular file", path.display()),
        Ok(_) => {}
    }
    let bytes =
        fsutil::read_no_follow(path).with_context(|| format!("cannot read {}", path.display()))?;
    String::from_utf8(bytes)
        .map(Some)
        .with_context(|| format!("{} is not UTF-8 text", path.display()))
}

/// Read a component's file for a readback (doctor): never fails, an
/// unreadable file reads as absent.
pub fn read_for_inspection(path: &Path) -> Option<String> {
    read_target(path).ok().flatten()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Created,
    Updated,
    Unchanged,
    /// Uninstall gave back the bytes from before the install.
    Restored,
    /// Uninstall removed loopx's entry; the rest of the file stays.
    Unmerged,
    Removed,
    Absent,
}

#[derive(Debug, Serialize)]
pub struct FileChange {
    pub component: &'static str,
    pub path: String,
    pub action: Action,
    /// The unified diff of the change (only with a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

/// What `install` or `uninstall` did (or, with a dry run, would do).
#[derive(Debug, Serialize)]
pub struct InstallView {
    pub target: Target,
    pub scope: Scope,
    pub dry_run: bool,
    pub changed: bool,
    pub files: Vec<FileChange>,
    /// What the runtime still needs before it reads what was installed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

pub struct Request<'a> {
    pub target: Target,
    pub scope: Scope,
    pub places: &'a Places,
    pub source: &'a Source,
    pub dry_run: bool,
}

impl Request<'_> {
    fn components(&self) -> Vec<Component> {
        components(self.target, self.scope, self.places, self.source)
    }
}

/// One file's planned change: its new text (`None`: remove the file).
struct Planned {
    component: &'static str,
    path: PathBuf,
    before: Option<String>,
    after: Option<String>,
    action: Action,
    manifest: Option<Manifest>,
}

/// Install `target` in `scope`. Every file is read and every merge
/// computed before the first write, so a refusal writes nothing.
pub fn install(request: &Request) -> Result<InstallView> {
    let mut plans = Vec::new();
    for component in request.components() {
        let before = read_target(&component.path)?;
        let after = component
            .edit
            .merge(before.as_deref(), &component.path, request.source)?;
        let action = match &before {
            None => Action::Created,
            Some(text) if *text == after => Action::Unchanged,
            Some(_) => Action::Updated,
        };
        // The bytes to give back on uninstall: kept from the first install
        // while the file is still what install wrote, else the file as it
        // is without loopx's entry.
        let original = match (&before, read_manifest(request.places, &component.path)) {
            (Some(text), Some(m)) if m.installed == Digest::of_bytes(text.as_bytes()) => {
                (m.original, m.created_dirs)
            }
            (Some(text), _) => match component.edit.inspect(Some(text)) {
                Found::Installed { .. } => {
                    (component.edit.unmerge(text, &component.path)?, Vec::new())
                }
                _ => (Some(text.clone()), Vec::new()),
            },
            (None, _) => (None, missing_dirs(&component.path)),
        };
        let manifest = Manifest {
            path: component.path.clone(),
            original: original.0,
            installed: Digest::of_bytes(after.as_bytes()),
            created_dirs: original.1,
        };
        plans.push(Planned {
            component: component.name,
            path: component.path,
            before,
            after: Some(after),
            action,
            manifest: Some(manifest),
        });
    }
    finish(request, plans, true)
}

/// Remove what `install` added for `target` in `scope`.
pub fn uninstall(request: &Request) -> Result<InstallView> {
    let mut plans = Vec::new();
    for component in request.components() {
        let before = read_target(&component.path)?;
        let manifest = read_manifest(request.places, &component.path);
        let (after, action) = match &before {
            None => (None, Action::Absent),
            Some(text)
                if !matches!(component.edit.inspect(Some(text)), Found::Installed { .. }) =>
            {
                (Some(text.clone()), Action::Absent)
            }
            Some(text) => match &manifest {
                Some(m) if m.installed == Digest::of_bytes(text.as_bytes()) => match &m.original {
                    Some(original) => (Some(original.clone()), Action::Restored),
                    None => (None, Action::Removed),
                },
                _ => match component.edit.unmerge(text, &component.path)? {
                    Some(rest) => (Some(rest), Action::Unmerged),
                    None => (None, Action::Removed),
                },
            },
        };
        plans.push(Planned {
            component: component.name,
            path: component.path,
            before,
            after,
            action,
            manifest,
        });
    }
    finish(request, plans, false)
}

fn finish(request: &Request, plans: Vec<Planned>, installing: bool) -> Result<InstallView> {
    let mut files = Vec::new();
    for plan in &plans {
        let diff = (request.dry_run && plan.before != plan.after).then(|| {
            unified_diff(
                &plan.path,
                plan.before.as_deref().unwrap_or(""),
                plan.after.as_deref().unwrap_or(""),
            )
        });
        files.push(FileChange {
            component: plan.component,
            path: plan.path.display().to_string(),
            action: plan.action,
            diff,
        });
    }
    let changed = plans.iter().any(|p| p.before != p.after);
    if !request.dry_run {
        let mut written = Vec::new();
        for plan in plans {
            let path = plan.path.clone();
            if let Err(error) = apply(request.places, plan, installing, &mut written) {
                return Err(undo(written, &path, error));
            }
        }
    }
    // Codex reads a project's config only once it trusts the project,
    // and runs a hook only once a person trusted it.
    let notes = if installing && request.target == Target::Codex {
        super::codex::notes(request.scope, request.places)
    } else {
        Vec::new()
    };
    Ok(InstallView {
        target: request.target,
        scope: request.scope,
        dry_run: request.dry_run,
        changed,
        files,
        notes,
    })
}

/// One file an install or uninstall changed, as it was before: what
/// [`undo`] puts back when a later change fails.
struct Written {
    path: PathBuf,
    /// `None`: the file did not exist.
    before: Option<Vec<u8>>,
    /// Directories created for it, deepest first.
    created_dirs: Vec<PathBuf>,
}

/// Write `bytes` to `path` (`None`: remove it), creating its directory
/// (private when `private_dir`), and note in `written` what it was. A
/// change that fails takes away the directories it made and notes nothing.
fn change(
    path: &Path,
    bytes: Option<&[u8]>,
    private_dir: bool,
    written: &mut Vec<Written>,
) -> Result<()> {
    let before = match fsutil::read_no_follow(path) {
        Ok(bytes) => Some(bytes),
        Err(_) if path.symlink_metadata().is_err() => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let created_dirs = missing_dirs(path);
    let parent = path.parent().expect("installed files have a directory");
    let created = match private_dir {
        true => fsutil::create_private_dir(parent),
        false => std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display())),
    };
    let changed = created.and_then(|()| match bytes {
        Some(bytes) => fsutil::write_durable(path, bytes),
        None => {
            std::fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()))
        }
    });
    match changed {
        Ok(()) => written.push(Written {
            path: path.to_owned(),
            before,
            created_dirs,
        }),
        Err(_) => remove_dirs(&created_dirs),
    }
    changed
}

/// Remove each of `dirs` (deepest first) while nothing else is in it.
fn remove_dirs(dirs: &[PathBuf]) {
    for dir in dirs {
        let _ = std::fs::remove_dir(dir);
    }
}

/// Put back every file in `written`, newest first, after the change of
/// `failed` failed with `error`: the error then says it failed, and that
/// every earlier change was put back, or exactly which were not.
fn undo(written: Vec<Written>, failed: &Path, error: anyhow::Error) -> anyhow::Error {
    let mut put_back = Vec::new();
    let mut left = Vec::new();
    for file in written.into_iter().rev() {
        let restored = match &file.before {
            Some(bytes) => file
                .path
                .parent()
                .map_or(Ok(()), |p| std::fs::create_dir_all(p).map_err(Into::into))
                .and_then(|()| fsutil::write_durable(&file.path, bytes)),
            None => match std::fs::remove_file(&file.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
                _ => Ok(()),
            },
        };
        remove_dirs(&file.created_dirs);
        let name = file.path.display().to_string();
        match restored {
            Ok(()) => put_back.push(name),
            Err(e) => left.push(format!("{name} ({e:#})")),
        }
    }
    let done = match put_back.is_empty() {
        true => "nothing had been written before it".to_owned(),
        false => format!(
            "what was written before it was put back as it was: {}",
            put_back.join(", ")
        ),
    };
    match left.is_empty() {
        true => error.context(format!(
            "cannot write {}; {done}; nothing is changed: make the file writable, then run the command again",
            failed.display()
        )),
        false => error.context(format!(
            "cannot write {}; {done}; but these were written and could NOT be put back, fix them by hand: {}",
            failed.display(),
            left.join(", ")
        )),
    }
}

fn apply(
    places: &Places,
    plan: Planned,
    installing: bool,
    written: &mut Vec<Written>,
) -> Result<()> {
    let manifest_at = manifest_path(places, &plan.path);
    if installing {
        if plan.before == plan.after {
            return Ok(());
        }
        let after = plan.after.expect("install writes every file");
        // The manifest first: an install interrupted after it still has
        // the original bytes on record.
        let manifest = plan.manifest.expect("install plans a manifest");
        let manifest = serde_json::to_vec_pretty(&manifest)?;
        change(&manifest_at, Some(&manifest), true, written)?;
        return change(&plan.path, Some(after.as_bytes()), false, written);
    }
    if plan.action == Action::Absent {
        return Ok(());
    }
    match &plan.after {
        Some(text) => change(&plan.path, Some(text.as_bytes()), false, written)?,
        None => {
            change(&plan.path, None, false, written)?;
            // The directories install created, while nothing else is in them.
            let created = plan
                .manifest
                .as_ref()
                .map(|m| m.created_dirs.clone())
                .unwrap_or_else(|| {
                    // Without a manifest: the skill's own folder only.
                    plan.path
                        .parent()
                        .map(|p| vec![p.to_path_buf()])
                        .unwrap_or_default()
                });
            remove_dirs(&created);
        }
    }
    if manifest_at.symlink_metadata().is_ok() {
        change(&manifest_at, None, true, written)?;
    }
    // Leave no empty `installs/` behind once nothing is installed.
    if let Some(dir) = manifest_at.parent() {
        let _ = std::fs::remove_dir(dir);
    }
    Ok(())
}

/// The directories above `path` that do not exist yet, deepest first.
fn missing_dirs(path: &Path) -> Vec<PathBuf> {
    path.ancestors()
        .skip(1)
        .take_while(|dir| !dir.exists())
        .map(Path::to_path_buf)
        .collect()
}

fn unified_diff(path: &Path, before: &str, after: &str) -> String {
    let name = path.display().to_string();
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a{name}"), &format!("b{name}"))
        .to_string()
}
