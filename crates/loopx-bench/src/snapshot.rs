//! The `snapshot` suite: what one workspace snapshot costs a turn, against
//! a plain `git add -A && git commit` of the same change, in the same run.
//!
//! Two identical repositories of `--sizes` files each (default 10,000, in
//! 100 directories, one commit, the user's index refreshed as after a `git
//! status`). Each run makes the same small change in both (one file grows
//! a line, one new file appears); one repository is snapshotted the way
//! the driver does before a turn (`loopx_app::snapshot::git::Workspace::
//! snapshot_to`: the user's index copied as a stat cache into a private
//! index, `add -A` with the loop directory excluded, `write-tree`,
//! `commit-tree`, `update-ref`), the other gets `git add -A && git commit`.
//! The two alternate, so both see the same machine. Not measured: the
//! after-snapshot's diff stat (one `diff-tree --shortstat`), and the
//! journal write.

use crate::measure::Summary;
use crate::Result;
use loopx_app::snapshot::git::Workspace;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn git(root: &Path, args: &[&str]) -> Result<()> {
    let status = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@localhost")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@localhost")
        .status()?;
    if !status.success() {
        return Err(format!("git {args:?} failed in {}", root.display()).into());
    }
    Ok(())
}

/// A repository of `files` small files with one commit and a loop
/// directory (untracked, as in a project loopx drives).
fn repository(root: &Path, files: u64) -> Result<()> {
    for n in 0..files {
        let dir = root.join(format!("d{:02}", n % 100));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("f{n}.txt")), format!("file {n}\nline\n"))?;
    }
    std::fs::create_dir_all(root.join(".loopx"))?;
    std::fs::write(root.join(".loopx/loopx.sqlite"), b"not part of the tree")?;
    git(root, &["init", "-q"])?;
    git(root, &["add", "-A", "--", ".", ":(exclude).loopx"])?;
    git(root, &["commit", "-q", "-m", "start"])?;
    Ok(())
}

/// Change `run`'s file and add one, the same in every repository.
fn change(root: &Path, run: usize, files: u64) -> Result<()> {
    use std::io::Write as _;
    let n = (run as u64 * 7) % files;
    let mut grown = std::fs::OpenOptions::new()
        .append(true)
        .open(root.join(format!("d{:02}/f{n}.txt", n % 100)))?;
    writeln!(grown, "run {run}")?;
    std::fs::write(root.join(format!("new-{run}.txt")), format!("new {run}\n"))?;
    Ok(())
}

pub fn run(sizes: &[u64], runs: usize, work: &Path) -> Result<String> {
    let mut report = String::from("### Workspace snapshot per turn\n\n");
    report.push_str(&Summary::table_header("files: what", "runs"));
    let mut ratios = Vec::new();
    for &files in sizes {
        let snapped = work.join(format!("snap-{files}"));
        let plain = work.join(format!("plain-{files}"));
        repository(&snapped, files)?;
        repository(&plain, files)?;
        // Past git's racy-timestamp window, then a refreshed index, as a
        // user's is after any `git status`.
        std::thread::sleep(Duration::from_millis(1100));
        git(&snapped, &["update-index", "-q", "--refresh"])?;
        git(&plain, &["update-index", "-q", "--refresh"])?;
        let workspace = Workspace::open(&snapped, &[&snapped.join(".loopx")])?;
        let (mut ours, mut floor) = (Vec::new(), Vec::new());
        for run in 0..runs {
            change(&snapped, run, files)?;
            change(&plain, run, files)?;
            let started = Instant::now();
            workspace.snapshot_to(
                &format!("refs/loopx/bench/turns/{run}/before"),
                "loopx: workspace before turn",
            )?;
            ours.push(started.elapsed());
            let started = Instant::now();
            git(&plain, &["add", "-A", "--", ".", ":(exclude).loopx"])?;
            git(&plain, &["commit", "-q", "-m", "turn"])?;
            floor.push(started.elapsed());
        }
        let (ours, floor) = (Summary::of(&ours), Summary::of(&floor));
        report.push_str(&ours.table_row(&format!(
            "{files}: loopx snapshot (private index, commit, ref)"
        )));
        report.push_str(&floor.table_row(&format!("{files}: git add -A && git commit")));
        ratios.push((files, ours.median_ms / floor.median_ms));
    }
    report.push('\n');
    for (files, ratio) in ratios {
        report.push_str(&format!(
            "{files} files: the snapshot costs {ratio:.2}x the plain add and commit (target < 1.5x)\n"
        ));
    }
    Ok(report)
}
