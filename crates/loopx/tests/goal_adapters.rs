//! The goal use cases answer the same through every adapter: the CLI's
//! `--json` and a real `loopx serve` on the same loop show the same goal
//! view, and a goal write one refuses the other refuses for the same
//! reason, with the same message, changing nothing.

mod common;

use common::{Fixture, Server};
use serde_json::{json, Value};

/// `loopx <args> --dir D --json`: success, and the JSON on stdout.
fn cli(f: &Fixture, args: &[&str]) -> (bool, Value) {
    let output = f
        .loopx()
        .args(args)
        .args(["--dir", f.d(), "--json"])
        .output()
        .unwrap();
    let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.success(), json)
}

/// A loop with two todos (one leased), an outcome with a requirement, and
/// a pending objective proposal: something in every part of the readback.
fn busy_loop() -> Fixture {
    let f = Fixture::new();
    f.init(10, &["--non-goal", "no new experiments"]);
    for title in ["Build the deck", "Write the abstract"] {
        assert!(cli(&f, &["todo", "add", "--title", title]).0);
    }
    let doc = f.temp.path().join("o.json");
    std::fs::write(&doc, json!({"outcome_id": "deck", "objective": "A deck", "add_requirements": [{"id": "R1", "description": "Intro first"}], "link_todos": ["t1"], "source": {"ref": "msg-1"}}).to_string()).unwrap();
    let proposal = f.temp.path().join("p.json");
    std::fs::write(&proposal, json!({"objective": "The deck and an abstract", "reason": "user asked", "source_ref": "msg-2"}).to_string()).unwrap();
    for args in [
        vec![
            "goal-acceptance",
            "refine-outcome",
            "--document",
            doc.to_str().unwrap(),
            "--agent-id",
            "a",
        ],
        vec![
            "goal-acceptance",
            "prepare-objective",
            "--document",
            proposal.to_str().unwrap(),
            "--execute",
            "--agent-id",
            "a",
        ],
        vec!["todo", "claim", "t2", "--agent-id", "a", "--ttl", "86400"],
    ] {
        let (ok, json) = cli(&f, &args);
        assert!(ok, "{args:?}: {json}");
    }
    f
}

/// The view itself: the CLI's envelope (`status`, `action`) taken off.
fn view(mut json: Value) -> Value {
    let object = json.as_object_mut().unwrap();
    object.remove("status");
    object.remove("action");
    json
}

#[test]
fn the_cli_and_the_http_api_show_the_same_goal() {
    let f = busy_loop();
    let server = Server::start(&f);
    let (status, http) = server.request("GET", "/api/goal", "");
    assert_eq!(status, 200, "{http}");
    let (ok, cli) = cli(&f, &["goal-acceptance", "inspect"]);
    assert!(ok, "{cli}");
    assert_eq!(cli["action"], "goal-acceptance-inspect");
    assert_eq!(view(cli), http);
    // Not two empty views agreeing: every part is there.
    assert_eq!(http["outcomes"][0]["requirements"][0]["id"], "R1");
    assert_eq!(
        http["objective"]["pending_proposals"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(http["todos"][1]["holder"], "a");
}

#[test]
fn a_goal_write_refused_over_http_is_refused_alike_by_the_cli() {
    let f = busy_loop();
    let server = Server::start(&f);
    let base = server.request("GET", "/api/goal", "").1["provider_revision"]
        .as_u64()
        .unwrap();
    let before = f.fingerprint();

    // A rule refuses: requirements are append-only.
    let (status, http) = server.request(
        "POST",
        "/api/outcomes/deck/requirements",
        &json!({"requirement_id": "R1", "description": "Results first", "source_ref": "msg-3", "operation_id": "web-1", "base_revision": base}).to_string(),
    );
    let changed = f.temp.path().join("changed.json");
    std::fs::write(&changed, json!({"outcome_id": "deck", "add_requirements": [{"id": "R1", "description": "Results first"}], "source": {"ref": "msg-3"}}).to_string()).unwrap();
    let (ok, cli_json) = cli(
        &f,
        &[
            "goal-acceptance",
            "refine-outcome",
            "--document",
            changed.to_str().unwrap(),
        ],
    );
    assert_eq!((status, ok), (400, false), "{http} / {cli_json}");
    assert_eq!(
        (&http["status"], &cli_json["status"]),
        (&json!("failed"), &json!("failed"))
    );
    assert!(
        http["error"].as_str().unwrap().contains("append-only"),
        "{http}"
    );
    assert_eq!(http["error"], cli_json["error"]);

    // A stale revision: the same refusal, naming the same revisions.
    let stale = base - 1;
    let document =
        json!({"objective": "Only the abstract", "reason": "user asked", "source_ref": "msg-4"});
    let (status, http) = server.request(
        "POST",
        "/api/objective/revise",
        &json!({"document": document, "expected_provider_revision": stale, "operation_id": "web-2"}).to_string(),
    );
    let revision = f.temp.path().join("revision.json");
    std::fs::write(&revision, document.to_string()).unwrap();
    let (ok, cli_json) = cli(
        &f,
        &[
            "goal-acceptance",
            "revise-objective",
            "--document",
            revision.to_str().unwrap(),
            "--expected-provider-revision",
            &stale.to_string(),
            "--execute",
        ],
    );
    assert_eq!((status, ok), (409, false), "{http} / {cli_json}");
    assert_eq!(
        (&http["reason"], http["current_revision"].as_u64()),
        (&json!("stale"), Some(base))
    );
    assert!(
        http["error"]
            .as_str()
            .unwrap()
            .contains("stale base revision"),
        "{http}"
    );
    assert_eq!(http["error"], cli_json["error"]);

    assert_eq!(f.fingerprint(), before, "a refused write changed the loop");
}

#[test]
fn a_malformed_digest_is_refused_by_the_one_parser_through_either_adapter() {
    let f = busy_loop();
    let server = Server::start(&f);
    let before = f.fingerprint();
    let bad = format!("sha256:{}", "A".repeat(64));
    let (status, http) = server.request(
        "POST",
        "/api/objective/revise",
        &json!({"proposal_digest": bad, "expected_provider_revision": 1, "operation_id": "web-3"})
            .to_string(),
    );
    assert_eq!(status, 400, "{http}");
    let output = f
        .loopx()
        .args(["goal-acceptance", "ack-gap", "--dir", f.d()])
        .args(["--outcome-id", "deck", "--checkpoint", &bad])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let expected = format!("{bad:?} is not a digest: expected sha256:<64 lowercase hex>");
    assert!(
        http["error"].as_str().unwrap().contains(&expected),
        "{http}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&expected), "{stderr}");
    // A digest that parses but names no proposal is the owner's refusal.
    let unknown = format!("sha256:{}", "0".repeat(64));
    let (status, http) = server.request(
        "POST",
        "/api/objective/revise",
        &json!({"proposal_digest": unknown, "expected_provider_revision": 1, "operation_id": "web-4"})
            .to_string(),
    );
    assert_eq!(status, 400, "{http}");
    assert!(
        http["error"]
            .as_str()
            .unwrap()
            .contains(&format!("no pending proposal {unknown}")),
        "{http}"
    );
    assert_eq!(f.fingerprint(), before);
}
