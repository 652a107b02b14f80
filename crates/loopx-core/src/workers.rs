//! Many workers on one goal: the names a worker's branch, worktree, agent
//! and turn journal take, and the merge queue, the one owner of what
//! becomes of a worker's todo between its claim and its landing.
//!
//! A worker claims a todo through the goal's leases (one holder per todo,
//! whatever the host), works it in its own git worktree on its own branch,
//! and submits the branch. The queue merges one entry at a time onto the
//! target branch, and only a merge whose checks passed lands:
//!
//! ```text
//! working ──submit──▶ queued ──begin──▶ merging ──land──▶ landed
//!    ▲                  ▲                  │
//!    │                  └─────retry────────┤ reject (conflict, failed check)
//!    └──────assign (takeover)──────── needs-review
//! working | queued | needs-review ──discard──▶ discarded
//! ```
//!
//! `merging` records the merge commit it prepared before the target
//! branch moves ([`QueueRequest::Prepared`]), so a driver killed between
//! moving the branch and recording the landing is found out on restart
//! (the target holds the commit: it landed) instead of merged twice.
//!
//! Landed and discarded entries leave the active set for a bounded
//! history, so the queue's state grows with the work in flight, not with
//! the goal's age.

use crate::operation::{Decided, Owner};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

pub const STREAM: &str = "merge_queue";

/// Finished entries (landed, discarded) the queue remembers.
pub const HISTORY: usize = 100;

/// The most worker slots one driver runs.
pub const MAX_WORKERS: u32 = 32;

/// How many times the queue undoes an entry's merge before workers stop
/// taking its todo up by themselves: past it, the entry waits for the
/// operator (`loopx queue retry|discard`).
pub const MAX_REJECTIONS: u32 = 3;

/// The agent id worker `slot` (from 1) of the driver agent `agent` on
/// host `host` works under: its leases, its turns and its notes carry it,
/// so no two workers share one, on one host or many.
pub fn agent_id(agent: &str, slot: u32, host: &str) -> String {
    format!("{agent}.w{slot}@{host}")
}

/// The driver journal of worker `slot`'s turns on host `host`: one open
/// turn per worker, as the loop's own driver journal has one for the loop.
pub fn turn_stream(slot: u32, host: &str) -> String {
    format!("{}.w{slot}@{host}", crate::driver::STREAM)
}

/// The prefix of every worker turn journal, for the views.
pub const TURN_STREAMS: &str = "driver.w";

/// The driver journal a worker run on host `host` registers in: one per
/// host, so each host's driver binds its own workspace.
pub fn host_stream(host: &str) -> String {
    format!("{}@{host}", crate::driver::STREAM)
}

/// The prefix of every host's driver journal, for the views.
pub const HOST_STREAMS: &str = "driver@";

/// A host's id from its name and where its loop directory is (two loop
/// directories on one machine are two hosts): the name made an id
/// component, cut to 24 characters, and 6 hex digits of the digest of
/// both.
pub fn host_id(hostname: &str, loop_dir: &str) -> String {
    let name: String = component(hostname).chars().take(24).collect();
    let name = match name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        true => format!("h{name}"),
        false => name,
    };
    let digest =
        crate::digest::Digest::of_bytes(format!("{hostname}\n{loop_dir}").as_bytes()).to_string();
    let hex = digest.trim_start_matches("sha256:");
    format!("{name}-{}", &hex[..6])
}

/// How long another host's merge may go without a word before the queue
/// takes it for abandoned (its host died mid-merge) and merges it again:
/// longer than a project's checks take. Sooner, `loopx queue retry` puts
/// it back in line.
pub const ABANDONED_MERGE_SECONDS: i64 = 2 * 3600;

/// `id` as one component of a git ref and a directory name: ids may hold
/// `:`, `@` and `..`, which a ref may not, so anything but letters,
/// digits, `_` and `-` becomes `_`, and a name that changed gets the head
/// of the id's digest, so two ids never share a branch.
pub fn component(id: &str) -> String {
    let plain: String = id
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .collect();
    if plain == id {
        return plain;
    }
    let digest = crate::digest::Digest::of_bytes(id.as_bytes()).to_string();
    let hex = digest.trim_start_matches("sha256:");
    format!("{plain}-{}", &hex[..8])
}

/// The branch a worker works todo `todo` on in run `run`:
/// `loopx/<run>/<todo>`.
pub fn branch(run: &str, todo: &str) -> String {
    format!("loopx/{}/{}", component(run), component(todo))
}

/// Where todo `todo`'s worktree is, relative to the loop directory.
pub fn worktree(todo: &str) -> String {
    format!("{WORKTREES}/{}", component(todo))
}

/// The loop directory's folder of worker worktrees.
pub const WORKTREES: &str = "worktrees";

/// Where the queue prepares a merge, relative to the loop directory: a
/// worktree of its own, so the user's checkout is never a merge's
/// scratch space.
pub const MERGE_WORKTREE: &str = "worktrees/.merge";

/// How a queued branch goes onto the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MergeMode {
    /// A merge commit with the target tip and the branch as parents.
    #[default]
    Merge,
    /// The branch's commits replayed onto the target tip: a straight line.
    Rebase,
}

impl MergeMode {
    pub fn parse(text: &str) -> Option<MergeMode> {
        match text {
            "merge" => Some(MergeMode::Merge),
            "rebase" => Some(MergeMode::Rebase),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MergeMode::Merge => "merge",
            MergeMode::Rebase => "rebase",
        }
    }
}

/// Where an entry stands, in the words users of merge queues know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// A worker has the todo in its worktree.
    Working,
    Queued,
    Merging,
    Landed,
    /// The last merge was undone (a conflict, a failed check): the todo is
    /// back on the frontier and the worktree kept for the next attempt.
    #[serde(rename = "needs-review")]
    NeedsReview,
    Discarded,
}

impl EntryState {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryState::Working => "working",
            EntryState::Queued => "queued",
            EntryState::Merging => "merging",
            EntryState::Landed => "landed",
            EntryState::NeedsReview => "needs-review",
            EntryState::Discarded => "discarded",
        }
    }

    /// Landed or discarded: nothing more happens to it.
    pub fn is_final(self) -> bool {
        matches!(self, EntryState::Landed | EntryState::Discarded)
    }
}

/// Why a merge was undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rejection {
    /// The branch does not merge cleanly onto the target tip.
    Conflict,
    /// A configured check failed on the merged result.
    CheckFailed,
    /// The merged result could not be put on the target branch (it moved,
    /// or the checkout that has it out refused the fast-forward).
    LandFailed,
    /// The merge review (`drive --panel on`) rejected the change.
    ReviewRejected,
    /// The merge review was asked for and no reviewer decided.
    Unreviewed,
}

impl Rejection {
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::Conflict => "conflict",
            Rejection::CheckFailed => "check_failed",
            Rejection::LandFailed => "land_failed",
            Rejection::ReviewRejected => "review_rejected",
            Rejection::Unreviewed => "unreviewed",
        }
    }
}

/// One todo's way through the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub todo_id: String,
    pub title: String,
    pub state: EntryState,
    /// The worker (its agent id) that last worked it.
    pub worker: String,
    pub branch: String,
    /// Its worktree, relative to the loop directory.
    pub worktree: String,
    /// The target commit the branch was made from.
    pub base: String,
    /// The branch's commit as submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// Its place in line while queued (lower merges first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// The host merging it (while merging) or that merged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merger: Option<String>,
    /// The merge commit prepared while merging; the landed commit once landed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_commit: Option<String>,
    /// How many merges of it were undone.
    pub rejections: u32,
    /// Why its last merge was undone, or why it was discarded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection: Option<Rejection>,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Queue {
    /// Entries in flight, by todo id.
    pub active: BTreeMap<String, Entry>,
    /// The last [`HISTORY`] finished entries, oldest first.
    pub finished: VecDeque<Entry>,
    /// The next queued position to hand out.
    pub next_position: u64,
    pub landed: u64,
    pub discarded: u64,
}

impl Queue {
    /// The entry that merges next: the queued one first in line.
    pub fn head(&self) -> Option<&Entry> {
        self.active
            .values()
            .filter(|e| e.state == EntryState::Queued)
            .min_by_key(|e| e.position)
    }

    /// The entry being merged, if one is.
    pub fn merging(&self) -> Option<&Entry> {
        self.active
            .values()
            .find(|e| e.state == EntryState::Merging)
    }

    /// Whether the queue holds the todo so that no worker may take it up:
    /// it waits to merge or is merging.
    pub fn holds(&self, todo_id: &str) -> bool {
        self.active
            .get(todo_id)
            .is_some_and(|e| matches!(e.state, EntryState::Queued | EntryState::Merging))
    }

    /// Whether a worker may take `todo_id` up now: the queue does not
    /// hold it, and its merge was not undone [`MAX_REJECTIONS`] times.
    pub fn may_work(&self, todo_id: &str) -> bool {
        match self.active.get(todo_id) {
            None => true,
            Some(entry) => match entry.state {
                EntryState::Working => true,
                EntryState::NeedsReview => entry.rejections < MAX_REJECTIONS,
                _ => false,
            },
        }
    }

    /// The entry of `todo_id`, in flight or finished (the latest).
    pub fn find(&self, todo_id: &str) -> Option<&Entry> {
        self.active
            .get(todo_id)
            .or_else(|| self.finished.iter().rev().find(|e| e.todo_id == todo_id))
    }

    /// How many entries are in `state`.
    pub fn count(&self, state: EntryState) -> usize {
        match state {
            EntryState::Landed | EntryState::Discarded => {
                self.finished.iter().filter(|e| e.state == state).count()
            }
            _ => self.active.values().filter(|e| e.state == state).count(),
        }
    }
}

/// What a worker, the queue or the operator asks of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum QueueRequest {
    /// A worker took up the todo in its worktree: a new entry, or one
    /// whose merge was undone (or whose worker is gone) taken over.
    Assign {
        todo_id: String,
        title: String,
        worker: String,
        branch: String,
        worktree: String,
        base: String,
    },
    /// The worker's turn finished the todo at `head`.
    Submit {
        todo_id: String,
        worker: String,
        head: String,
    },
    /// Host `merger` starts merging the entry at the queue's head.
    Begin { todo_id: String, merger: String },
    /// The merge and its checks passed: `merge_commit` goes onto the
    /// target next.
    Prepared {
        todo_id: String,
        merge_commit: String,
    },
    /// The target branch holds `merge_commit`.
    Land {
        todo_id: String,
        merge_commit: String,
    },
    /// The merge was undone, for `reason`.
    Reject {
        todo_id: String,
        rejection: Rejection,
        reason: String,
    },
    /// Back in line: a merge interrupted before it landed, or the
    /// operator's retry of one that needs review.
    Requeue { todo_id: String, reason: String },
    /// Thrown away: no merge, the branch and worktree removed.
    Discard { todo_id: String, reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueEvent {
    pub entry: Entry,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueReceipt {
    pub todo_id: String,
    pub state: EntryState,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    #[error("todo {0} is not in the merge queue")]
    Unknown(String),
    #[error("todo {todo_id} is {state} in the merge queue; {what} needs it {needs}")]
    WrongState {
        todo_id: String,
        state: &'static str,
        what: &'static str,
        needs: &'static str,
    },
    #[error("todo {todo_id} is worked by {worker}, not {asked}")]
    OtherWorker {
        todo_id: String,
        worker: String,
        asked: String,
    },
    #[error("todo {merging} is merging: the queue merges one entry at a time")]
    Busy { merging: String },
    #[error("todo {todo_id} is not at the head of the queue ({head} is)")]
    NotHead { todo_id: String, head: String },
    #[error("{0}")]
    Invalid(String),
}

pub struct QueueOwner;

fn wrong(entry: &Entry, what: &'static str, needs: &'static str) -> QueueError {
    QueueError::WrongState {
        todo_id: entry.todo_id.clone(),
        state: entry.state.as_str(),
        what,
        needs,
    }
}

impl Owner for QueueOwner {
    type State = Queue;
    type Request = QueueRequest;
    type Event = QueueEvent;
    type Receipt = QueueReceipt;
    type Error = QueueError;
    type Context<'a> = Timestamp;

    fn decide(
        state: Option<&Queue>,
        request: &QueueRequest,
        now: &Timestamp,
    ) -> Result<Decided<QueueEvent, QueueReceipt>, QueueError> {
        let empty = Queue::default();
        let queue = state.unwrap_or(&empty);
        let entry_of = |todo_id: &str| {
            queue
                .active
                .get(todo_id)
                .ok_or_else(|| QueueError::Unknown(todo_id.to_owned()))
        };
        let next = |entry: Entry| {
            let receipt = QueueReceipt {
                todo_id: entry.todo_id.clone(),
                state: entry.state,
            };
            Ok(Decided::write(QueueEvent { entry }, receipt))
        };
        let same = |entry: &Entry| {
            Ok(Decided::unchanged(QueueReceipt {
                todo_id: entry.todo_id.clone(),
                state: entry.state,
            }))
        };
        let nonempty = |what: &str, value: &str| {
            if value.trim().is_empty() {
                Err(QueueError::Invalid(format!("{what} must not be empty")))
            } else {
                Ok(())
            }
        };
        match request {
            QueueRequest::Assign {
                todo_id,
                title,
                worker,
                branch,
                worktree,
                base,
            } => {
                nonempty("the worker", worker)?;
                nonempty("the base commit", base)?;
                match queue.active.get(todo_id) {
                    Some(entry)
                        if entry.state == EntryState::Working && &entry.worker == worker =>
                    {
                        same(entry)
                    }
                    // Taken over where it was left: same branch, same
                    // worktree, whatever the new worker would have named.
                    Some(entry)
                        if matches!(entry.state, EntryState::Working | EntryState::NeedsReview) =>
                    {
                        next(Entry {
                            state: EntryState::Working,
                            worker: worker.clone(),
                            updated_at: *now,
                            ..entry.clone()
                        })
                    }
                    Some(entry) => Err(wrong(
                        entry,
                        "a worker taking it up",
                        "working or needs-review",
                    )),
                    None => next(Entry {
                        todo_id: todo_id.clone(),
                        title: title.clone(),
                        state: EntryState::Working,
                        worker: worker.clone(),
                        branch: branch.clone(),
                        worktree: worktree.clone(),
                        base: base.clone(),
                        head: None,
                        position: None,
                        merger: None,
                        merge_commit: None,
                        rejections: 0,
                        reason: None,
                        rejection: None,
                        updated_at: *now,
                    }),
                }
            }
            QueueRequest::Submit {
                todo_id,
                worker,
                head,
            } => {
                nonempty("the submitted commit", head)?;
                let entry = entry_of(todo_id)?;
                if entry.state == EntryState::Queued && entry.head.as_ref() == Some(head) {
                    return same(entry);
                }
                if entry.state != EntryState::Working {
                    return Err(wrong(entry, "submitting", "working"));
                }
                if &entry.worker != worker {
                    return Err(QueueError::OtherWorker {
                        todo_id: todo_id.clone(),
                        worker: entry.worker.clone(),
                        asked: worker.clone(),
                    });
                }
                next(Entry {
                    state: EntryState::Queued,
                    head: Some(head.clone()),
                    position: Some(queue.next_position),
                    updated_at: *now,
                    ..entry.clone()
                })
            }
            QueueRequest::Begin { todo_id, merger } => {
                nonempty("the merging host", merger)?;
                let entry = entry_of(todo_id)?;
                if entry.state == EntryState::Merging && entry.merger.as_ref() == Some(merger) {
                    return same(entry);
                }
                if let Some(merging) = queue.merging() {
                    return Err(QueueError::Busy {
                        merging: merging.todo_id.clone(),
                    });
                }
                if entry.state != EntryState::Queued {
                    return Err(wrong(entry, "merging", "queued"));
                }
                let head = queue.head().expect("a queued entry exists");
                if &head.todo_id != todo_id {
                    return Err(QueueError::NotHead {
                        todo_id: todo_id.clone(),
                        head: head.todo_id.clone(),
                    });
                }
                next(Entry {
                    state: EntryState::Merging,
                    merger: Some(merger.clone()),
                    merge_commit: None,
                    updated_at: *now,
                    ..entry.clone()
                })
            }
            QueueRequest::Prepared {
                todo_id,
                merge_commit,
            } => {
                nonempty("the merge commit", merge_commit)?;
                let entry = entry_of(todo_id)?;
                if entry.state != EntryState::Merging {
                    return Err(wrong(entry, "a prepared merge", "merging"));
                }
                if entry.merge_commit.as_ref() == Some(merge_commit) {
                    return same(entry);
                }
                next(Entry {
                    merge_commit: Some(merge_commit.clone()),
                    updated_at: *now,
                    ..entry.clone()
                })
            }
            QueueRequest::Land {
                todo_id,
                merge_commit,
            } => {
                if let Some(done) = queue.finished.iter().rev().find(|e| &e.todo_id == todo_id) {
                    if done.state == EntryState::Landed
                        && done.merge_commit.as_ref() == Some(merge_commit)
                    {
                        return same(done);
                    }
                }
                let entry = entry_of(todo_id)?;
                if entry.state != EntryState::Merging {
                    return Err(wrong(entry, "landing", "merging"));
                }
                if entry.merge_commit.as_ref() != Some(merge_commit) {
                    return Err(QueueError::Invalid(format!(
                        "todo {todo_id} prepared {}, not {merge_commit}",
                        entry.merge_commit.as_deref().unwrap_or("no merge commit")
                    )));
                }
                next(Entry {
                    state: EntryState::Landed,
                    position: None,
                    updated_at: *now,
                    ..entry.clone()
                })
            }
            QueueRequest::Reject {
                todo_id,
                rejection,
                reason,
            } => {
                nonempty("the reason", reason)?;
                let entry = entry_of(todo_id)?;
                if entry.state != EntryState::Merging {
                    return Err(wrong(entry, "undoing a merge", "merging"));
                }
                next(Entry {
                    state: EntryState::NeedsReview,
                    position: None,
                    merge_commit: None,
                    rejections: entry.rejections + 1,
                    rejection: Some(*rejection),
                    reason: Some(crate::redact::redact_owned(reason)),
                    updated_at: *now,
                    ..entry.clone()
                })
            }
            QueueRequest::Requeue { todo_id, reason } => {
                nonempty("the reason", reason)?;
                let entry = entry_of(todo_id)?;
                if !matches!(entry.state, EntryState::Merging | EntryState::NeedsReview) {
                    return Err(wrong(entry, "requeueing", "merging or needs-review"));
                }
                if entry.head.is_none() {
                    return Err(QueueError::Invalid(format!(
                        "todo {todo_id} was never submitted"
                    )));
                }
                next(Entry {
                    state: EntryState::Queued,
                    position: Some(queue.next_position),
                    merge_commit: None,
                    reason: Some(crate::redact::redact_owned(reason)),
                    updated_at: *now,
                    ..entry.clone()
                })
            }
            QueueRequest::Discard { todo_id, reason } => {
                nonempty("the reason", reason)?;
                let entry = entry_of(todo_id)?;
                if entry.state == EntryState::Merging {
                    return Err(wrong(entry, "discarding", "not merging"));
                }
                next(Entry {
                    state: EntryState::Discarded,
                    position: None,
                    reason: Some(crate::redact::redact_owned(reason)),
                    updated_at: *now,
                    ..entry.clone()
                })
            }
        }
    }

    fn evolve(state: Option<Queue>, event: &QueueEvent) -> Queue {
        let mut queue = state.unwrap_or_default();
        let entry = event.entry.clone();
        if entry.position == Some(queue.next_position) {
            queue.next_position += 1;
        }
        if entry.state.is_final() {
            queue.active.remove(&entry.todo_id);
            match entry.state {
                EntryState::Landed => queue.landed += 1,
                _ => queue.discarded += 1,
            }
            queue.finished.push_back(entry);
            while queue.finished.len() > HISTORY {
                queue.finished.pop_front();
            }
        } else {
            queue.active.insert(entry.todo_id.clone(), entry);
        }
        queue
    }

    fn event_kind(event: &QueueEvent) -> &'static str {
        match event.entry.state {
            EntryState::Working => "queue.working",
            EntryState::Queued => "queue.queued",
            EntryState::Merging => "queue.merging",
            EntryState::Landed => "queue.landed",
            EntryState::NeedsReview => "queue.needs_review",
            EntryState::Discarded => "queue.discarded",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn apply(queue: Queue, request: QueueRequest) -> Result<Queue, QueueError> {
        let decided = QueueOwner::decide(Some(&queue), &request, &at(0))?;
        Ok(match decided.event {
            Some(event) => QueueOwner::evolve(Some(queue), &event),
            None => queue,
        })
    }

    fn assign(todo: &str, worker: &str) -> QueueRequest {
        QueueRequest::Assign {
            todo_id: todo.into(),
            title: format!("work {todo}"),
            worker: worker.into(),
            branch: branch("run", todo),
            worktree: worktree(todo),
            base: "base".into(),
        }
    }

    fn begin(todo: &str) -> QueueRequest {
        QueueRequest::Begin {
            todo_id: todo.into(),
            merger: "h".into(),
        }
    }

    fn submitted(queue: Queue, todo: &str, worker: &str) -> Queue {
        let queue = apply(queue, assign(todo, worker)).unwrap();
        apply(
            queue,
            QueueRequest::Submit {
                todo_id: todo.into(),
                worker: worker.into(),
                head: format!("head-{todo}"),
            },
        )
        .unwrap()
    }

    #[test]
    fn entries_merge_one_at_a_time_in_the_order_they_were_submitted() {
        let queue = submitted(Queue::default(), "b", "agent.w1");
        let queue = submitted(queue, "a", "agent.w2");
        assert_eq!(queue.head().unwrap().todo_id, "b", "first submitted first");
        let refused = apply(queue.clone(), begin("a"));
        assert!(
            matches!(refused, Err(QueueError::NotHead { .. })),
            "{refused:?}"
        );
        let queue = apply(queue, begin("b")).unwrap();
        let busy = apply(queue.clone(), begin("a"));
        assert!(matches!(busy, Err(QueueError::Busy { .. })), "{busy:?}");
        assert!(queue.holds("a") && queue.holds("b"));
    }

    #[test]
    fn a_landing_needs_the_commit_that_was_prepared_and_replays_once_landed() {
        let queue = submitted(Queue::default(), "a", "agent.w1");
        let queue = apply(queue, begin("a")).unwrap();
        let unprepared = apply(
            queue.clone(),
            QueueRequest::Land {
                todo_id: "a".into(),
                merge_commit: "m1".into(),
            },
        );
        assert!(unprepared.is_err(), "nothing was prepared");
        let queue = apply(
            queue,
            QueueRequest::Prepared {
                todo_id: "a".into(),
                merge_commit: "m1".into(),
            },
        )
        .unwrap();
        let land = QueueRequest::Land {
            todo_id: "a".into(),
            merge_commit: "m1".into(),
        };
        let queue = apply(queue, land.clone()).unwrap();
        assert!(queue.active.is_empty());
        assert_eq!(queue.find("a").unwrap().state, EntryState::Landed);
        assert_eq!(queue.landed, 1);
        let again = QueueOwner::decide(Some(&queue), &land, &at(1)).unwrap();
        assert!(
            again.event.is_none(),
            "a landing found again changes nothing"
        );
    }

    #[test]
    fn an_undone_merge_needs_review_and_a_worker_takes_it_over_on_the_same_branch() {
        let queue = submitted(Queue::default(), "a", "agent.w1");
        let queue = apply(queue, begin("a")).unwrap();
        let queue = apply(
            queue,
            QueueRequest::Reject {
                todo_id: "a".into(),
                rejection: Rejection::Conflict,
                reason: "CONFLICT in src/lib.rs".into(),
            },
        )
        .unwrap();
        let entry = &queue.active["a"];
        assert_eq!(entry.state, EntryState::NeedsReview);
        assert_eq!(entry.rejections, 1);
        assert!(!queue.holds("a"), "back on the frontier");
        let mut taken = assign("a", "agent.w3");
        if let QueueRequest::Assign { branch, .. } = &mut taken {
            *branch = "another/branch".into();
        }
        let queue = apply(queue, taken).unwrap();
        let entry = &queue.active["a"];
        assert_eq!(entry.state, EntryState::Working);
        assert_eq!(entry.worker, "agent.w3");
        assert_eq!(entry.branch, branch("run", "a"), "the kept branch");
    }

    #[test]
    fn only_the_worker_that_has_it_submits_and_a_merging_entry_is_not_discarded() {
        let queue = apply(Queue::default(), assign("a", "agent.w1")).unwrap();
        let other = apply(
            queue.clone(),
            QueueRequest::Submit {
                todo_id: "a".into(),
                worker: "agent.w2".into(),
                head: "h".into(),
            },
        );
        assert!(
            matches!(other, Err(QueueError::OtherWorker { .. })),
            "{other:?}"
        );
        let queue = submitted(Queue::default(), "a", "agent.w1");
        let queue = apply(queue, begin("a")).unwrap();
        let discard = apply(
            queue,
            QueueRequest::Discard {
                todo_id: "a".into(),
                reason: "no".into(),
            },
        );
        assert!(
            matches!(discard, Err(QueueError::WrongState { .. })),
            "{discard:?}"
        );
    }

    #[test]
    fn finished_entries_are_a_bounded_history() {
        let mut queue = Queue::default();
        for n in 0..(HISTORY + 20) {
            let todo = format!("t{n}");
            queue = apply(queue, assign(&todo, "agent.w1")).unwrap();
            queue = apply(
                queue,
                QueueRequest::Discard {
                    todo_id: todo,
                    reason: "dropped".into(),
                },
            )
            .unwrap();
        }
        assert_eq!(queue.finished.len(), HISTORY);
        assert_eq!(queue.discarded, (HISTORY + 20) as u64);
        assert!(queue.active.is_empty());
    }

    #[test]
    fn names_are_refs_and_directories_whatever_the_id() {
        assert_eq!(branch("r1", "t7"), "loopx/r1/t7");
        assert_eq!(worktree("t7"), "worktrees/t7");
        let odd = component("a..b:c@d");
        assert!(odd.starts_with("a__b_c_d-"), "{odd}");
        assert_ne!(
            component("a:b"),
            component("a@b"),
            "distinct ids, distinct names"
        );
        assert!(!odd.contains('.') && !odd.contains(':'));
        assert_eq!(agent_id("agent", 2, "box-1a2b3c"), "agent.w2@box-1a2b3c");
        assert_eq!(turn_stream(2, "box-1a2b3c"), "driver.w2@box-1a2b3c");
        let a = host_id("build.example.com", "/srv/a/.loopx");
        let b = host_id("build.example.com", "/srv/b/.loopx");
        assert_ne!(a, b, "two loop directories are two hosts");
        assert!(a.starts_with("build_example_com-"), "{a}");
        crate::ident::check(crate::ident::IdKind::Agent, &agent_id("agent", 32, &a)).unwrap();
        assert!(host_id("", "/x").starts_with('h'));
    }
}
