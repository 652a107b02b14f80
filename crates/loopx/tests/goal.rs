//! The goal authority through the real binary and SQLite file: the RFC's
//! decisive acceptance items 1-6, 8, 9 and 10, plus leases and adoption.

mod common;

use common::Fixture;
use predicates::str::contains;
use serde_json::{json, Value};
use std::process::Command;

impl Fixture {
    fn doc(&self, name: &str, value: &Value) -> String {
        let path = self.temp.path().join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path.display().to_string()
    }

    /// Run `loopx <args> --dir D --json` as `agent` (None = the owner).
    fn goal_json(&self, agent: Option<&str>, args: &[&str]) -> (bool, Value, String) {
        let mut command = self.loopx();
        command.args(args).args(["--dir", self.d(), "--json"]);
        if let Some(agent) = agent {
            command.env("LOOPX_AGENT_ID", agent);
        }
        let output = command.output().unwrap();
        let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        (
            output.status.success(),
            json,
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    fn ok(&self, agent: Option<&str>, args: &[&str]) -> Value {
        let (ok, json, stderr) = self.goal_json(agent, args);
        assert!(ok, "{args:?} failed: {stderr}");
        json
    }

    fn refused(&self, agent: Option<&str>, args: &[&str], expected: &str) {
        let (ok, _, stderr) = self.goal_json(agent, args);
        assert!(!ok, "{args:?} was accepted");
        assert!(
            stderr.contains(expected),
            "{args:?}: expected {expected:?} in {stderr}"
        );
    }

    fn refine_refused(&self, agent: Option<&str>, document: &str, op: &str, expected: &str) {
        self.refused(
            agent,
            &[
                "goal-acceptance",
                "refine-outcome",
                "--document",
                document,
                "--operation-id",
                op,
            ],
            expected,
        );
    }

    fn inspect(&self) -> Value {
        self.ok(None, &["goal-acceptance", "inspect"])
    }

    fn refine(&self, agent: &str, name: &str, document: Value, op: &str) -> Value {
        let path = self.doc(name, &document);
        self.ok(
            Some(agent),
            &[
                "goal-acceptance",
                "refine-outcome",
                "--document",
                &path,
                "--operation-id",
                op,
            ],
        )
    }
}

fn deck(todo: &str) -> Value {
    json!({
        "outcome_id": "deck",
        "objective": "A talk deck that keeps the accepted introduction",
        "add_requirements": [{"id": "R1", "description": "Keep the accepted introduction slide first"}],
        "link_todos": [todo],
        "source": {"ref": "msg-1", "summary": "user: keep my intro"}
    })
}

fn second_refinement() -> Value {
    json!({
        "outcome_id": "deck",
        "add_requirements": [{"id": "R2", "description": "Put results before methods"}],
        "source": {"ref": "msg-2", "summary": "user: results first"}
    })
}

fn setup() -> Fixture {
    let f = Fixture::new();
    f.init(
        20,
        &[
            "--non-goal",
            "no new experiments",
            "--acceptance",
            "the user approves the deck",
        ],
    );
    f.ok(None, &["todo", "add", "--title", "Build the deck"]);
    f.ok(None, &["todo", "add", "--title", "Write the abstract"]);
    f
}

fn should_run(f: &Fixture, agent: Option<&str>) -> Value {
    f.ok(agent, &["quota", "should-run"])
}

#[test]
fn refinement_accumulates_across_processes_and_keeps_lineage() {
    let f = setup();
    // 1. Record an outcome with a first requirement, linked to real work.
    let created = f.refine("a", "o1.json", deck("t1"), "refine-1");
    assert_eq!(
        created["effects"],
        json!([
            "outcome_created",
            "requirements_added",
            "work_linked",
            "sources_added"
        ])
    );
    let before = f.inspect();
    // 2. A second refinement preserves what was there byte for byte.
    f.refine("a", "o2.json", second_refinement(), "refine-2");
    let after = f.inspect();
    assert_eq!(after["original_objective"], before["original_objective"]);
    let (old, new) = (&before["outcomes"][0], &after["outcomes"][0]);
    assert_eq!(new["original_objective"], old["original_objective"]);
    assert_eq!(new["requirements"][0], old["requirements"][0]);
    assert_eq!(new["requirements"][1]["id"], "R2");
    assert_eq!(new["requirements"][1]["source_ref"], "msg-2");
    assert_eq!(
        after["commitments"]["non_goals"],
        json!(["no new experiments"])
    );
    // 3. A fresh process that switches work still reads both requirements and their lineage.
    f.ok(Some("a"), &["todo", "claim", "t2"]);
    let body = f.ok(Some("a"), &["task-body"]);
    let text = body["body"].as_str().unwrap();
    assert!(
        text.contains("R1 [unreviewed] Keep the accepted introduction slide first"),
        "{text}"
    );
    assert!(
        text.contains("R2 [unreviewed] Put results before methods"),
        "{text}"
    );
    let readback = f.inspect();
    let sources: Vec<&str> = readback["outcomes"][0]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["source_ref"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["msg-1", "msg-2"]);
}

#[test]
fn a_finished_linked_todo_does_not_meet_the_outcome() {
    let f = setup();
    f.refine("a", "o1.json", deck("t1"), "refine-1");
    f.ok(Some("a"), &["todo", "claim", "t1"]);
    f.ok(
        Some("a"),
        &["todo", "complete", "t1", "--note", "deck drafted"],
    );
    let review = json!({"outcome_id": "deck", "reviews": [{"requirement_id": "R1", "conclusion": "unmet", "reasoning": "intro moved to slide 3", "evidence_refs": ["deck.pdf#3"]}]});
    f.refine("a", "review.json", review, "review-1");
    let readback = f.inspect();
    assert_eq!(readback["outcomes"][0]["status"], "unmet");
    assert_eq!(readback["outcomes"][0]["configured_checks"], json!([]));
    assert_eq!(readback["gaps"][0]["outcome_id"], "deck");
    // The other todo is still the next action; the gap rides along.
    let decision = should_run(&f, Some("a"));
    assert_eq!(decision["selected_todo"]["id"], "t2");
    assert_eq!(decision["open_gaps"][0]["unresolved"][0]["state"], "unmet");
    f.ok(None, &["todo", "complete", "t2"]);
    let decision = should_run(&f, Some("a"));
    assert_eq!(
        decision["scheduler_hint"]["reason_code"],
        "outcome_gap_replan"
    );
}

#[test]
fn unsafe_writes_are_refused_and_change_nothing_while_a_replay_writes_once() {
    let f = setup();
    f.refine("a", "o1.json", deck("t1"), "refine-1");
    let before = f.fingerprint();
    let lost = f.doc("lost.json", &json!({"outcome_id": "deck", "requirements": [{"id": "R9", "description": "x"}], "source": {"ref": "m"}}));
    let changed = f.doc("changed.json", &json!({"outcome_id": "deck", "add_requirements": [{"id": "R1", "description": "Changed text"}], "source": {"ref": "m"}}));
    let missing_work = f.doc(
        "work.json",
        &json!({"outcome_id": "deck", "link_todos": ["t42"]}),
    );
    let bad_json = f.doc("bad.json", &json!({"outcome_id": "deck", "surprise": true}));
    let revision = f.doc("revision.json", &json!({"objective": "Write the talk and the paper", "reason": "user widened scope", "source_ref": "msg-5"}));
    let cases: Vec<(Option<&str>, Vec<&str>, &str)> = vec![
        (
            Some("a"),
            vec!["goal-acceptance", "refine-outcome", "--document", &lost],
            "may not lose a requirement",
        ),
        (
            Some("a"),
            vec!["goal-acceptance", "refine-outcome", "--document", &changed],
            "append-only",
        ),
        (
            Some("b"),
            vec!["goal-acceptance", "refine-outcome", "--document", &changed],
            "belongs to agent a",
        ),
        (
            Some("a"),
            vec![
                "goal-acceptance",
                "refine-outcome",
                "--document",
                &missing_work,
            ],
            "todo t42 does not exist",
        ),
        (
            Some("a"),
            vec!["goal-acceptance", "refine-outcome", "--document", &bad_json],
            "unknown field",
        ),
        (
            None,
            vec![
                "goal-acceptance",
                "revise-objective",
                "--document",
                &revision,
                "--expected-provider-revision",
                "1",
                "--execute",
            ],
            "stale base revision",
        ),
        (
            Some("a"),
            vec![
                "goal-acceptance",
                "revise-objective",
                "--document",
                &revision,
                "--expected-provider-revision",
                "4",
                "--execute",
            ],
            "only the goal's owner",
        ),
        // The same operation id with a different request:
        (
            Some("a"),
            vec![
                "goal-acceptance",
                "refine-outcome",
                "--document",
                &missing_work,
                "--operation-id",
                "refine-1",
            ],
            "already used for a different request",
        ),
        (
            Some("a"),
            vec!["todo", "claim", "t1", "--goal-instance", "main#7"],
            "current instance is main#1",
        ),
    ];
    for (agent, args, expected) in cases {
        f.refused(agent, &args, expected);
        assert_eq!(f.fingerprint(), before, "{args:?} changed the loop");
    }
    // Previews write nothing either.
    f.ok(
        None,
        &[
            "goal-acceptance",
            "revise-objective",
            "--document",
            &revision,
            "--expected-provider-revision",
            "4",
        ],
    );
    assert_eq!(f.fingerprint(), before);
    // An exact replay returns the receipt and writes nothing.
    let replay = f.refine("a", "o1.json", deck("t1"), "refine-1");
    assert_eq!(replay["replayed"], true);
    assert_eq!(f.fingerprint(), before);
    // A foreign agent replaying the same operation id is a different request.
    let path = f.doc("o1.json", &deck("t1"));
    f.refine_refused(Some("b"), &path, "refine-1", "different request");
}

#[test]
fn outcome_reviews_never_change_admission_or_root_state() {
    let f = setup();
    let baseline = should_run(&f, None);
    let root = |v: Value| (v["original_objective"].clone(), v["commitments"].clone());
    let root_before = root(f.inspect());
    let status_before = f.json(&["status", "--dir", f.d()]);
    f.refine("a", "o1.json", deck("t2"), "refine-1");
    for (n, conclusion) in ["uncertain", "unmet", "met"].iter().enumerate() {
        let review = json!({"outcome_id": "deck", "reviews": [{"requirement_id": "R1", "conclusion": conclusion, "reasoning": "checked", "evidence_refs": ["deck.pdf"]}]});
        f.refine("a", &format!("r{n}.json"), review, &format!("review-{n}"));
        let decision = should_run(&f, None);
        assert_eq!(
            decision["selected_todo"], baseline["selected_todo"],
            "{conclusion}"
        );
        assert_eq!(decision["scheduler_hint"]["action"], "run_now");
        assert_eq!(root(f.inspect()), root_before);
        let status = f.json(&["status", "--dir", f.d()]);
        assert_eq!(
            (&status["state_status"], &status["spent"], &status["done"]),
            (
                &status_before["state_status"],
                &status_before["spent"],
                &status_before["done"]
            )
        );
    }
    // Waits are their own thing: a blocked or deferred frontier backs off.
    f.ok(
        None,
        &[
            "todo",
            "block",
            "t1",
            "--reason",
            "needs the venue template",
        ],
    );
    f.ok(None, &["todo", "defer", "t2", "--for", "2h"]);
    let decision = should_run(&f, None);
    assert_eq!(decision["scheduler_hint"]["reason_code"], "todos_deferred");
    let continuation = &decision["scheduler_hint"]["goal_runtime_continuation"];
    assert_eq!(continuation["disposition"], "defer");
    assert_eq!(continuation["wake_policy"], "state_change_or_deadline");
    let seconds = continuation["recheck_after_seconds"].as_u64().unwrap();
    assert!((7100..=7200).contains(&seconds), "{seconds}");
}

#[test]
fn gap_acknowledgement_holds_until_something_material_changes() {
    let f = setup();
    // More than three outcomes, one of them still covered by held work.
    for n in 0..4 {
        let todo = f.ok(None, &["todo", "add", "--title", &format!("work {n}")])["todo_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let doc = json!({"outcome_id": format!("o{n}"), "objective": format!("outcome {n}"), "add_requirements": [{"id": "R1", "description": "must hold"}], "link_todos": [todo], "source": {"ref": format!("m{n}")}});
        f.refine("a", &format!("o{n}.json"), doc, &format!("create-{n}"));
        if n < 3 {
            f.ok(None, &["todo", "complete", &todo]);
        } else {
            f.ok(Some("a"), &["todo", "claim", &todo]);
        }
    }
    let gaps = f.inspect()["gaps"].as_array().unwrap().clone();
    assert_eq!(
        gaps.iter()
            .map(|g| g["outcome_id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["o0", "o1", "o2"],
        "held work covers o3"
    );
    for gap in &gaps {
        let checkpoint = gap["checkpoint"].as_str().unwrap();
        f.ok(
            Some("a"),
            &[
                "goal-acceptance",
                "ack-gap",
                "--outcome-id",
                gap["outcome_id"].as_str().unwrap(),
                "--checkpoint",
                checkpoint,
            ],
        );
    }
    let open = |f: &Fixture| {
        should_run(f, Some("a"))["open_gaps"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(open(&f), 0);
    // Repeated reads, a source-only refinement and a reworded review do not re-demand it.
    let before = f.fingerprint();
    for _ in 0..3 {
        should_run(&f, Some("a"));
        f.inspect();
    }
    assert_eq!(f.fingerprint(), before, "reads wrote something");
    f.refine(
        "a",
        "src.json",
        json!({"outcome_id": "o0", "source": {"ref": "m-extra"}}),
        "source-only",
    );
    let unmet = |reasoning: &str| json!({"outcome_id": "o1", "reviews": [{"requirement_id": "R1", "conclusion": "unmet", "reasoning": reasoning, "evidence_refs": ["a.txt"]}]});
    f.refine("a", "rev1.json", unmet("first look"), "review-a");
    assert_eq!(open(&f), 1, "a changed conclusion re-raises o1");
    let checkpoint = f.inspect()["gaps"][1]["checkpoint"]
        .as_str()
        .unwrap()
        .to_owned();
    f.ok(
        Some("a"),
        &[
            "goal-acceptance",
            "ack-gap",
            "--outcome-id",
            "o1",
            "--checkpoint",
            &checkpoint,
        ],
    );
    f.refine(
        "a",
        "rev2.json",
        unmet("second look, same verdict"),
        "review-b",
    );
    assert_eq!(open(&f), 0, "rewording a review is not material");
    // New requirements are.
    f.refine("a", "new.json", json!({"outcome_id": "o2", "add_requirements": [{"id": "R2", "description": "more"}], "source": {"ref": "m9"}}), "new-req");
    assert_eq!(open(&f), 1);
}

#[test]
fn a_lost_reply_after_commit_is_recovered_by_replaying_once() {
    let f = setup();
    let path = f.doc("o1.json", &deck("t1"));
    let mut command = Command::new(common::loopx_path());
    command
        .args([
            "goal-acceptance",
            "refine-outcome",
            "--dir",
            f.d(),
            "--document",
            &path,
            "--operation-id",
            "lost-reply",
        ])
        .env("LOOPX_AGENT_ID", "a");
    common::kill_at_failpoint(command, "sqlite.commit.after_commit");
    // The caller never saw the receipt. The controller restarts and other work is admitted.
    f.ok(Some("a"), &["todo", "claim", "t2"]);
    let replay = f.refine("a", "o1.json", deck("t1"), "lost-reply");
    assert_eq!(replay["replayed"], true);
    assert_eq!(
        f.inspect()["outcomes"][0]["requirements"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // A changed request, another agent or another goal instance under that id is refused.
    let changed = f.doc("o1b.json", &second_refinement());
    f.refine_refused(Some("a"), &changed, "lost-reply", "different request");
    f.refine_refused(Some("b"), &path, "lost-reply", "different request");
    // A paused loop admits nothing new.
    std::fs::write(f.dir.join("PAUSE"), "").unwrap();
    assert_eq!(
        should_run(&f, Some("a"))["scheduler_hint"]["action"],
        "backoff_waiting_for_user"
    );
}

#[test]
fn a_successor_lifetime_starts_clean_and_predecessor_replays_do_not_touch_it() {
    let f = setup();
    f.refine("a", "o1.json", deck("t1"), "old-refine");
    f.refused(
        Some("a"),
        &["goal-acceptance", "recreate", "--objective", "New talk"],
        "only the goal's owner",
    );
    let recreated = f.ok(
        None,
        &[
            "goal-acceptance",
            "recreate",
            "--objective",
            "Write the keynote",
            "--reason",
            "new venue",
        ],
    );
    assert_eq!(
        (
            recreated["instance_id"].as_str(),
            recreated["predecessor"].as_str()
        ),
        (Some("main#2"), Some("main#1"))
    );
    let readback = f.inspect();
    assert_eq!(
        (
            readback["lifetime"].as_u64(),
            readback["outcomes"].as_array().unwrap().len()
        ),
        (Some(2), 0)
    );
    assert_eq!(readback["retired_lifetimes"][0]["outcomes"], 1);
    f.ok(None, &["todo", "add", "--title", "Keynote deck"]);
    f.refine("a", "k.json", json!({"outcome_id": "keynote", "objective": "A keynote", "add_requirements": [{"id": "K1", "description": "20 minutes"}], "link_todos": ["t1"], "source": {"ref": "k"}}), "new-refine");
    let current = f.inspect()["outcomes"].clone();
    // The predecessor's operation replays its old receipt and writes nothing.
    let replay = f.refine("a", "o1.json", deck("t1"), "old-refine");
    assert_eq!(
        (replay["replayed"].as_bool(), replay["instance_id"].as_str()),
        (Some(true), Some("main#1"))
    );
    assert_eq!(f.inspect()["outcomes"], current);
    // A new request bound to the old instance is refused.
    let path = f.doc("o1.json", &deck("t1"));
    f.refused(
        Some("a"),
        &[
            "goal-acceptance",
            "refine-outcome",
            "--document",
            &path,
            "--goal-instance",
            "main#1",
        ],
        "current instance is main#2",
    );
}

#[test]
fn a_second_agent_must_adopt_a_revised_objective_before_new_work() {
    let f = setup();
    f.ok(Some("a"), &["todo", "claim", "t1"]);
    // One agent: no registration or adoption needed.
    for agent in ["a", "b"] {
        f.ok(
            None,
            &["goal-acceptance", "register-agent", "--agent-id", agent],
        );
    }
    let doc = f.doc("revision.json", &json!({"objective": "Write the talk and a two-page abstract", "reason": "user asked", "source_ref": "msg-5"}));
    let proposal = f.ok(
        Some("b"),
        &[
            "goal-acceptance",
            "prepare-objective",
            "--document",
            &doc,
            "--execute",
        ],
    );
    assert_eq!(proposal["effects"], json!(["objective_proposed"]));
    let revision = f.inspect()["provider_revision"]
        .as_u64()
        .unwrap()
        .to_string();
    let revised = f.ok(
        None,
        &[
            "goal-acceptance",
            "revise-objective",
            "--document",
            &doc,
            "--expected-provider-revision",
            &revision,
            "--execute",
        ],
    );
    assert_eq!(revised["revision"], 1);
    f.refused(
        Some("b"),
        &["todo", "claim", "t2"],
        "has not adopted objective revision 1",
    );
    // What a holds stays workable: renew and release.
    f.ok(Some("a"), &["todo", "renew", "t1"]);
    let view = f.ok(
        Some("b"),
        &["goal-acceptance", "inspect", "--agent-id", "b"],
    );
    let states: Vec<_> = view["objective"]["adoption"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["state"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(states, ["pending", "pending"]);
    let (digest, work) = (
        view["objective"]["current_digest"].as_str().unwrap(),
        view["objective"]["objective_work_digest"].as_str().unwrap(),
    );
    let adopt = [
        "goal-acceptance",
        "adopt-objective",
        "--revision",
        "1",
        "--digest",
        digest,
        "--work-digest",
        work,
        "--review-summary",
        "my todos fit the new scope",
    ];
    f.ok(Some("b"), &adopt);
    f.ok(Some("b"), &["todo", "claim", "t2"]);
    let before = f.fingerprint();
    let again = f.ok(Some("b"), &adopt);
    assert_eq!(again["unchanged"], true);
    assert_eq!(
        f.fingerprint(),
        before,
        "an unchanged repeated adoption wrote"
    );
}

#[test]
fn refresh_state_commits_the_refinement_first_and_a_retry_finishes_once() {
    let f = setup();
    f.refine("a", "o1.json", deck("t1"), "refine-1");
    f.ok(Some("b"), &["todo", "claim", "t2"]);
    let update = f.doc("u.json", &second_refinement());
    let writeback = [
        "refresh-state",
        "--note",
        "turn done",
        "--complete",
        "t2",
        "--goal-outcome-update-json",
        &update,
        "--operation-id",
        "turn-7",
    ];
    let (ok, _, stderr) = f.goal_json(Some("a"), &writeback);
    assert!(!ok);
    assert!(
        stderr.contains("already committed") && stderr.contains("turn-7.outcome"),
        "{stderr}"
    );
    assert_eq!(
        f.inspect()["outcomes"][0]["requirements"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    f.ok(Some("b"), &["todo", "release", "t2"]);
    let done = f.ok(Some("a"), &writeback);
    assert_eq!(done["outcome"]["replayed"], true);
    let readback = f.inspect();
    assert_eq!(
        readback["outcomes"][0]["requirements"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "no duplicate requirement"
    );
    assert_eq!(readback["todos"][1]["status"], "done");
}

#[test]
fn the_task_body_is_byte_identical_until_the_frontier_changes() {
    let f = setup();
    f.refine("a", "o1.json", deck("t1"), "refine-1");
    let body = || {
        f.loopx()
            .args(["task-body", "--dir", f.d()])
            .output()
            .unwrap()
            .stdout
    };
    let first = body();
    assert_eq!(first, body());
    assert!(first.len() < 8 * 1024, "{} bytes", first.len());
    f.ok(None, &["todo", "complete", "t1"]);
    assert_ne!(first, body());
}

#[test]
fn goal_reads_on_a_fresh_loop_write_nothing() {
    let f = Fixture::new();
    f.init(5, &[]);
    let before = f.fingerprint();
    for args in [
        vec!["quota", "should-run"],
        vec!["task-body"],
        vec!["goal-acceptance", "inspect"],
        vec!["todo", "list"],
    ] {
        f.ok(None, &args);
    }
    assert_eq!(f.fingerprint(), before);
    f.loopx()
        .args(["todo", "claim", "t1", "--dir", f.d()])
        .assert()
        .failure()
        .stderr(contains("todo t1 does not exist"));
    assert_eq!(
        should_run(&f, None)["scheduler_hint"]["reason_code"],
        "ledger_next_iteration"
    );
}

#[test]
fn a_dry_run_refinement_writes_nothing_and_says_how_to_write_it() {
    let f = setup();
    let before = f.fingerprint();
    let path = f.doc("o1.json", &deck("t1"));
    let output = f
        .loopx()
        .args(["goal-acceptance", "refine-outcome", "--dir", f.d()])
        .args(["--document", &path, "--dry-run"])
        .env("LOOPX_AGENT_ID", "a")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains("preview (nothing written): outcome_created")
            && text.contains("run it without --dry-run to write"),
        "{text}"
    );
    let json = f.ok(
        Some("a"),
        &[
            "goal-acceptance",
            "refine-outcome",
            "--document",
            &path,
            "--dry-run",
        ],
    );
    assert_eq!(
        (json["action"].as_str(), json["would_write"].as_bool()),
        (Some("preview"), Some(true))
    );
    assert_eq!(f.fingerprint(), before);
}
