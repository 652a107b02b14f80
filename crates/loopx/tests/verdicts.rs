//! How a loop ended, in the same words and tone in `status`, `done`,
//! their `--json`, and a notification, on the real binary: a verified
//! success, a proven early stop, a stop by the user, a spent budget, the
//! iteration cap, and an agent that declared itself blocked.

mod common;

use common::Fixture;
use serde_json::Value;

/// What every view says of the loop in `f`: (status text, status JSON's
/// ending, done text, done JSON's ending).
fn views(f: &Fixture) -> (String, Value, String, Value) {
    let text = |command: &str| {
        let output = f.loopx().args([command, "--dir", f.d()]).output().unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    (
        text("status"),
        f.json(&["status", "--dir", f.d()])["ending"].clone(),
        text("done"),
        f.json(&["done", "--dir", f.d()])["ending"].clone(),
    )
}

/// Every view agrees on `words`, `kind` and `tone`.
fn assert_ended(f: &Fixture, kind: &str, tone: &str, words: &str) {
    let (status, status_json, done, done_json) = views(f);
    assert!(
        status.contains(&format!("  status      {words}\n")),
        "status: {status}"
    );
    assert!(done.starts_with(words), "done: {done}");
    for ending in [&status_json, &done_json] {
        assert_eq!(ending["kind"], kind, "{ending}");
        assert_eq!(ending["tone"], tone, "{ending}");
        assert_eq!(ending["words"], words, "{ending}");
    }
}

#[test]
fn a_verified_success_check_reads_as_success_everywhere() {
    let f = Fixture::new();
    f.init(5, &["--success-check", "true"]);
    f.write_proof("q");
    f.append("stop", &["--stop-reason", "success", "--evidence-id", "q"])
        .success();
    f.loopx()
        .args(["verify", "--dir", f.d()])
        .assert()
        .success();
    assert_ended(
        &f,
        "succeeded",
        "good",
        "succeeded: iteration 1's success check passed",
    );
    // The arbiter's code is still there for scripts.
    let (_, _, done, _) = views(&f);
    assert!(done.contains("[done: terminal_status:stopped]"), "{done}");
}

#[test]
fn an_early_stop_with_proof_succeeds_and_the_cap_is_not_a_success() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.write_proof("q");
    f.append(
        "stop",
        &["--stop-reason", "proof_found", "--evidence-id", "q"],
    )
    .success();
    assert_ended(
        &f,
        "succeeded",
        "good",
        "succeeded: iteration 1 stopped with a valid proof artifact",
    );

    let capped = Fixture::new();
    capped.init(2, &[]);
    capped.append("continue", &[]).success();
    capped
        .append("stop", &["--stop-reason", "success"])
        .success();
    assert_ended(
        &capped,
        "iteration_cap",
        "attention",
        "finished at the iteration cap: 2 iterations recorded, no success claimed",
    );
}

#[test]
fn a_user_stop_a_spent_budget_and_a_block_say_which() {
    let f = Fixture::new();
    f.init(5, &[]);
    std::fs::write(f.dir.join("STOP_REQUESTED"), "").unwrap();
    assert_ended(
        &f,
        "stopped_by_user",
        "neutral",
        "stopped by the user (STOP_REQUESTED)",
    );

    let spent = Fixture::new();
    spent.init(5, &["--max-tokens", "100"]);
    spent
        .append("stop", &["--tokens", "150", "--stop-reason", "budget"])
        .success();
    assert_ended(
        &spent,
        "budget_exhausted",
        "attention",
        "budget exhausted: the token budget is used up",
    );

    let blocked = Fixture::new();
    blocked.init(1, &[]);
    blocked
        .append("blocked", &["--stop-reason", "no access to the dataset"])
        .success();
    assert_ended(
        &blocked,
        "needs_person",
        "bad",
        "needs a person: the agent reported itself blocked on iteration 1 (no access to the dataset)",
    );
}

#[test]
fn a_notification_says_the_ending_in_the_same_words() {
    let f = Fixture::new();
    f.init(5, &[]);
    std::fs::write(f.dir.join("STOP_REQUESTED"), "").unwrap();
    let sent = f.json(&["notify-event", "--dir", f.d(), "--event", "stop"]);
    let text = sent.to_string();
    assert!(
        text.contains("loop stopped by the user (STOP_REQUESTED)"),
        "{sent}"
    );
}
