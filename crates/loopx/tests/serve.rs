//! The HTTP API of a real `loopx serve` on a real loop: every endpoint, bad
//! input (400, state unchanged), the token / Origin / Host checks, stale
//! writes and exactly-once retries.

mod common;

use common::Fixture;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

struct Server {
    child: Child,
    port: u16,
    token: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(f: &Fixture, extra: &[&str]) -> Server {
    let mut child = Command::new(common::loopx_path())
        .args(["serve", "--dir", f.d(), "--addr", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    let token = line
        .split("(token ")
        .nth(1)
        .unwrap()
        .trim_end()
        .trim_end_matches(')')
        .to_owned();
    Server { child, port, token }
}

struct Reply {
    status: u16,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

impl Server {
    /// One HTTP/1.1 request; `headers` are extra header lines.
    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nContent-Length: {}\r\n", self.port, body.len());
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        stream
            .write_all(format!("{head}\r\n{body}").as_bytes())
            .unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        let status = raw
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = raw
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        Reply { status, body }
    }

    fn get(&self, path: &str) -> Reply {
        self.request("GET", path, &[], "")
    }

    fn post(&self, path: &str, body: &Value) -> Reply {
        let origin = format!("http://127.0.0.1:{}", self.port);
        self.request(
            "POST",
            path,
            &[
                ("X-Loopx-Token", &self.token),
                ("Origin", &origin),
                ("Content-Type", "application/json"),
            ],
            &body.to_string(),
        )
    }

    fn revision(&self) -> u64 {
        self.get("/api/goal").json()["provider_revision"]
            .as_u64()
            .unwrap()
    }
}

fn loop_with_outcome() -> Fixture {
    let f = Fixture::new();
    f.init(10, &[]);
    f.loopx()
        .args(["todo", "add", "--dir", f.d(), "--title", "Build the deck"])
        .assert()
        .success();
    let doc = f.temp.path().join("o.json");
    std::fs::write(&doc, json!({"outcome_id": "deck", "objective": "A deck", "add_requirements": [{"id": "R1", "description": "Intro first"}], "link_todos": ["t1"], "source": {"ref": "msg-1"}}).to_string()).unwrap();
    f.loopx()
        .args([
            "goal-acceptance",
            "refine-outcome",
            "--dir",
            f.d(),
            "--document",
            doc.to_str().unwrap(),
        ])
        .env("LOOPX_AGENT_ID", "a")
        .assert()
        .success();
    f.append("continue", &[]).success();
    f
}

fn requirement(id: &str, text: &str, op: &str, base: u64) -> Value {
    json!({"requirement_id": id, "description": text, "source_ref": "dashboard", "operation_id": op, "base_revision": base})
}

fn requirement_ids(server: &Server) -> Vec<String> {
    server.get("/api/goal").json()["outcomes"][0]["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn every_read_endpoint_answers() {
    let f = loop_with_outcome();
    let server = serve(&f, &[]);
    for page in ["/", "/fragment/live", "/iterations/1"] {
        let reply = server.get(page);
        assert_eq!(reply.status, 200, "{page}");
        assert!(
            reply.body.contains("deck") || reply.body.contains("Iteration 1"),
            "{page}: {}",
            reply.body
        );
    }
    assert_eq!(server.get("/api/status").json()["iterations"], 1);
    assert_eq!(server.get("/api/goal").json()["outcomes"][0]["id"], "deck");
    assert_eq!(
        server.get("/api/should-run").json()["scheduler_hint"]["source"],
        "quota.should-run"
    );
    assert_eq!(
        server.get("/api/iterations").json()["iterations"][0]["iteration"],
        1
    );
    assert_eq!(
        server.get("/api/iterations/1").json()["record"]["decision"],
        "continue"
    );
    assert_eq!(server.get("/api/iterations/99").status, 404);
    assert_eq!(server.get("/api/iterations/x").status, 400);
    assert_eq!(server.get("/iterations/99").status, 404);
    assert!(
        server.get("/").body.contains(&server.token),
        "the page embeds the token for its writes"
    );
}

#[test]
fn bad_input_is_a_400_that_changes_nothing() {
    let f = loop_with_outcome();
    let server = serve(&f, &[]);
    let base = server.revision();
    let before = f.fingerprint();
    let cases = [
        ("/api/outcomes/deck/requirements", "{not json".to_owned()),
        ("/api/outcomes/deck/requirements", json!({"requirement_id": "R2", "description": "x", "source_ref": "s", "operation_id": "o1", "base_revision": base, "extra": 1}).to_string()),
        ("/api/outcomes/deck/requirements", requirement("R2", "x", "o2", base).to_string().replace("\"dashboard\"", "\" \"")),
        ("/api/outcomes/deck/requirements", requirement("R2", "x", "bad id!", base).to_string()),
        ("/api/outcomes/deck/requirements", requirement("R1", "Different text", "o3", base).to_string()),
        ("/api/outcomes/deck/requirements", requirement("R2", " ", "o4", base).to_string()),
        ("/api/outcomes/nope/requirements", requirement("R2", "x", "o5", base).to_string()),
        ("/api/objective/revise", json!({"expected_provider_revision": base, "operation_id": "o6"}).to_string()),
        ("/api/objective/revise", json!({"proposal_digest": "sha256:00", "expected_provider_revision": base, "operation_id": "o7"}).to_string()),
    ];
    for (path, body) in cases {
        let origin = format!("http://127.0.0.1:{}", server.port);
        let reply = server.request(
            "POST",
            path,
            &[("X-Loopx-Token", &server.token), ("Origin", &origin)],
            &body,
        );
        assert_eq!(reply.status, 400, "{path} {body}: {}", reply.body);
        assert_eq!(reply.json()["status"], "failed");
        assert!(!reply.json()["error"].as_str().unwrap().is_empty());
        assert_eq!(f.fingerprint(), before, "{body} changed the loop");
    }
}

#[test]
fn token_origin_and_host_are_enforced() {
    let f = loop_with_outcome();
    let server = serve(&f, &[]);
    let body = requirement("R2", "x", "o1", server.revision()).to_string();
    let before = f.fingerprint();
    let origin = format!("http://127.0.0.1:{}", server.port);
    let refused: Vec<(Vec<(&str, &str)>, u16)> = vec![
        (vec![], 403),
        (
            vec![("X-Loopx-Token", "0123456789abcdef0123456789abcdef")],
            403,
        ),
        (
            vec![
                ("X-Loopx-Token", &server.token),
                ("Origin", "http://evil.example"),
            ],
            403,
        ),
        (
            vec![
                ("X-Loopx-Token", &server.token),
                ("Origin", &origin),
                ("Sec-Fetch-Site", "cross-site"),
            ],
            403,
        ),
    ];
    for (headers, status) in refused {
        let reply = server.request("POST", "/api/outcomes/deck/requirements", &headers, &body);
        assert_eq!(reply.status, status, "{headers:?}: {}", reply.body);
    }
    // A rebinding DNS name cannot even read.
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .write_all(b"GET /api/goal HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 421"), "{raw}");
    assert_eq!(f.fingerprint(), before);
    // The right token, same origin: accepted.
    assert_eq!(
        server
            .post(
                "/api/outcomes/deck/requirements",
                &serde_json::from_str(&body).unwrap()
            )
            .status,
        200
    );
}

#[test]
fn a_stale_write_is_refused_and_its_retry_writes_exactly_once() {
    let f = loop_with_outcome();
    let server = serve(&f, &[]);
    let page_base = server.revision();
    // Someone else commits through the CLI after the page loaded.
    f.loopx()
        .args(["todo", "add", "--dir", f.d(), "--title", "Concurrent work"])
        .assert()
        .success();
    let stale = server.post(
        "/api/outcomes/deck/requirements",
        &requirement("R2", "Results first", "ui-draft-1", page_base),
    );
    assert_eq!(stale.status, 409, "{}", stale.body);
    assert_eq!(
        (
            stale.json()["reason"].as_str(),
            stale.json()["current_revision"].as_u64()
        ),
        (Some("stale"), Some(page_base + 1))
    );
    assert_eq!(requirement_ids(&server), ["R1"]);
    // Reload, retry the same operation against the new revision.
    let fresh = server.revision();
    let retry = server.post(
        "/api/outcomes/deck/requirements",
        &requirement("R2", "Results first", "ui-draft-1", fresh),
    );
    assert_eq!(
        (retry.status, retry.json()["replayed"].as_bool()),
        (200, Some(false))
    );
    // The reply is lost and the page retries again, even with its old base:
    // the committed operation is replayed, never appended twice.
    for base in [fresh, page_base] {
        let again = server.post(
            "/api/outcomes/deck/requirements",
            &requirement("R2", "Results first", "ui-draft-1", base),
        );
        assert_eq!(
            (again.status, again.json()["replayed"].as_bool()),
            (200, Some(true)),
            "{}",
            again.body
        );
    }
    assert_eq!(requirement_ids(&server), ["R1", "R2"]);
    // The same operation id with other text is a conflict.
    assert_eq!(
        server
            .post(
                "/api/outcomes/deck/requirements",
                &requirement("R2", "Other", "ui-draft-1", fresh + 1)
            )
            .status,
        409
    );
}

#[test]
fn the_owner_applies_a_proposed_revision() {
    let f = loop_with_outcome();
    let doc = f.temp.path().join("rev.json");
    std::fs::write(&doc, json!({"objective": "Write the talk and an abstract", "reason": "user asked", "source_ref": "msg-9"}).to_string()).unwrap();
    f.loopx()
        .args([
            "goal-acceptance",
            "prepare-objective",
            "--dir",
            f.d(),
            "--document",
            doc.to_str().unwrap(),
            "--execute",
        ])
        .env("LOOPX_AGENT_ID", "a")
        .assert()
        .success();
    let server = serve(&f, &[]);
    let goal = server.get("/api/goal").json();
    let digest = goal["objective"]["pending_proposals"][0]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let apply = json!({"proposal_digest": digest, "expected_provider_revision": goal["provider_revision"], "operation_id": "ui-apply-1"});
    let reply = server.post("/api/objective/revise", &apply);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let goal = server.get("/api/goal").json();
    assert_eq!(
        (
            goal["objective"]["current_revision"].as_u64(),
            goal["objective"]["current_objective"].as_str()
        ),
        (Some(1), Some("Write the talk and an abstract"))
    );
    assert_eq!(
        server.post("/api/objective/revise", &apply).json()["replayed"],
        true
    );
}

#[test]
fn beyond_loopback_needs_allow_remote_and_then_a_token_everywhere() {
    let f = loop_with_outcome();
    let output = Command::new(common::loopx_path())
        .args(["serve", "--dir", f.d(), "--addr", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--allow-remote"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut child = Command::new(common::loopx_path())
        .args([
            "serve",
            "--dir",
            f.d(),
            "--addr",
            "0.0.0.0:0",
            "--allow-remote",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .split("0.0.0.0:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    let token = line
        .split("token=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_owned();
    let server = Server { child, port, token };
    assert_eq!(server.get("/api/goal").status, 403);
    assert_eq!(
        server
            .get(&format!("/api/goal?token={}", server.token))
            .status,
        200
    );
    assert_eq!(
        server
            .request("GET", "/api/goal", &[("X-Loopx-Token", &server.token)], "")
            .status,
        200
    );
}

#[test]
fn a_loop_that_does_not_exist_is_refused_before_binding() {
    let f = Fixture::new();
    f.loopx()
        .args(["serve", "--dir", f.d(), "--addr", "127.0.0.1:0"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("no loop at"));
}
