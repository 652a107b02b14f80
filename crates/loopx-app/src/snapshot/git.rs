//! The git plumbing under workspace snapshots: `git` run as a child with
//! an explicit environment, always against a temporary index, so the
//! user's branch, index, stash and working tree are never written by a
//! snapshot (a restore writes the working tree only, path by path).
//!
//! Owns: how a tree of the workspace is made (the user's index copied as
//! a stat cache into a private index, `add -A` with loopx's own paths
//! excluded, `write-tree`), commits and refs on loopx's namespace, diffs
//! between two trees, and restoring the working tree to a tree. Every
//! output read is bounded.
//!
//! Not here: what is excluded, the ref names, when a rollback may run
//! (`loopx_core::driver::snapshot`).

use crate::platform;
use anyhow::{bail, Context as _, Result};
use loopx_core::driver::snapshot::{exclusions, DiffStat, Repository};
use std::io::{Read as _, Write as _};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

/// The most a git command may print before loopx stops reading (a list of
/// every path of a very large change fits).
const OUTPUT_CAP: u64 = 64 * 1024 * 1024;
/// The name of every private index, beside the user's.
const INDEX_PREFIX: &str = "loopx-index-";
/// How old a private index must be to count as left behind.
const STALE_INDEX: std::time::Duration = std::time::Duration::from_secs(3600);
/// The most of git's complaint an error quotes.
const STDERR_CAP: u64 = 4 * 1024;

/// What the project root is, asked of git.
pub fn probe(root: &Path) -> Repository {
    let git = |args: &[&str]| {
        base_command(root)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    if !git(&["rev-parse", "--is-inside-work-tree"]) {
        Repository::NotGit
    } else if !git(&["rev-parse", "--verify", "-q", "HEAD^{commit}"]) {
        Repository::NoCommits
    } else if git(&["check-ignore", "-q", "."]) {
        Repository::Ignored
    } else {
        Repository::Ready
    }
}

/// The `-c` arguments that turn off every content filter the repository's
/// configuration defines (`filter.<driver>.clean`, `.smudge`, `.process`).
/// An agent can write the work tree's `.git/config` and `.gitattributes`,
/// and git runs a filter for whoever adds or checks out a file: without
/// this, loopx's own `git` would run the agent's command outside the
/// turn's sandbox and scope. Snapshots are of the bytes as they are.
/// So does a merge driver, for whoever merges (the merge queue).
pub fn inert_filters(dir: &Path) -> Vec<String> {
    let listed = run(
        Workspace::at(
            dir,
            &[
                "config",
                "--name-only",
                "--get-regexp",
                r"^(filter|merge)\.",
            ],
        ),
        None,
        STDERR_CAP,
    );
    // None configured: `git config` exits 1, and there is nothing to turn off.
    let Ok(listed) = listed else {
        return Vec::new();
    };
    let keys = text(listed);
    let named = |prefix: &str, suffix: Option<&str>| -> Vec<String> {
        let mut names: Vec<String> = keys
            .lines()
            .filter_map(|key| {
                let rest = key.strip_prefix(prefix)?;
                let name = match suffix {
                    Some(suffix) => rest.strip_suffix(suffix)?,
                    None => rest.rsplit_once('.')?.0,
                };
                Some(name.to_owned())
            })
            .collect();
        names.sort();
        names.dedup();
        names
    };
    let filters = named("filter.", None);
    // A merge driver is a program git runs on a path both sides changed
    // (the merge queue merges what a worker wrote): made one that only
    // reports the conflict.
    let mergers = named("merge.", Some(".driver"));
    filters
        .iter()
        .flat_map(|driver| {
            ["clean", "smudge", "process"]
                .into_iter()
                .map(move |key| format!("filter.{driver}.{key}="))
                .chain([format!("filter.{driver}.required=false")])
        })
        .chain(
            mergers
                .iter()
                .map(|name| format!("merge.{name}.driver=false")),
        )
        .flat_map(|setting| ["-c".to_owned(), setting])
        .collect()
}

/// `git -C dir` with hooks, fsmonitor, commit signing and prompts off,
/// loopx's own identity, and no inherited repository or index override.
/// (What would run a program the work tree names: hooks, fsmonitor,
/// `gpg.program`, content filters ([`inert_filters`]), external diff and
/// textconv (`--no-ext-diff --no-textconv` where loopx diffs).)
fn base_command(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.quotePath=false",
            "-c",
            "gc.auto=0",
            "-c",
            "commit.gpgSign=false",
        ])
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "loopx")
        .env("GIT_AUTHOR_EMAIL", "loopx@localhost")
        .env("GIT_COMMITTER_NAME", "loopx")
        .env("GIT_COMMITTER_EMAIL", "loopx@localhost")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .stdin(Stdio::null());
    command
}

/// What a git command printed: at most `cap` bytes, and whether it had more.
struct Captured {
    stdout: Vec<u8>,
    truncated: bool,
}

/// Run `command`, feeding it `stdin`, reading at most `cap` bytes of its
/// output (a command that prints more is killed). A failure quotes the
/// start of its complaint.
fn run(mut command: Command, stdin: Option<Vec<u8>>, cap: u64) -> Result<Captured> {
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .context("cannot run git (is it installed?)")?;
    let feeder = child.stdin.take().zip(stdin).map(|(mut pipe, bytes)| {
        std::thread::spawn(move || {
            let _ = pipe.write_all(&bytes);
        })
    });
    let mut stderr_pipe = child.stderr.take().context("git's stderr")?;
    let complaint = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = (&mut stderr_pipe).take(STDERR_CAP).read_to_end(&mut text);
        // Drain the rest, so git never blocks on a full pipe.
        let _ = std::io::copy(&mut stderr_pipe, &mut std::io::sink());
        text
    });
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .context("git's stdout")?
        .take(cap + 1)
        .read_to_end(&mut stdout)?;
    let truncated = stdout.len() as u64 > cap;
    if truncated {
        stdout.truncate(cap as usize);
        let _ = child.kill();
    }
    let status = child.wait()?;
    if let Some(feeder) = feeder {
        let _ = feeder.join();
    }
    let complaint = complaint.join().unwrap_or_default();
    if !status.success() && !truncated {
        bail!(
            "git failed ({status}): {}",
            String::from_utf8_lossy(&complaint).trim()
        );
    }
    Ok(Captured { stdout, truncated })
}

fn text(captured: Captured) -> String {
    String::from_utf8_lossy(&captured.stdout).trim().to_owned()
}

/// A private index file in the repository's git directory, removed when
/// dropped. The user's own index is only ever read (copied from).
pub struct TempIndex(PathBuf);

impl TempIndex {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// A private copy of the index of the repository holding `root`, for a
/// porcelain probe to run against (`GIT_INDEX_FILE`): `git diff` writes
/// the stat data it refreshes into the index it reads, whatever
/// `GIT_OPTIONAL_LOCKS` says, and the user's index is not loopx's to
/// write. `None` outside a repository or without an index.
pub fn index_copy(root: &Path) -> Option<TempIndex> {
    let out = run(
        Workspace::at(root, &["rev-parse", "--absolute-git-dir"]),
        None,
        STDERR_CAP,
    )
    .ok()?;
    index_copy_in(&PathBuf::from(text(out)))
}

/// [`index_copy`] for a caller that knows the repository's git directory.
pub fn index_copy_in(git_dir: &Path) -> Option<TempIndex> {
    let index = git_dir.join("index");
    let copy = TempIndex(git_dir.join(format!("{INDEX_PREFIX}{}", platform::nonce())));
    std::fs::copy(&index, &copy.0).ok()?;
    Some(copy)
}

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(self.0.with_extension("lock"));
    }
}

/// A git work tree as loopx snapshots it.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The repository's top directory.
    top: PathBuf,
    /// The user's index (read as a stat cache, never written).
    index: PathBuf,
    /// loopx's own paths inside the work tree, relative to the top.
    own: Vec<String>,
    /// [`inert_filters`] of the repository, passed to every command.
    inert: Vec<String>,
}

/// A snapshot just taken: its commit, its tree and the HEAD it sits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub commit: String,
    pub tree: String,
    pub head: Option<String>,
}

/// How one path differs between two trees.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    /// `write` (the target has it, new or different) or `remove`.
    pub action: &'static str,
    pub path: String,
}

impl Workspace {
    /// The work tree holding `root`, with `own_paths` (the loop
    /// directory, ...) kept out of every snapshot.
    pub fn open(root: &Path, own_paths: &[impl AsRef<Path>]) -> Result<Workspace> {
        let top = PathBuf::from(text(run(
            Self::at(root, &["rev-parse", "--show-toplevel"]),
            None,
            STDERR_CAP,
        )?));
        let top = top.canonicalize().unwrap_or(top);
        let index = PathBuf::from(text(run(
            Self::at(&top, &["rev-parse", "--git-path", "index"]),
            None,
            STDERR_CAP,
        )?));
        let index = if index.is_absolute() {
            index
        } else {
            top.join(index)
        };
        let own = own_paths
            .iter()
            .filter_map(|path| {
                let path = path.as_ref();
                // A file that does not exist yet (a store's `-wal`) is
                // placed by its directory.
                let path = path.canonicalize().ok().or_else(|| {
                    let parent = path.parent()?.canonicalize().ok()?;
                    Some(parent.join(path.file_name()?))
                })?;
                let relative = path.strip_prefix(&top).ok()?;
                Some(relative.to_string_lossy().into_owned())
            })
            .filter(|relative| !relative.is_empty())
            .collect();
        let inert = inert_filters(&top);
        let workspace = Workspace {
            top,
            index,
            own,
            inert,
        };
        workspace.remove_stale_indexes();
        Ok(workspace)
    }

    /// Private indexes a killed loopx left behind (an hour old: no
    /// snapshot takes that long, so none is another one's in use).
    fn remove_stale_indexes(&self) {
        let Some(Ok(entries)) = self.index.parent().map(std::fs::read_dir) else {
            return;
        };
        let stale = |entry: &std::fs::DirEntry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with(INDEX_PREFIX)
                && entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|at| at.elapsed().ok())
                    .is_some_and(|age| age > STALE_INDEX)
        };
        for entry in entries.flatten().filter(stale) {
            let _ = std::fs::remove_file(entry.path());
        }
    }

    pub fn top(&self) -> &Path {
        &self.top
    }

    fn at(dir: &Path, args: &[&str]) -> Command {
        let mut command = base_command(dir);
        command.args(args);
        command
    }

    fn git(&self, args: &[&str]) -> Command {
        let mut command = base_command(&self.top);
        command.args(&self.inert).args(args);
        command
    }

    fn with_index(&self, index: &TempIndex, args: &[&str]) -> Command {
        let mut command = self.git(args);
        command.env("GIT_INDEX_FILE", &index.0);
        command
    }

    fn temp_index(&self) -> TempIndex {
        let dir = self.index.parent().unwrap_or(&self.top);
        TempIndex(dir.join(format!("{INDEX_PREFIX}{}", platform::nonce())))
    }

    /// The user's HEAD commit, if it names one.
    pub fn head(&self) -> Option<String> {
        run(
            self.git(&["rev-parse", "--verify", "-q", "HEAD^{commit}"]),
            None,
            STDERR_CAP,
        )
        .ok()
        .map(text)
        .filter(|head| !head.is_empty())
    }

    /// The tree of the working tree as it is now: tracked and untracked
    /// files (`.gitignore` respected), loopx's own paths left out.
    pub fn tree_now(&self) -> Result<String> {
        let index = self.temp_index();
        // The user's index is a stat cache: with it, files that did not
        // change are not read again. Copied, never written.
        match std::fs::copy(&self.index, &index.0) {
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let head = self.head();
                let source = head.as_deref().unwrap_or("--empty");
                run(
                    self.with_index(&index, &["read-tree", source]),
                    None,
                    STDERR_CAP,
                )?;
            }
            Err(error) => {
                return Err(error).with_context(|| format!("cannot read {}", self.index.display()))
            }
        }
        let own: Vec<Option<&str>> = self.own.iter().map(|p| Some(p.as_str())).collect();
        let excluded = exclusions(&own);
        let mut add = self.with_index(&index, &["add", "-A", "--", "."]);
        add.args(&excluded);
        run(add, None, OUTPUT_CAP)?;
        if !self.own.is_empty() {
            // Tracked by the user's index, loopx's files still are out.
            let mut remove = self.with_index(
                &index,
                &["rm", "--cached", "-r", "-q", "--ignore-unmatch", "--"],
            );
            remove.args(self.own.iter().map(|p| format!(":(top,literal){p}")));
            run(remove, None, OUTPUT_CAP)?;
        }
        Ok(text(run(
            self.with_index(&index, &["write-tree"]),
            None,
            STDERR_CAP,
        )?))
    }

    /// A commit of `tree` on the user's HEAD (when there is one), made
    /// without touching any branch.
    pub fn commit(&self, tree: &str, parent: Option<&str>, message: &str) -> Result<String> {
        let mut command = self.git(&["commit-tree", tree]);
        if let Some(parent) = parent {
            command.args(["-p", parent]);
        }
        command.args(["-m", message]);
        Ok(text(run(command, None, STDERR_CAP)?))
    }

    /// Commit the working tree as it is now ([`Self::tree_now`]) on the
    /// user's HEAD and point loopx's ref `name` at it.
    pub fn snapshot_to(&self, name: &str, message: &str) -> Result<Taken> {
        let tree = self.tree_now()?;
        let head = self.head();
        let commit = self.commit(&tree, head.as_deref(), message)?;
        self.set_ref(name, &commit)
            .with_context(|| format!("cannot point {name} at the snapshot"))?;
        Ok(Taken { commit, tree, head })
    }

    /// Point loopx's ref `name` at `commit`.
    pub fn set_ref(&self, name: &str, commit: &str) -> Result<()> {
        run(self.git(&["update-ref", name, commit]), None, STDERR_CAP)?;
        Ok(())
    }

    /// The commit `name` points at, if it exists.
    pub fn read_ref(&self, name: &str) -> Option<String> {
        run(
            self.git(&["rev-parse", "--verify", "-q", &format!("{name}^{{commit}}")]),
            None,
            STDERR_CAP,
        )
        .ok()
        .map(text)
        .filter(|id| !id.is_empty())
    }

    /// The tree of `commit`.
    pub fn tree_of(&self, commit: &str) -> Result<String> {
        Ok(text(run(
            self.git(&["rev-parse", "--verify", &format!("{commit}^{{tree}}")]),
            None,
            STDERR_CAP,
        )?))
    }

    fn diff_tree(&self, options: &[&str], from: &str, to: &str) -> Command {
        let mut command = self.git(&[
            "diff-tree",
            "-r",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
        ]);
        command.args(options).args([from, to]);
        command
    }

    /// Files, insertions and deletions from tree `from` to tree `to`.
    pub fn stat(&self, from: &str, to: &str) -> Result<DiffStat> {
        let out = run(self.diff_tree(&["--shortstat"], from, to), None, STDERR_CAP)?;
        Ok(DiffStat::parse(&text(out)))
    }

    /// Every path that differs from tree `from` to tree `to`, and what
    /// making `from` into `to` does to it.
    pub fn changes(&self, from: &str, to: &str) -> Result<Vec<Change>> {
        let out = run(
            self.diff_tree(&["-z", "--name-status"], from, to),
            None,
            OUTPUT_CAP,
        )?;
        if out.truncated {
            bail!("the change from {from} to {to} lists more paths than loopx reads");
        }
        let mut fields = out.stdout.split(|b| *b == 0).filter(|f| !f.is_empty());
        let mut changes = Vec::new();
        while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
            let action = match status.first() {
                Some(b'D') => "remove",
                _ => "write",
            };
            changes.push(Change {
                action,
                path: String::from_utf8_lossy(path).into_owned(),
            });
        }
        Ok(changes)
    }

    /// The patch from tree `from` to tree `to`, at most `cap` bytes, and
    /// whether it was cut.
    pub fn patch(&self, from: &str, to: &str, cap: u64) -> Result<(String, bool)> {
        let out = run(self.diff_tree(&["-p", "--no-color"], from, to), None, cap)?;
        Ok((
            String::from_utf8_lossy(&out.stdout).into_owned(),
            out.truncated,
        ))
    }

    /// Make the working tree's snapshotted paths those of tree `target`,
    /// given they are those of tree `now`: paths the target lacks are
    /// removed (never an ignored file or loopx's own, which no snapshot
    /// holds), the others written from the target. The user's index,
    /// HEAD and branches are not touched.
    pub fn restore(&self, target: &str, now: &str) -> Result<Vec<Change>> {
        let changes = self.changes(now, target)?;
        for change in changes.iter().filter(|c| c.action == "remove") {
            let path = self.confined(&change.path)?;
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    return Err(error).with_context(|| format!("cannot remove {}", path.display()))
                }
            }
            // Directories the removal emptied go too; a non-empty one stays.
            let mut parent = path.parent();
            while let Some(dir) = parent.filter(|d| *d != self.top) {
                if std::fs::remove_dir(dir).is_err() {
                    break;
                }
                parent = dir.parent();
            }
        }
        let writes: Vec<&Change> = changes.iter().filter(|c| c.action == "write").collect();
        if !writes.is_empty() {
            let index = self.temp_index();
            run(
                self.with_index(&index, &["read-tree", target]),
                None,
                STDERR_CAP,
            )?;
            let mut list = Vec::new();
            for change in &writes {
                self.confined(&change.path)?;
                list.extend_from_slice(change.path.as_bytes());
                list.push(0);
            }
            run(
                self.with_index(&index, &["checkout-index", "-f", "-z", "--stdin"]),
                Some(list),
                STDERR_CAP,
            )?;
        }
        Ok(changes)
    }

    /// `relative` under the top, reached through no symlinked directory:
    /// a removal never follows a link out of the work tree.
    fn confined(&self, relative: &str) -> Result<PathBuf> {
        let path = Path::new(relative);
        if path
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
        {
            bail!("refusing the path {relative:?} git listed: not a plain relative path");
        }
        let mut at = self.top.clone();
        let parts: Vec<_> = path.components().collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            at.push(part);
            if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
                bail!(
                    "refusing to touch {relative}: {} is a symbolic link",
                    at.display()
                );
            }
        }
        Ok(self.top.join(path))
    }
}

/// A repository as the merge queue and the workers run git in it: every
/// command through [`base_command`] (no hooks, no signing, no prompts)
/// with the repository's content filters made inert ([`inert_filters`]),
/// because a worker's agent wrote the work tree and its config.
#[derive(Debug, Clone)]
pub struct Repo {
    inert: Vec<String>,
}

impl Repo {
    /// The repository holding `dir`, its filters read once.
    pub fn at(dir: &Path) -> Repo {
        Repo {
            inert: inert_filters(dir),
        }
    }

    /// `git -C dir args…`, its output trimmed; a failure quotes git.
    pub fn run(&self, dir: &Path, args: &[&str]) -> Result<String> {
        let mut command = base_command(dir);
        command.args(&self.inert).args(args);
        Ok(text(run(command, None, OUTPUT_CAP)?))
    }

    /// Whether `git -C dir args…` succeeds (its output dropped).
    pub fn succeeds(&self, dir: &Path, args: &[&str]) -> bool {
        self.run(dir, args).is_ok()
    }
}
