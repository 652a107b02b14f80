//! The merge queue's one step: the entry at its head merged onto the
//! target branch in the queue's own worktree, the configured checks run
//! on the merged result, and then either landed (the target advances, the
//! todo completes with the merge commit as its evidence) or undone (the
//! todo back on the frontier with the reason, its worktree kept).
//!
//! The target only moves by compare-and-swap from the tip the merge was
//! made on (`update-ref new old`, or a fast-forward of the checkout that
//! has it out), so a target someone else moved meanwhile is merged again,
//! never overwritten. The merge commit is recorded before the target
//! moves, so a restart tells a merge that landed from one that did not
//! ([`recover`]).

use super::worktree;
use crate::driver::runner::TurnRunner;
use crate::goal::GoalTarget;
use crate::loop_dir::LoopDir;
use crate::snapshot::git::Repo;
use anyhow::Result;
use loopx_core::driver::provider::Family;
use loopx_core::goal::Actor;
use loopx_core::panel::merge::MergeBrief;
use loopx_core::workers::{self, Entry, MergeMode, QueueRequest, Rejection};
use loopx_store::failpoint;
use std::path::{Path, PathBuf};

/// What the queue merges onto, and how.
#[derive(Clone, Copy)]
pub struct Setup<'a> {
    /// The project checkout (the main worktree).
    pub root: &'a Path,
    pub repo: &'a Repo,
    pub target: &'a str,
    pub mode: MergeMode,
    pub goal_id: &'a str,
    /// This host's id: the merger of what it merges.
    pub host: &'a str,
    /// `--push`: the remote the target lives on; `None`: this repository.
    pub remote: Option<&'a str>,
    pub runner: &'a dyn TurnRunner,
    pub say: &'a dyn Fn(&str),
    /// `drive --panel on`: each merged change is reviewed before it lands.
    pub review: Option<Review<'a>>,
}

/// How the merge review runs.
#[derive(Clone, Copy)]
pub struct Review<'a> {
    /// The family of the workers' provider: reviewers are of another.
    pub executor: Family,
    /// `drive --transport`: how reviewer processes run.
    pub transport: Option<&'a str>,
}

/// What the merge review came to.
enum Reviewed {
    Accepted,
    Rejected(String),
    Undecided(String),
}

/// What one step of the queue did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// Nothing was queued.
    Idle,
    Landed {
        todo_id: String,
        commit: String,
    },
    Rejected {
        todo_id: String,
        rejection: Rejection,
        reason: String,
    },
    /// Put back in line (the target moved under the merge).
    Requeued {
        todo_id: String,
        reason: String,
    },
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// Merge the entry at the head of the queue, if there is one. A merge
/// this host left open (a killed run), or another host abandoned, is
/// settled first ([`recover`]); another host's merge in progress is waited
/// for.
pub fn next(dir: &LoopDir, setup: &Setup<'_>) -> Result<Merged> {
    // Asked every poll while idle: only the store is read until there is
    // something to merge.
    let queue = dir.queue()?;
    // The repository's config as it is now: a worker may have added a
    // filter or a merge driver since the last merge, and none may run.
    let fresh = || Repo::at(setup.root);
    if let Some(open) = queue.merging() {
        let ours = open.merger.as_deref().is_none_or(|m| m == setup.host);
        let quiet = crate::clock::now().duration_since(open.updated_at);
        let abandoned = quiet.as_secs() > workers::ABANDONED_MERGE_SECONDS;
        if !(ours || abandoned) {
            return Ok(Merged::Idle);
        }
        let repo = fresh();
        return recover(
            dir,
            &Setup {
                repo: &repo,
                ..*setup
            },
            open,
        );
    }
    let Some(entry) = queue.head().cloned() else {
        return Ok(Merged::Idle);
    };
    let repo = fresh();
    let setup = &Setup {
        repo: &repo,
        ..*setup
    };
    let todo_id = entry.todo_id.clone();
    let began = super::write(
        dir,
        &super::fresh_op("merge-begin")?,
        &QueueRequest::Begin {
            todo_id: todo_id.clone(),
            merger: setup.host.to_owned(),
        },
    );
    match began {
        // Another host's queue began a merge first.
        Err(error) if crate::error::class_of(&error) == crate::error::ErrorClass::Refused => {
            return Ok(Merged::Idle)
        }
        began => began?,
    };
    let head = entry.head.clone().unwrap_or_default();
    if let Some(remote) = setup.remote {
        worktree::fetch_branch(setup.repo, setup.root, remote, &entry.branch)?;
    }
    let tip = tip_of(setup)?;
    (setup.say)(&format!(
        "merge queue: merging todo {todo_id} ({} at {}) onto {} at {} by {}",
        entry.branch,
        short(&head),
        setup.target,
        short(&tip),
        setup.mode.as_str()
    ));
    let scratch = merge_worktree(dir, setup, &tip)?;
    if let Err(conflict) = combine(setup, &scratch, &entry, &head, &tip) {
        return reject(dir, setup, &entry, Rejection::Conflict, conflict);
    }
    let merged = setup.repo.run(&scratch, &["rev-parse", "HEAD"])?;
    let say = |line: &str| (setup.say)(&format!("merge queue: {line}"));
    let checks =
        crate::goal::checks::run(dir, &scratch, None, None, "merge queue", setup.runner, &say)?;
    if crate::platform::stop_signal().is_some() {
        // A check cut short proves nothing: back in line for the next run.
        return requeue(
            dir,
            &entry,
            "the driver was stopped while the merged result was checked".into(),
        );
    }
    let failing = checks.not_met_words();
    if !failing.is_empty() {
        let reason = format!(
            "checks failed on the merged result {}: {}",
            short(&merged),
            failing.join(", ")
        );
        return reject(dir, setup, &entry, Rejection::CheckFailed, reason);
    }
    if let Some(review) = &setup.review {
        let passed: Vec<String> = (checks.criteria.iter())
            .map(|c| format!("{} of {}", c.criterion_id, c.outcome_id))
            .collect();
        let brief = MergeBrief {
            todo_id: todo_id.clone(),
            title: entry.title.clone(),
            worker: entry.worker.clone(),
            branch: entry.branch.clone(),
            target: setup.target.to_owned(),
            tip: tip.clone(),
            merged: merged.clone(),
            stat: setup.repo.run(
                &scratch,
                &[
                    "diff",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--stat",
                    &tip,
                    &merged,
                ],
            )?,
            patch: setup.repo.run(
                &scratch,
                &["diff", "--no-ext-diff", "--no-textconv", &tip, &merged],
            )?,
            checks: passed,
        };
        match review_merge(dir, setup, review, brief)? {
            Reviewed::Accepted => {}
            Reviewed::Rejected(reason) => {
                return reject(dir, setup, &entry, Rejection::ReviewRejected, reason)
            }
            Reviewed::Undecided(reason) => {
                return reject(dir, setup, &entry, Rejection::Unreviewed, reason)
            }
        }
    }
    let prepared = super::write(
        dir,
        &super::fresh_op("merge-prepared")?,
        &QueueRequest::Prepared {
            todo_id: todo_id.clone(),
            merge_commit: merged.clone(),
        },
    );
    match prepared {
        // Taken for abandoned meanwhile (another host, or the operator's
        // `queue retry`): the target has not moved, and the merge is
        // theirs now.
        Err(error) if crate::error::class_of(&error) == crate::error::ErrorClass::Refused => {
            (setup.say)(&format!(
                "merge queue: todo {todo_id} was taken over while it was checked; this merge is dropped"
            ));
            return Ok(Merged::Idle);
        }
        prepared => prepared?,
    };
    failpoint::reached("merge.after_prepared");
    if tip_of(setup)? != tip {
        return requeue(
            dir,
            &entry,
            format!(
                "{} moved while todo {todo_id} was merged onto it",
                setup.target
            ),
        );
    }
    if let Err(refused) = advance(setup, &tip, &merged) {
        return reject(dir, setup, &entry, Rejection::LandFailed, refused);
    }
    failpoint::reached("merge.after_advance");
    land(dir, setup, &entry, &merged)
}

/// The panel's merge review of `brief`: a reviewer of another family than
/// the worker's reads the merged change and accepts or rejects it. A
/// review that cannot run, or that no reviewer decides, is no acceptance.
fn review_merge(
    dir: &LoopDir,
    setup: &Setup<'_>,
    review: &Review<'_>,
    brief: MergeBrief,
) -> Result<Reviewed> {
    let todo_id = brief.todo_id.clone();
    let prepared =
        crate::panel::prepare_merge(dir.place(), brief, review.executor, review.transport);
    let prepared = match prepared {
        Ok(prepared) => prepared,
        Err(error) => {
            return Ok(Reviewed::Undecided(format!(
                "the merge review could not run: {error}"
            )))
        }
    };
    let announce = |line: &str| (setup.say)(&format!("merge queue: todo {todo_id}: {line}"));
    let view = crate::driver::reviewer::review(prepared, None, setup.runner, &announce)?;
    Ok(match view.merge {
        Some(decision) if decision.accepted => {
            (setup.say)(&format!(
                "merge queue: todo {todo_id} accepted by {}'s merge review",
                decision.reviewer
            ));
            Reviewed::Accepted
        }
        Some(decision) => Reviewed::Rejected(format!(
            "{}'s merge review rejected it: {}",
            decision.reviewer, decision.reasoning
        )),
        None => Reviewed::Undecided(format!(
            "no reviewer decided the merge review ({} of {} attempts used; see {}/)",
            view.attempts_used,
            view.max_attempts,
            crate::panel::ARTIFACTS
        )),
    })
}

/// The tip of the target branch now (the remote's, with one).
fn tip_of(setup: &Setup<'_>) -> Result<String> {
    worktree::tip(setup.repo, setup.root, setup.target, setup.remote)
}

/// The queue's worktree, clean and detached at `tip`.
fn merge_worktree(dir: &LoopDir, setup: &Setup<'_>, tip: &str) -> Result<PathBuf> {
    let path = dir.root().join(workers::MERGE_WORKTREE);
    let repo = setup.repo;
    if !path.join(".git").exists() {
        let _git = worktree::locked();
        let _ = std::fs::remove_dir_all(&path);
        let _ = repo.run(setup.root, &["worktree", "prune"]);
        crate::fsutil::create_private_dir(&dir.root().join(workers::WORKTREES)).ok();
        let location = path.to_string_lossy().into_owned();
        repo.run(setup.root, &["worktree", "add", "--detach", &location, tip])?;
        return Ok(path);
    }
    // Whatever a merge cut short left: an open merge or rebase, files.
    let _ = repo.run(&path, &["merge", "--abort"]);
    let _ = repo.run(&path, &["rebase", "--abort"]);
    repo.run(&path, &["checkout", "--detach", "--force", "--quiet", tip])?;
    repo.run(&path, &["reset", "--hard", "--quiet", tip])?;
    repo.run(&path, &["clean", "-fdq"])?;
    Ok(path)
}

/// Put `entry`'s commits onto `tip` in `scratch`. `Err`: the conflict, in
/// words that name the files, with the merge undone.
fn combine(
    setup: &Setup<'_>,
    scratch: &Path,
    entry: &Entry,
    head: &str,
    tip: &str,
) -> std::result::Result<(), String> {
    let repo = setup.repo;
    let message = format!("loopx: land todo {} ({})", entry.todo_id, entry.title);
    let attempt = match setup.mode {
        MergeMode::Merge => repo.run(
            scratch,
            &["merge", "--no-ff", "--no-edit", "-m", &message, head],
        ),
        MergeMode::Rebase => repo
            .run(scratch, &["checkout", "--detach", "--quiet", head])
            .and_then(|_| repo.run(scratch, &["rebase", "--quiet", tip])),
    };
    let Err(error) = attempt else {
        return Ok(());
    };
    let files = repo
        .run(scratch, &["diff", "--name-only", "--diff-filter=U"])
        .unwrap_or_default();
    let _ = repo.run(scratch, &["merge", "--abort"]);
    let _ = repo.run(scratch, &["rebase", "--abort"]);
    let files: Vec<&str> = files.lines().filter(|l| !l.is_empty()).take(20).collect();
    Err(match files.is_empty() {
        true => format!(
            "{} of {} onto {} failed: {error:#}",
            setup.mode.as_str(),
            entry.branch,
            setup.target
        ),
        false => format!(
            "conflict with {} at {} in {}",
            setup.target,
            short(tip),
            files.join(", ")
        ),
    })
}

/// Move the target from `tip` to `merged`: a fast-forward of the
/// checkout that has it out (its files follow), else a compare-and-swap
/// of the ref. `Err`: why it did not move.
fn advance(setup: &Setup<'_>, tip: &str, merged: &str) -> std::result::Result<(), String> {
    let repo = setup.repo;
    if let Some(remote) = setup.remote {
        // A push that is not a fast-forward of the remote's tip is
        // refused by the remote: the compare-and-swap across hosts.
        let _git = worktree::locked();
        let lease = format!("--force-with-lease=refs/heads/{}:{tip}", setup.target);
        return repo
            .run(
                setup.root,
                &[
                    "push",
                    "--quiet",
                    &lease,
                    remote,
                    &format!("{merged}:refs/heads/{}", setup.target),
                ],
            )
            .map(|_| ())
            .map_err(|error| {
                format!(
                    "the remote {remote} did not take {} at {} ({error:#})",
                    setup.target,
                    short(merged)
                )
            });
    }
    let checked_out = repo
        .run(setup.root, &["symbolic-ref", "--quiet", "HEAD"])
        .is_ok_and(|head| head == format!("refs/heads/{}", setup.target));
    let moved = match checked_out {
        true => repo.run(setup.root, &["merge", "--ff-only", "--quiet", merged]),
        false => repo.run(
            setup.root,
            &[
                "update-ref",
                &format!("refs/heads/{}", setup.target),
                merged,
                tip,
            ],
        ),
    };
    moved.map(|_| ()).map_err(|error| {
        format!(
            "{} could not be advanced to {} ({error:#}){}",
            setup.target,
            short(merged),
            if checked_out {
                ": the project checkout has changes in the way of the fast-forward"
            } else {
                ""
            }
        )
    })
}

/// Record the landing, complete the todo and clean up after it.
fn land(dir: &LoopDir, setup: &Setup<'_>, entry: &Entry, merged: &str) -> Result<Merged> {
    let landed = super::write(
        dir,
        &super::fresh_op("merge-land")?,
        &QueueRequest::Land {
            todo_id: entry.todo_id.clone(),
            merge_commit: merged.to_owned(),
        },
    );
    if let Err(error) = &landed {
        if crate::error::class_of(error) == crate::error::ErrorClass::Refused {
            // Put back in line meanwhile: its next merge finds the change
            // already on the target, and records the landing then.
            (setup.say)(&format!(
                "merge queue: todo {} is on {} as {}, but was taken over before the landing was recorded; its next merge records it",
                entry.todo_id,
                setup.target,
                short(merged)
            ));
            return Ok(Merged::Idle);
        }
    }
    landed?;
    complete(dir, setup, entry, merged);
    worktree::remove(dir, setup.root, entry);
    if let Some(remote) = setup.remote {
        follow(setup, remote, entry, merged);
    }
    (setup.say)(&format!(
        "merge queue: landed todo {} on {} as {}",
        entry.todo_id,
        setup.target,
        short(merged)
    ));
    Ok(Merged::Landed {
        todo_id: entry.todo_id.clone(),
        commit: merged.to_owned(),
    })
}

/// After a landing on the remote: this host's target follows where it
/// can (a fast-forward of the checkout that has it out, else of the
/// ref), and the worker's branch leaves the remote. Best effort: the
/// remote is the target, and the next fetch brings the rest.
fn follow(setup: &Setup<'_>, remote: &str, entry: &Entry, merged: &str) {
    let repo = setup.repo;
    let _git = worktree::locked();
    let local = format!("refs/heads/{}", setup.target);
    let checked_out = repo
        .run(setup.root, &["symbolic-ref", "--quiet", "HEAD"])
        .is_ok_and(|head| head == local);
    let behind = repo.succeeds(setup.root, &["merge-base", "--is-ancestor", &local, merged]);
    if behind {
        let followed = match checked_out {
            true => repo.run(setup.root, &["merge", "--ff-only", "--quiet", merged]),
            false => repo.run(setup.root, &["update-ref", &local, merged]),
        };
        if let Err(error) = followed {
            (setup.say)(&format!(
                "merge queue: {} here stays behind the remote's ({error:#})",
                setup.target
            ));
        }
    }
    let _ = repo.run(
        setup.root,
        &[
            "push",
            "--quiet",
            remote,
            "--delete",
            &format!("refs/heads/{}", entry.branch),
        ],
    );
}

/// Complete the landed todo as the worker that did it, the merge commit
/// its evidence. After the landing's commit: a refusal (someone else took
/// the todo meanwhile) is said, and the landing stands.
fn complete(dir: &LoopDir, setup: &Setup<'_>, entry: &Entry, merged: &str) {
    let target = GoalTarget {
        goal_id: setup.goal_id.to_owned(),
        actor: Actor::Agent(entry.worker.clone()),
        expected_instance: None,
    };
    let note = format!(
        "landed on {} as {merged} by the merge queue (branch {})",
        setup.target, entry.branch
    );
    let done = super::fresh_op("landed")
        .and_then(|op| crate::goal::todo::complete(dir, &target, &entry.todo_id, &note, &op));
    if let Err(error) = done {
        let text = format!("{error:#}");
        if !text.contains("is done") {
            (setup.say)(&format!(
                "merge queue: warning: todo {} landed as {} but was not completed ({text})",
                entry.todo_id,
                short(merged)
            ));
        }
    }
}

/// Undo: the entry needs review, its todo goes back to the frontier with
/// the reason, its worktree stays for the next attempt.
fn reject(
    dir: &LoopDir,
    setup: &Setup<'_>,
    entry: &Entry,
    rejection: Rejection,
    reason: String,
) -> Result<Merged> {
    super::write(
        dir,
        &super::fresh_op("merge-reject")?,
        &QueueRequest::Reject {
            todo_id: entry.todo_id.clone(),
            rejection,
            reason: reason.clone(),
        },
    )?;
    super::pool::release_to_frontier(
        dir,
        entry,
        &format!(
            "the merge queue undid its merge ({}): {reason}",
            rejection.as_str()
        ),
    );
    (setup.say)(&format!(
        "merge queue: todo {} needs review ({}): {reason}",
        entry.todo_id,
        rejection.as_str()
    ));
    Ok(Merged::Rejected {
        todo_id: entry.todo_id.clone(),
        rejection,
        reason,
    })
}

fn requeue(dir: &LoopDir, entry: &Entry, reason: String) -> Result<Merged> {
    super::write(
        dir,
        &super::fresh_op("merge-requeue")?,
        &QueueRequest::Requeue {
            todo_id: entry.todo_id.clone(),
            reason: reason.clone(),
        },
    )?;
    Ok(Merged::Requeued {
        todo_id: entry.todo_id.clone(),
        reason,
    })
}

/// Settle a merge a killed run left open: landed if the target holds the
/// merge commit it prepared (the run died between moving the branch and
/// recording it), else back in line to be merged again.
pub fn recover(dir: &LoopDir, setup: &Setup<'_>, open: &Entry) -> Result<Merged> {
    let target = match setup.remote {
        Some(remote) => {
            tip_of(setup)?;
            format!("refs/remotes/{remote}/{}", setup.target)
        }
        None => format!("refs/heads/{}", setup.target),
    };
    if let Some(prepared) = &open.merge_commit {
        if setup.repo.succeeds(
            setup.root,
            &["merge-base", "--is-ancestor", prepared, &target],
        ) {
            return land(dir, setup, open, prepared);
        }
    }
    requeue(
        dir,
        open,
        "a run stopped while merging it; merged again from the start".into(),
    )
}
