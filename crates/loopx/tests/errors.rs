//! Every failure the CLI can report is classified once: `--json` error
//! bodies name the class (refused, conflict, stale, not_found), stderr says
//! `error: ...`, and a refusal leaves the loop directory unchanged.

mod common;

use common::Fixture;
use serde_json::{json, Value};

/// Run a failing command with `--json`; its exit code, JSON body, stderr.
fn failing(f: &Fixture, args: &[&str]) -> (i32, Value, String) {
    let output = f.loopx().args(args).arg("--json").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let body: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}): {stderr}"));
    (output.status.code().unwrap(), body, stderr)
}

fn assert_failed(body: &Value, class: &str, stderr: &str) {
    assert_eq!(body["status"], "failed", "{body}");
    assert_eq!(body["class"], class, "{body}");
    let message = body["error"].as_str().unwrap();
    assert!(
        stderr.contains(&format!("error: {message}")),
        "stderr {stderr:?} lacks the message {message:?}"
    );
}

#[test]
fn a_rule_refusal_is_class_refused_and_changes_nothing() {
    let f = Fixture::new();
    f.init(3, &[]);
    let before = f.fingerprint();
    let (code, body, stderr) = failing(
        &f,
        &[
            "init",
            "--dir",
            f.d(),
            "--goal",
            "Another goal",
            "--success-criteria",
            "x",
        ],
    );
    assert_eq!(code, 1);
    assert_failed(&body, "refused", &stderr);
    assert!(body["error"]
        .as_str()
        .unwrap()
        .contains("already holds loop"));
    assert_eq!(f.fingerprint(), before);
}

#[test]
fn a_reused_operation_id_with_another_request_is_class_conflict() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.append("continue", &["--operation-id", "op-1"]).success();
    let before = f.fingerprint();
    let mut args = f.append_words("revise");
    args.extend(["--operation-id", "op-1"]);
    let (code, body, stderr) = failing(&f, &args);
    assert_eq!(code, 1);
    assert_failed(&body, "conflict", &stderr);
    assert_eq!(body["reason"], "operation_conflict");
    assert!(stderr.contains("hint: "), "{stderr}");
    assert_eq!(f.fingerprint(), before);
}

#[test]
fn a_write_against_an_old_revision_is_class_stale_with_the_current_one() {
    let f = Fixture::new();
    f.init(5, &[]);
    let add_todo = |title: &str| {
        f.loopx()
            .args(["todo", "add", "--dir", f.d(), "--title", title])
            .assert()
            .success();
    };
    add_todo("Read the sources");
    let inspect = f.json(&["goal-acceptance", "inspect", "--dir", f.d()]);
    let base = inspect["provider_revision"].as_u64().unwrap().to_string();
    // Someone else commits after that read.
    add_todo("Concurrent work");
    let document = f.temp.path().join("revision.json");
    std::fs::write(
        &document,
        json!({"objective": "Prove lemma B and C", "reason": "user widened scope", "source_ref": "msg-5"}).to_string(),
    )
    .unwrap();
    let before = f.fingerprint();
    let (code, body, stderr) = failing(
        &f,
        &[
            "goal-acceptance",
            "revise-objective",
            "--dir",
            f.d(),
            "--document",
            document.to_str().unwrap(),
            "--expected-provider-revision",
            &base,
            "--execute",
        ],
    );
    assert_eq!(code, 1);
    assert_failed(&body, "stale", &stderr);
    assert_eq!(body["reason"], "stale");
    assert!(
        body["current_revision"].as_u64().unwrap() > base.parse().unwrap(),
        "{body}"
    );
    assert_eq!(f.fingerprint(), before);
}

#[test]
fn a_missing_loop_is_class_not_found_for_every_read() {
    let f = Fixture::new();
    for command in ["status", "done", "validate"] {
        let (code, body, stderr) = failing(&f, &[command, "--dir", f.d()]);
        assert_eq!(code, 1, "{command}");
        assert_failed(&body, "not_found", &stderr);
        assert!(
            body["error"].as_str().unwrap().contains(f.d()),
            "{command}: {body}"
        );
    }
    assert!(!f.dir.exists(), "a read created the loop directory");
    // A typo names the loop it probably meant, not `init` at the typo.
    f.init(3, &[]);
    let typo = f.dir.with_file_name("rnu");
    let (_, body, _) = failing(&f, &["status", "--dir", typo.to_str().unwrap()]);
    let message = body["error"].as_str().unwrap();
    assert!(
        message.contains(&format!("did you mean --dir {}?", f.d())),
        "{message}"
    );
    let far = f.dir.with_file_name("something-else");
    let (_, body, _) = failing(&f, &["status", "--dir", far.to_str().unwrap()]);
    let message = body["error"].as_str().unwrap();
    assert!(
        !message.contains("did you mean") && message.contains("loopx init --dir"),
        "{message}"
    );
}

#[test]
fn bad_budget_flags_say_what_was_wrong_and_what_is_accepted_and_create_nothing() {
    let f = Fixture::new();
    for (flags, says) in [
        (
            &["--max-iterations", "-5"][..],
            "invalid value '-5' for '--max-iterations <MAX_ITERATIONS>': expected a whole number of iterations, 1 or more, such as 20",
        ),
        (
            &["--max-tokens", "-5"][..],
            "invalid value '-5' for '--max-tokens <MAX_TOKENS>': expected a whole number, 0 or more, such as 200000 (0 means unlimited)",
        ),
        (
            &["--max-wall", "-1h"][..],
            "a duration limit cannot be negative (got -1h); write e.g. 90m, 48h or 2d 12h (0 means unlimited)",
        ),
        (
            &["--max-wall=-1h"][..],
            "a duration limit cannot be negative (got -1h)",
        ),
    ] {
        let output = f
            .loopx()
            .args(f.init_words())
            .args(flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert!(!stderr.contains("invalid digit"), "{stderr}");
        assert!(!f.dir.exists(), "{flags:?} created the loop");
    }
}
