//! The workers' branches and worktrees: one worktree per todo in flight,
//! under the loop directory's `worktrees/`, on the branch
//! `loopx/<run>/<todo>` made from the target branch. A worktree outlives
//! the worker that made it (a takeover, a merge undone, works on in it)
//! and goes when its entry lands or is discarded; one whose entry is gone
//! (a killed run) is pruned when the next run starts.
//!
//! Not here: the names (`loopx_core::workers`), running git
//! (`crate::snapshot::git::Repo`).

use crate::fsutil;
use crate::loop_dir::LoopDir;
use crate::snapshot::git::Repo;
use anyhow::{bail, Context as _, Result};
use loopx_core::workers::{self, Entry, Queue};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Worktree and ref changes of one process go one at a time: git takes
/// per-repository locks for them and refuses a second writer instead of
/// waiting.
static GIT: Mutex<()> = Mutex::new(());

pub(crate) fn locked() -> std::sync::MutexGuard<'static, ()> {
    GIT.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The branch the queue lands on, and its tip: `asked`, or the branch the
/// project root has checked out. Refused when the repository has no
/// commit yet (a worktree is made from one) or HEAD is detached.
pub fn target(repo: &Repo, root: &Path, asked: Option<&str>) -> Result<(String, String)> {
    let branch = match asked {
        Some(branch) => branch.to_owned(),
        None => repo
            .run(root, &["symbolic-ref", "--quiet", "--short", "HEAD"])
            .context("the project root has no branch checked out (a detached HEAD): name the branch to land on with --target-branch")?,
    };
    if !repo.succeeds(root, &["check-ref-format", "--branch", &branch]) {
        bail!("--target-branch {branch:?} is not a branch name");
    }
    let tip = repo
        .run(root, &["rev-parse", "--verify", "--quiet", &format!("refs/heads/{branch}^{{commit}}")])
        .with_context(|| format!("the target branch {branch} has no commit: workers need the project to have at least one commit on it"))?;
    Ok((branch, tip))
}

/// The tip of the target branch now: the local branch, or with a remote
/// (`--push`) the remote's, fetched first.
pub fn tip(repo: &Repo, root: &Path, target: &str, remote: Option<&str>) -> Result<String> {
    let Some(remote) = remote else {
        return repo.run(
            root,
            &[
                "rev-parse",
                "--verify",
                &format!("refs/heads/{target}^{{commit}}"),
            ],
        );
    };
    let tracking = format!("refs/remotes/{remote}/{target}");
    {
        let _git = locked();
        fetch(
            repo,
            root,
            remote,
            &format!("+refs/heads/{target}:{tracking}"),
        )?;
    }
    repo.run(
        root,
        &["rev-parse", "--verify", &format!("{tracking}^{{commit}}")],
    )
}

/// Have the commits of `branch` on `remote` here (another host's worker
/// pushed them).
pub fn fetch_branch(repo: &Repo, root: &Path, remote: &str, branch: &str) -> Result<()> {
    let _git = locked();
    fetch(repo, root, remote, &format!("refs/heads/{branch}"))
}

/// `git fetch` of `refspec` from `remote`, tags left alone. The caller
/// holds [`locked`].
fn fetch(repo: &Repo, root: &Path, remote: &str, refspec: &str) -> Result<()> {
    repo.run(root, &["fetch", "--quiet", "--no-tags", remote, refspec])
        .with_context(|| format!("cannot fetch {refspec} from the remote {remote}"))?;
    Ok(())
}

/// Put `branch` on `remote` as it is here: what another host's queue
/// merges, or another host's worker takes over.
pub fn push_branch(repo: &Repo, root: &Path, remote: &str, branch: &str) -> Result<()> {
    let _git = locked();
    repo.run(
        root,
        &[
            "push",
            "--quiet",
            "--force",
            remote,
            &format!("refs/heads/{branch}:refs/heads/{branch}"),
        ],
    )
    .with_context(|| format!("cannot push {branch} to the remote {remote}"))?;
    Ok(())
}

/// The absolute path of `entry`'s worktree.
pub fn path_of(dir: &LoopDir, entry: &Entry) -> PathBuf {
    dir.root().join(&entry.worktree)
}

/// Make, or find again, the worktree of `entry` on its branch, from
/// `base` when the branch is new. A directory in the way that is not that
/// worktree is refused rather than overwritten.
pub fn prepare(
    dir: &LoopDir,
    root: &Path,
    repo: &Repo,
    entry: &Entry,
    remote: Option<&str>,
) -> Result<PathBuf> {
    let _git = locked();
    let path = path_of(dir, entry);
    fsutil::create_private_dir(&dir.root().join(workers::WORKTREES)).ok();
    if path.join(".git").exists() {
        let branch = repo.run(&path, &["symbolic-ref", "--quiet", "--short", "HEAD"]);
        match branch {
            Ok(branch) if branch == entry.branch => return Ok(path),
            _ => bail!(
                "{} is in the way of todo {}'s worktree (it is not on {}): remove it, or discard the entry (`loopx queue discard {}`)",
                path.display(),
                entry.todo_id,
                entry.branch,
                entry.todo_id
            ),
        }
    }
    // A worktree removed by hand leaves git's record of it behind.
    let _ = repo.run(root, &["worktree", "prune"]);
    let location = path.to_string_lossy().into_owned();
    let local = format!("refs/heads/{}", entry.branch);
    let mut exists = repo.succeeds(root, &["rev-parse", "--verify", "--quiet", &local]);
    if let (false, Some(remote)) = (exists, remote) {
        // Worked on another host before: taken over from what it pushed.
        exists = fetch(repo, root, remote, &format!("+{local}:{local}")).is_ok();
    }
    if exists {
        repo.run(root, &["worktree", "add", &location, &entry.branch])?;
    } else {
        repo.run(
            root,
            &[
                "worktree",
                "add",
                "-b",
                &entry.branch,
                &location,
                &entry.base,
            ],
        )?;
    }
    Ok(path)
}

/// Commit whatever the turn left uncommitted in `worktree` (the agent may
/// have committed some or all of it itself), as `author`, its content
/// filters inert; the branch's head after.
pub fn commit_left(worktree: &Path, author: &str, message: &str) -> Result<String> {
    // The worktree's own view of the config: a worktree may carry settings
    // (`config.worktree`) the project checkout does not see.
    let repo = &Repo::at(worktree);
    let status = repo.run(worktree, &["status", "--porcelain=v1", "-uall"])?;
    if !status.is_empty() {
        repo.run(worktree, &["add", "-A"])?;
        repo.run(
            worktree,
            &[
                "-c",
                &format!("user.name={author}"),
                "-c",
                "user.email=loopx@localhost",
                "commit",
                "--no-verify",
                "--quiet",
                "-m",
                message,
            ],
        )?;
    }
    repo.run(worktree, &["rev-parse", "HEAD"])
}

/// The main work tree of the repository `worktree` belongs to, if it is
/// a worktree here.
pub fn repository_of(worktree: &Path) -> Option<PathBuf> {
    if !worktree.join(".git").exists() {
        return None;
    }
    let repo = Repo::at(worktree);
    let common = repo
        .run(
            worktree,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )
        .ok()?;
    Path::new(&common).parent().map(Path::to_path_buf)
}

/// Remove `entry`'s worktree and branch. Best effort, said on failure:
/// what is left is an orphan the next run prunes.
pub fn remove(dir: &LoopDir, root: &Path, entry: &Entry) {
    let _git = locked();
    let repo = Repo::at(root);
    let path = path_of(dir, entry);
    if path.exists() {
        let location = path.to_string_lossy().into_owned();
        if let Err(error) = repo.run(root, &["worktree", "remove", "--force", &location]) {
            eprintln!(
                "loopx: warning: the worktree {} was not removed ({error:#}); the next run prunes it",
                path.display()
            );
        }
    }
    let _ = repo.run(root, &["worktree", "prune"]);
    let _ = repo.run(root, &["branch", "-D", "--quiet", &entry.branch]);
}

/// What [`prune`] removed.
#[derive(Debug, Default)]
pub struct Pruned {
    pub worktrees: Vec<String>,
    pub branches: Vec<String>,
}

/// Remove the worktrees under the loop's `worktrees/` and the branches
/// under `loopx/<run>/` that no entry in flight owns: what a killed run
/// left of entries that landed or were discarded meanwhile. The merge
/// worktree is the queue's and is kept.
pub fn prune(dir: &LoopDir, root: &Path, repo: &Repo, run: &str, queue: &Queue) -> Result<Pruned> {
    let _git = locked();
    let mut pruned = Pruned::default();
    let owned = |relative: &str| queue.active.values().any(|e| e.worktree == relative);
    let folder = dir.root().join(workers::WORKTREES);
    if let Ok(entries) = std::fs::read_dir(&folder) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = format!("{}/{name}", workers::WORKTREES);
            if relative == workers::MERGE_WORKTREE || owned(&relative) {
                continue;
            }
            let location = entry.path().to_string_lossy().into_owned();
            if repo
                .run(root, &["worktree", "remove", "--force", &location])
                .is_err()
            {
                // Not a worktree git knows: a directory a killed `worktree
                // add` left half made, under loopx's own folder.
                std::fs::remove_dir_all(entry.path())
                    .with_context(|| format!("cannot remove {}", entry.path().display()))?;
            }
            pruned.worktrees.push(relative);
        }
    }
    let _ = repo.run(root, &["worktree", "prune"]);
    let prefix = format!("refs/heads/loopx/{}/", workers::component(run));
    let listed = repo.run(
        root,
        &["for-each-ref", "--format=%(refname:short)", &prefix],
    )?;
    for branch in listed.lines().filter(|b| !b.is_empty()) {
        if queue.active.values().any(|e| e.branch == branch) {
            continue;
        }
        repo.run(root, &["branch", "-D", "--quiet", branch])?;
        pruned.branches.push(branch.to_owned());
    }
    Ok(pruned)
}
