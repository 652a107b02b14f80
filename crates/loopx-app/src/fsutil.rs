//! File-system primitives with the guarantees loopx relies on: durable
//! replacement, private creation, and reads that never follow a symlink
//! out of the loop directory. The system calls under them (`O_NOFOLLOW`
//! opens, the `openat` step of a confined walk) are
//! [`crate::platform`]'s, as every libc call is.

use anyhow::{Context as _, Result};
use loopx_core::path::{FileProblem, LoopPath};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Replace `path` with `bytes` so that readers see the old or the new file,
/// never a torn one, and the new one survives a power cut.
pub fn write_durable(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, true, false)
}

/// As [`write_durable`], readable by the owner only (mode 0600 from its
/// creation on, never widened in between): for files that hold what an
/// agent or a reviewer saw or said.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, true, true)
}

/// As [`write_durable`] without the fsync: for derived views, which the
/// next write regenerates anyway. Readers still see the old or the new
/// file, never a torn one; after a power cut the view may be the old one,
/// or empty (see [`replace_in`]), until the next write.
pub fn write_view(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, false, false)
}

/// [`write_view`] for several views in the directory `dir` at once, each
/// `(file name, bytes)`, after a commit: a view whose file already holds
/// exactly its bytes is left alone (no write, no rename), and one scan of
/// `dir` for stale temporaries serves every view written. Returns each
/// view's outcome, in order.
pub fn write_views<'a>(dir: &Path, views: &[(&'a str, &[u8])]) -> Vec<(&'a str, Result<()>)> {
    let changed: Vec<_> = views
        .iter()
        .filter(|(name, bytes)| !holds_exactly(&dir.join(name), bytes))
        .collect();
    if !changed.is_empty() {
        let prefixes: Vec<String> = changed
            .iter()
            .map(|(name, _)| temporary_prefix(name))
            .collect();
        remove_stale_temporaries(dir, &prefixes);
    }
    views
        .iter()
        .map(|(name, bytes)| {
            let outcome = if changed.iter().any(|(n, _)| n == name) {
                replace_in(dir, name, bytes, false)
            } else {
                Ok(())
            };
            (*name, outcome)
        })
        .collect()
}

/// True when `path` is a regular file (not a link) of exactly `bytes`.
/// Anything else (missing, a symlink, a directory, unreadable) is false:
/// replacing owns what to do about it.
fn holds_exactly(path: &Path, bytes: &[u8]) -> bool {
    match path.symlink_metadata() {
        Ok(meta) if meta.is_file() && meta.len() == bytes.len() as u64 => {
            read_no_follow(path).is_ok_and(|existing| existing == bytes)
        }
        _ => false,
    }
}

fn temporary_prefix(name: &str) -> String {
    format!(".{name}.tmp-")
}

fn replace(path: &Path, bytes: &[u8], sync: bool, private: bool) -> Result<()> {
    let parent = path
        .parent()
        .context("a file to write has a parent directory")?;
    let name = path
        .file_name()
        .context("a file to write has a name")?
        .to_string_lossy();
    remove_stale_temporaries(parent, &[temporary_prefix(&name)]);
    replace_with(parent, &name, bytes, sync, private)
}

/// Replace `dir/name` through a temporary `.<name>.tmp-<pid>`. The
/// temporary file is created exclusively, so a pre-planted symlink at its
/// name is never written through; one left by an earlier process of the
/// same pid is removed and the creation tried once more.
///
/// A durable write (`sync`) is synced, then renamed over the old file. A
/// view is swapped with the old file in one step where the platform can
/// ([`crate::platform::exchange`]), then the old file (now the temporary)
/// is removed: a rename over an existing file makes ext4 allocate and
/// start writing the new file's blocks at once (`auto_da_alloc`, 0.1 ms
/// on a quiet disk, milliseconds behind other writers), which a swap does
/// not. The price: until the kernel writes the view back (seconds), a
/// power cut may leave it empty, where a rename would leave the old or
/// the new text. A view is derived and the next write regenerates it; the
/// store is never written this way.
fn replace_in(dir: &Path, name: &str, bytes: &[u8], sync: bool) -> Result<()> {
    replace_with(dir, name, bytes, sync, false)
}

/// [`replace_in`], created with mode 0600 when `private`.
fn replace_with(dir: &Path, name: &str, bytes: &[u8], sync: bool, private: bool) -> Result<()> {
    let path = dir.join(name);
    let temporary = dir.join(format!("{}{}", temporary_prefix(name), std::process::id()));
    let create = || {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if private {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        #[cfg(not(unix))]
        let _ = private;
        options.open(&temporary)
    };
    let mut file = match create() {
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = fs::remove_file(&temporary);
            create()
        }
        other => other,
    }
    .with_context(|| format!("cannot write {}", temporary.display()))?;
    let written = file
        .write_all(bytes)
        .and_then(|()| if sync { file.sync_data() } else { Ok(()) })
        .with_context(|| format!("cannot write {}", temporary.display()));
    drop(file);
    let replaced = written.and_then(|()| {
        if sync {
            rename(&temporary, &path)
        } else {
            swap_in(&temporary, &path)
        }
    });
    if replaced.is_err() {
        // A full disk or a directory in the way: leave no half-written
        // temporary behind.
        let _ = fs::remove_file(&temporary);
    }
    replaced
}

fn rename(temporary: &Path, path: &Path) -> Result<()> {
    fs::rename(temporary, path).with_context(|| format!("cannot replace {}", path.display()))
}

/// Swap the written `temporary` with the file at `path` and remove what
/// it then names (the old file); a plain rename where there is no old
/// file or the platform cannot swap.
fn swap_in(temporary: &Path, path: &Path) -> Result<()> {
    use std::io::ErrorKind::{InvalidInput, NotFound, Unsupported};
    match crate::platform::exchange(temporary, path) {
        Ok(()) => {}
        Err(error) if matches!(error.kind(), NotFound | Unsupported | InvalidInput) => {
            return rename(temporary, path);
        }
        Err(error) => {
            return Err(error).with_context(|| format!("cannot replace {}", path.display()))
        }
    }
    if let Err(error) = fs::remove_file(temporary) {
        // What was swapped out is no file (a directory in the view's
        // place): swap it back and refuse, as a rename would have.
        let _ = crate::platform::exchange(temporary, path);
        return Err(error).with_context(|| {
            format!(
                "cannot replace {}: it is not a regular file",
                path.display()
            )
        });
    }
    Ok(())
}

/// Remove the temporary files `<prefix><pid>` that a writer killed between
/// creating and renaming them left behind. Only those of processes that no
/// longer exist: a live writer's file is its to rename. Best effort: a file
/// that cannot be removed now is removed by a later write.
fn remove_stale_temporaries(dir: &Path, prefixes: &[String]) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| {
            prefixes
                .iter()
                .find_map(|prefix| n.strip_prefix(prefix.as_str()))
                .and_then(|pid| pid.parse::<u32>().ok())
        }) else {
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
    // O_NOFOLLOW closes the gap between the caller's symlink check and
    // this open.
    let mut bytes = Vec::new();
    crate::platform::open_untrusted(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `root/parts...`, each level a real directory (created private when
/// missing), none reached through a symlink: where the host writes into a
/// folder of the loop directory that an agent's turn could have replaced
/// with a link to somewhere else.
pub fn private_dir_below(root: &Path, parts: &[&str]) -> Result<PathBuf> {
    let mut path = root.to_path_buf();
    for part in parts {
        path.push(part);
        match path.symlink_metadata() {
            Ok(meta) if meta.is_dir() && !meta.file_type().is_symlink() => continue,
            Ok(_) => anyhow::bail!(
                "{} must be a real directory, not a symlink or a file",
                path.display()
            ),
            Err(_) => {}
        }
        fs::create_dir(&path).with_context(|| format!("cannot create {}", path.display()))?;
        crate::platform::make_private_dir(&path)?;
    }
    Ok(path)
}

/// Create a directory (and parents) readable only by its owner.
pub fn create_private_dir(path: &Path) -> Result<()> {
    fs::create_dir_all(path).with_context(|| format!("cannot create {}", path.display()))?;
    crate::platform::make_private_dir(path)?;
    Ok(())
}

/// A new directory `<prefix>-<pid>-<random>` under the system's temporary
/// directory that only this user can enter. Created, never reused: a name
/// that already exists (one another user may have planted) is passed over
/// for another.
pub fn create_private_temp_dir(prefix: &str) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt as _;
    let base = std::env::temp_dir();
    for _ in 0..16 {
        let path = base.join(format!(
            "{prefix}-{}-{:016x}",
            std::process::id(),
            crate::platform::random_u64()
        ));
        match fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot create a directory in {}", base.display()))
            }
        }
    }
    anyhow::bail!("cannot find a free directory name in {}", base.display())
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
    let file = open_lock_file(path)?;
    file.lock()
        .with_context(|| format!("cannot lock {}", path.display()))?;
    Ok(Lock(file))
}

fn open_lock_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open lock file {}", path.display()))
}

/// Take the exclusive lock on `path` if no other process holds it: the
/// open file holds it for as long as it lives, and it dies with the
/// process (a dead holder never blocks the next). `None`: held elsewhere.
pub fn try_lock(path: &Path) -> Result<Option<File>> {
    let file = open_lock_file(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(error).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

/// Read at most `limit` bytes of `path` (any file the user named, a pipe
/// included); a longer input is refused rather than read to the end, so
/// `--document /dev/zero` fails at once instead of filling memory.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() as u64 > limit {
        anyhow::bail!(
            "{} is larger than the {limit}-byte limit for this input: nothing was read further and nothing was written; pass a smaller file",
            path.display()
        );
    }
    Ok(bytes)
}

/// Open the regular file `path` names below `root`, one component at a
/// time, following no symlink on the way (not even in a directory name)
/// and refusing a directory, FIFO, socket or device at the end. This is
/// the only way loopx opens a file whose name came from state or from an
/// agent; [`LoopPath`] has already ruled out `.`, `..` and absolute paths.
pub fn open_confined(root: &Path, path: &LoopPath) -> Result<File, FileProblem> {
    let names: Vec<&str> = path.components().collect();
    let mut parent = File::open(root).map_err(|e| FileProblem::Unreadable(e.to_string()))?;
    for (index, name) in names.iter().enumerate() {
        let last = index + 1 == names.len();
        let child = crate::platform::open_child(&parent, name, last)?;
        if last {
            let meta = child
                .metadata()
                .map_err(|e| FileProblem::Unreadable(e.to_string()))?;
            if !meta.is_file() {
                return Err(FileProblem::NotARegularFile);
            }
            return Ok(child);
        }
        parent = child;
    }
    unreachable!("a LoopPath has at least one component")
}

/// [`open_confined`], then read at most `limit` bytes: a larger file is
/// [`FileProblem::TooLarge`], found without reading it whole.
pub fn read_confined(root: &Path, path: &LoopPath, limit: u64) -> Result<Vec<u8>, FileProblem> {
    let file = open_confined(root, path)?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FileProblem::Unreadable(e.to_string()))?;
    if bytes.len() as u64 > limit {
        return Err(FileProblem::TooLarge { limit });
    }
    Ok(bytes)
}

/// [`open_confined`], then read the last `max` bytes (a log's tail)
/// without reading what comes before them.
pub fn tail_confined(root: &Path, path: &LoopPath, max: u64) -> Result<Vec<u8>, FileProblem> {
    use std::io::{Seek, SeekFrom};
    let mut file = open_confined(root, path)?;
    let unreadable = |e: std::io::Error| FileProblem::Unreadable(e.to_string());
    let len = file.metadata().map_err(unreadable)?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(max)))
        .map_err(unreadable)?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).map_err(unreadable)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_private_temporary_directory_is_new_and_the_owners_alone() {
        let a = create_private_temp_dir("loopx-test").unwrap();
        let b = create_private_temp_dir("loopx-test").unwrap();
        assert_ne!(a, b);
        for dir in [&a, &b] {
            let meta = fs::symlink_metadata(dir).unwrap();
            assert!(meta.is_dir());
            assert_eq!(meta.permissions().mode() & 0o777, 0o700);
            assert_eq!(fs::read_dir(dir).unwrap().count(), 0);
            fs::remove_dir(dir).unwrap();
        }
    }
}
