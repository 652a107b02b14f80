//! File-system primitives with the guarantees loopx relies on. Platform
//! detail stays here.

use anyhow::{Context as _, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

/// Replace `path` with `bytes` so that readers see the old or the new file,
/// never a torn one, and the new one survives a power cut.
pub fn write_durable(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, true)
}

/// As [`write_durable`] without the fsync: for derived views, which the
/// next write regenerates anyway.
pub fn write_view(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, false)
}

/// The temporary file is created exclusively, so a pre-planted symlink at
/// its name is never written through.
fn replace(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let parent = path
        .parent()
        .context("a file to write has a parent directory")?;
    let name = path
        .file_name()
        .context("a file to write has a name")?
        .to_string_lossy();
    let prefix = format!(".{name}.tmp-");
    remove_stale_temporaries(parent, &prefix);
    let temporary = parent.join(format!("{prefix}{}", std::process::id()));
    let _ = fs::remove_file(&temporary);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    let written = file
        .write_all(bytes)
        .and_then(|()| if sync { file.sync_data() } else { Ok(()) })
        .with_context(|| format!("cannot write {}", temporary.display()));
    drop(file);
    let replaced = written.and_then(|()| {
        fs::rename(&temporary, path).with_context(|| format!("cannot replace {}", path.display()))
    });
    if replaced.is_err() {
        // A full disk or a directory in the way: leave no half-written
        // temporary behind.
        let _ = fs::remove_file(&temporary);
    }
    replaced
}

/// Remove the temporary files `<prefix><pid>` that a writer killed between
/// creating and renaming them left behind. Only those of processes that no
/// longer exist: a live writer's file is its to rename. Best effort: a file
/// that cannot be removed now is removed by a later write.
fn remove_stale_temporaries(dir: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !crate::platform::alive(pid) {
            // remove_file never follows a symlink: a planted link is
            // removed itself, its target left alone.
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Read a file that must not be a symlink.
pub fn read_no_follow(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NOFOLLOW closes the gap between the caller's symlink check and
        // this open.
        options.custom_flags(libc::O_NOFOLLOW);
    }
    let mut bytes = Vec::new();
    options.open(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Create a directory (and parents) readable only by its owner.
pub fn create_private_dir(path: &Path) -> Result<()> {
    fs::create_dir_all(path).with_context(|| format!("cannot create {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Create the loop directory (and its parents) for `init`. A new loop
/// directory is the owner's alone (0700); an existing one that every user
/// may write is refused, since whoever can write it can replace any view
/// or plant a symlink where loopx will write.
pub fn create_loop_dir(path: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    match fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot create loop directory {}", path.display()))
        }
    }
    let meta = fs::metadata(path)
        .with_context(|| format!("cannot read loop directory {}", path.display()))?;
    if !meta.is_dir() {
        anyhow::bail!(
            "{} exists and is not a directory: choose another --dir",
            path.display()
        );
    }
    let mode = meta.permissions().mode();
    if mode & 0o002 != 0 {
        anyhow::bail!(
            "the loop directory {} is writable by every user (mode {:o}); run `chmod o-w {}` (or choose another --dir) and init again; nothing was changed",
            path.display(),
            mode & 0o7777,
            path.display()
        );
    }
    Ok(())
}

/// An exclusive advisory lock held for as long as the value lives.
pub struct Lock(#[allow(dead_code)] File);

pub fn lock(path: &Path) -> Result<Lock> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open lock file {}", path.display()))?;
    file.lock()
        .with_context(|| format!("cannot lock {}", path.display()))?;
    Ok(Lock(file))
}
