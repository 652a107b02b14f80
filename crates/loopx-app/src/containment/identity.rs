//! What a provider is on disk: its executable's real path and digest, and
//! one digest over its dependency closure (every file under its package
//! root, by path and content). Bounded: a root with more files or bytes
//! than a CLI package has is refused rather than hashed for minutes.
//!
//! Revalidation before each spawn rehashes only the files whose identity
//! (device, inode, size, change time) moved; the change time cannot be
//! set back by a process that is not root, so an edit is always seen.

use crate::AppError;
use loopx_core::containment::pin::{Identity, Pin};
use loopx_core::digest::{Digest, Hasher};
use std::collections::HashMap;
use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// The most files a dependency closure may hold.
const MAX_FILES: usize = 100_000;
/// The most bytes a dependency closure may hold.
const MAX_BYTES: u64 = 2 << 30;
/// How far up from the executable a package root (`package.json`) is
/// looked for before its own directory is taken as the root.
const ROOT_SEARCH_DEPTH: usize = 4;

/// A file's digest, and the identity it was computed for.
#[derive(Default)]
pub struct Cache {
    files: HashMap<PathBuf, (FileStamp, Digest)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    ctime: i64,
    ctime_nsec: i64,
    mtime: i64,
    mtime_nsec: i64,
}

impl FileStamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            ctime: meta.ctime(),
            ctime_nsec: meta.ctime_nsec(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        }
    }
}

impl Cache {
    /// The digest of the regular file `path` (`meta` its metadata).
    fn digest(&mut self, path: &Path, meta: &std::fs::Metadata) -> std::io::Result<Digest> {
        let stamp = FileStamp::of(meta);
        if let Some((seen, digest)) = self.files.get(path) {
            if *seen == stamp {
                return Ok(digest.clone());
            }
        }
        let digest = hash_file(path)?;
        self.files.insert(path.to_owned(), (stamp, digest.clone()));
        Ok(digest)
    }
}

fn hash_file(path: &Path) -> std::io::Result<Digest> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Hasher::default();
    let mut buffer = vec![0u8; 256 * 1024];
    loop {
        match file.read(&mut buffer)? {
            0 => return Ok(hasher.finish()),
            n => hasher.update(&buffer[..n]),
        }
    }
}

/// `pin`'s provider as it is on disk now.
pub fn identify(pin: &Pin, cache: &mut Cache) -> Result<Identity, AppError> {
    identify_path(
        Path::new(&pin.bin),
        pin.dependency_root.as_deref().map(Path::new),
        cache,
    )
}

/// The executable `binary` (links resolved) and the closure under `root`,
/// or under the package root found above it.
pub fn identify_path(
    binary: &Path,
    root: Option<&Path>,
    cache: &mut Cache,
) -> Result<Identity, AppError> {
    let unreadable = |what: &str, path: &Path, e: std::io::Error| {
        AppError::refused(format!("cannot attest {what} {}: {e}", path.display()))
    };
    let real = binary
        .canonicalize()
        .map_err(|e| unreadable("the provider binary", binary, e))?;
    let meta = std::fs::metadata(&real).map_err(|e| unreadable("the provider binary", &real, e))?;
    let sha256 = cache
        .digest(&real, &meta)
        .map_err(|e| unreadable("the provider binary", &real, e))?;
    let root = match root {
        Some(root) => root.to_owned(),
        None => package_root(&real),
    };
    if !real.starts_with(&root) {
        return Err(AppError::refused(format!(
            "the dependency root {} does not contain the provider binary {}",
            root.display(),
            real.display()
        )));
    }
    let closure =
        closure(&root, cache).map_err(|e| unreadable("the dependency closure under", &root, e))?;
    Ok(Identity {
        real_path: real.display().to_string(),
        sha256,
        root: root.display().to_string(),
        closure,
    })
}

/// The nearest directory above `binary` holding a `package.json` (how npm
/// installs a CLI), else the binary's own directory.
fn package_root(binary: &Path) -> PathBuf {
    let own = binary.parent().unwrap_or(Path::new("/")).to_owned();
    own.ancestors()
        .take(ROOT_SEARCH_DEPTH)
        .find(|dir| dir.join("package.json").is_file())
        .map_or(own.clone(), Path::to_owned)
}

/// One digest over every regular file under `root`: each file's path
/// relative to the root and its digest, in path order. Links are taken
/// as what they say (their target text), never followed.
fn closure(root: &Path, cache: &mut Cache) -> std::io::Result<Digest> {
    let mut entries: Vec<(PathBuf, String)> = Vec::new();
    let mut pending = vec![root.to_owned()];
    let mut bytes = 0u64;
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path)?;
            let relative = path.strip_prefix(root).unwrap_or(&path).to_owned();
            if meta.is_dir() {
                pending.push(path);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path)?;
                entries.push((relative, format!("link:{}", target.display())));
            } else if meta.is_file() {
                bytes += meta.len();
                entries.push((relative, cache.digest(&path, &meta)?.to_string()));
            }
            if entries.len() > MAX_FILES || bytes > MAX_BYTES {
                return Err(std::io::Error::other(format!(
                    "it holds more than {MAX_FILES} files or {} GiB; pin a narrower AAS_AUTOLOOP_ATTESTED_DEPENDENCY_ROOT_<PROVIDER>",
                    MAX_BYTES >> 30
                )));
            }
        }
    }
    entries.sort();
    let mut hasher = Hasher::default();
    for (path, digest) in &entries {
        hasher.update(path.as_os_str().as_encoded_bytes());
        hasher.update(b"\0");
        hasher.update(digest.as_bytes());
        hasher.update(b"\n");
    }
    Ok(hasher.finish())
}
