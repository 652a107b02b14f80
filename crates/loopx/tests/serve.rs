//! The HTTP API of a real `loopx serve` on a real loop: every endpoint, bad
//! input (400, state unchanged), the credential checks on every request
//! (token file, one-time login links, session cookies, Origin, Host, another
//! local user), stale writes and exactly-once retries.

mod common;

use common::{first_line, Fixture, Reply, Server};
use predicates::prelude::PredicateBooleanExt as _;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

fn spawn(f: &Fixture, extra: &[&str]) -> Child {
    common::spawn_serve(f, &["--dir", f.d()], extra)
}

/// A server started with `--json` on the fixture's loop.
fn serve(f: &Fixture, extra: &[&str]) -> Server {
    Server::started(spawn(f, &[&["--json"], extra].concat()))
}

/// `loopx serve --all --json` over the fixture's registry.
fn serve_all(f: &Fixture) -> Server {
    Server::started(common::spawn_serve(f, &["--all"], &["--json"]))
}

impl Server {
    /// A read by a script that holds the token.
    fn get(&self, path: &str) -> Reply {
        self.exchange("GET", path, &[("X-Loopx-Token", &self.token)], "")
    }

    fn post(&self, path: &str, body: &Value) -> Reply {
        self.send("POST", path, &body.to_string())
    }

    fn revision(&self) -> u64 {
        self.get("/api/goal").json()["provider_revision"]
            .as_u64()
            .unwrap()
    }

    /// Follow a login link (a URL or a path); the reply.
    fn login(&self, url: &str) -> Reply {
        let prefix = format!("http://127.0.0.1:{}", self.port);
        let path = url.strip_prefix(&prefix).unwrap_or(url);
        self.exchange("GET", path, &[], "")
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

/// A goal write through the CLI, as another client would make it.
fn someone_else_commits(f: &Fixture) {
    f.loopx()
        .args(["todo", "add", "--dir", f.d(), "--title", "Concurrent work"])
        .assert()
        .success();
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
    assert_eq!(server.get("/iterations/99").status, 404);
}

#[test]
fn the_cost_view_is_served_and_charted_on_the_overview() {
    let f = loop_with_outcome();
    let server = serve(&f, &[]);
    let cost = server.get("/api/cost?by=provider").json();
    assert_eq!(
        (cost["by"].as_str(), cost["turns"].as_u64()),
        (Some("provider"), Some(1)),
        "the iteration recorded by hand is a turn"
    );
    assert!(cost["budgets"].as_array().is_some_and(|b| !b.is_empty()));
    assert_eq!(server.get("/api/cost?by=week").status, 400);
    // Nothing cost anything: the chart draws durations and says why.
    let overview = server.get("/").body;
    assert!(overview.contains("Time per turn"), "{overview}");
    assert!(overview.contains("No turn shown reported a cost"));
    assert!(!overview.contains("Cost per turn"));
}

#[test]
fn iterations_recorded_by_hand_are_charged_alike_in_every_cost_view() {
    let f = Fixture::new();
    f.init(10, &["--max-tokens", "3000", "--max-usd", "0.15"]);
    f.append("continue", &["--tokens", "1200", "--usd", "0.05"])
        .success();
    f.append("continue", &["--tokens", "3000", "--usd", "0.12"])
        .failure();
    f.append("stop", &["--tokens", "3000", "--usd", "0.12"])
        .success();
    let cost = f.json(&["cost", "--dir", f.d(), "--by", "turn"]);
    let budgets = cost["budgets"].as_array().unwrap();
    let used = |name: &str| budgets.iter().find(|b| b["name"] == name).unwrap()["used"].as_f64();
    assert_eq!(
        (cost["turns"].as_u64(), cost["tokens"].as_u64()),
        (Some(2), Some(4200))
    );
    assert!(
        (cost["usd"].as_f64().unwrap() - 0.17).abs() < 1e-9,
        "{cost}"
    );
    assert_eq!(
        (used("tokens"), used("usd")),
        (Some(4200.0), cost["usd"].as_f64())
    );
    let row = |r: &Value| (r["key"].clone(), r["provider"].clone(), r["tokens"].clone());
    let rows: Vec<_> = cost["rows"].as_array().unwrap().iter().map(row).collect();
    assert_eq!(
        rows,
        [
            (json!("1"), json!("by hand"), json!(1200)),
            (json!("2"), json!("by hand"), json!(3000))
        ]
    );
    let text = f.loopx().args(["cost", "--dir", f.d()]).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    let total = text.lines().find(|l| l.starts_with("total")).unwrap();
    assert_eq!(
        total.split_whitespace().collect::<Vec<_>>(),
        ["total", "2", "4200", "0.1700"],
        "{text}"
    );
    let server = serve(&f, &[]);
    let api = server.get("/api/cost?by=turn").json();
    for field in ["turns", "tokens", "usd", "rows"] {
        assert_eq!(api[field], cost[field], "{field}");
    }
    let page = server.get("/").body;
    assert!(
        page.contains("2 turns · $0.1700 · 4200 tokens")
            && !page.contains("No turn has settled yet"),
        "{page}"
    );
}

#[test]
fn no_burn_rate_is_forecast_from_one_turn_nor_for_a_finished_loop_and_counts_print_whole() {
    let f = Fixture::new();
    f.init(10, &["--max-tokens", "3000"]);
    f.append("continue", &["--tokens", "1200"]).success();
    let text = |f: &Fixture| {
        let out = f.loopx().args(["cost", "--dir", f.d()]).output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let early = text(&f);
    assert!(
        early.contains("tokens: 1200 used, 1800 of 3000 left; no forecast before 3 turns and 10m")
            && early.contains("iterations: 1 used, 9 of 10 left;")
            && !early.contains("/h"),
        "{early}"
    );
    // The operator ends the loop.
    std::fs::write(f.dir.join("STOP_REQUESTED"), "").unwrap();
    let finished = text(&f);
    assert!(
        finished.contains("iterations: 1 used, 9 of 10 left; the loop is finished")
            && !finished.contains("runs out"),
        "{finished}"
    );
    let server = serve(&f, &[]);
    let page = server.get("/").body;
    assert!(
        page.contains("the loop is finished") && !page.contains("at this rate"),
        "{page}"
    );
}

#[test]
fn out_of_range_and_non_numeric_iteration_ids_are_404_not_a_crash() {
    let f = loop_with_outcome();
    let server = serve(&f, &[]);
    let before = f.fingerprint();
    for id in [
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999",
        "0",
        "-1",
        "x",
        "1.0",
        "%20",
    ] {
        for prefix in ["/api/iterations/", "/iterations/"] {
            let reply = server.get(&format!("{prefix}{id}"));
            assert_eq!(reply.status, 404, "{prefix}{id}: {}", reply.body);
        }
        assert_eq!(
            server.get(&format!("/api/iterations/{id}")).json()["status"],
            "failed"
        );
    }
    // The largest id the store can hold is looked up, and simply absent.
    assert_eq!(
        server.get("/api/iterations/9223372036854775807").status,
        404
    );
    // The handlers did not die: the server still answers.
    assert_eq!(server.get("/api/iterations/1").status, 200);
    assert_eq!(f.fingerprint(), before);
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
        let reply = server.exchange(
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
    let refused: Vec<Vec<(&str, &str)>> = vec![
        vec![],
        vec![("X-Loopx-Token", "0123456789abcdef0123456789abcdef")],
        vec![("X-Loopx-Token", &server.token[..server.token.len() - 1])],
        vec![
            ("X-Loopx-Token", &server.token),
            ("Origin", "http://evil.example"),
        ],
        vec![
            ("X-Loopx-Token", &server.token),
            ("Origin", &origin),
            ("Sec-Fetch-Site", "cross-site"),
        ],
    ];
    for headers in refused {
        let reply = server.exchange("POST", "/api/outcomes/deck/requirements", &headers, &body);
        assert_eq!(reply.status, 403, "{headers:?}: {}", reply.body);
        assert!(!reply.body.contains(&server.token));
    }
    // A rebinding DNS name cannot even read, token or not.
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .write_all(format!("GET /api/goal HTTP/1.1\r\nHost: evil.example\r\nX-Loopx-Token: {}\r\nConnection: close\r\n\r\n", server.token).as_bytes())
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
fn every_request_needs_a_credential_even_on_loopback() {
    let f = loop_with_outcome();
    let server = serve(&f, &[]);
    let before = f.fingerprint();
    let wrong = "0".repeat(server.token.len());
    let reads = [
        "/",
        "/fragment/live",
        "/iterations/1",
        "/api/status",
        "/api/goal",
        "/api/should-run",
        "/api/iterations",
        "/api/iterations/1",
        // The token is not accepted in a URL, where logs and history keep it.
        &format!("/api/goal?token={}", server.token),
    ];
    for path in reads {
        for headers in [
            vec![],
            vec![("X-Loopx-Token", wrong.as_str())],
            vec![("Cookie", "loopx_session=x")],
        ] {
            let reply = server.exchange("GET", path, &headers, "");
            assert_eq!(reply.status, 403, "{path} {headers:?}: {}", reply.body);
            assert!(!reply.body.contains(&server.token), "{path}");
            assert!(!reply.body.contains("deck"), "{path} leaks state");
        }
    }
    // A script with the token reads everything; the page never carries it.
    for path in ["/", "/fragment/live", "/iterations/1", "/api/status"] {
        let reply = server.get(path);
        assert_eq!(reply.status, 200, "{path}");
        assert!(
            !reply.body.contains(&server.token),
            "{path} embeds the token"
        );
        assert!(
            reply.head.contains("x-frame-options: DENY"),
            "{}",
            reply.head
        );
    }
    let mint = server.exchange("POST", "/api/login-url", &[], "");
    assert_eq!(mint.status, 403);
    assert_eq!(f.fingerprint(), before);
}

#[test]
fn a_one_time_login_link_opens_a_cookie_session_once() {
    let f = loop_with_outcome();
    let server = serve(&f, &[]);
    let link = server.start["login_url"].as_str().unwrap().to_owned();
    let first = server.login(&link);
    assert_eq!(first.status, 303, "{}", first.body);
    assert!(first.head.contains("location: /\r\n"), "{}", first.head);
    let set = first.set_cookie().expect("a session cookie");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    let cookie = set.split(';').next().unwrap().to_owned();
    let (name, value) = cookie.split_once('=').unwrap();
    assert_eq!(name, format!("loopx_session_{}", server.port));
    assert!(
        !value.contains(&server.token) && value.len() >= 32,
        "{value}"
    );
    // Single use.
    let again = server.login(&link);
    assert_eq!(again.status, 403);
    assert!(again.set_cookie().is_none());
    assert_eq!(server.login("/login?once=").status, 403);
    assert_eq!(server.login("/login").status, 403);
    // The session reads the page, which holds no secret.
    let page = server.exchange("GET", "/", &[("Cookie", &cookie)], "");
    assert_eq!(page.status, 200);
    assert!(!page.body.contains(&server.token) && !page.body.contains(value));
    let other_port = format!("loopx_session_1={value}");
    assert_eq!(
        server
            .exchange("GET", "/", &[("Cookie", &other_port)], "")
            .status,
        403,
        "the cookie is bound to this server's port"
    );
    // A write on the cookie alone must prove it came from this origin.
    let origin = format!("http://127.0.0.1:{}", server.port);
    let other_origin = format!("http://127.0.0.1:{}", server.port.wrapping_add(1));
    let before = f.fingerprint();
    let base = server.revision();
    for (i, headers) in [
        vec![("Cookie", cookie.as_str())],
        vec![("Cookie", cookie.as_str()), ("Sec-Fetch-Site", "same-site")],
        vec![("Cookie", cookie.as_str()), ("Origin", &other_origin)],
        vec![("Cookie", cookie.as_str()), ("Origin", "null")],
        vec![("Cookie", "loopx_session_1=forged"), ("Origin", &origin)],
    ]
    .into_iter()
    .enumerate()
    {
        let body = requirement("R2", "x", &format!("c{i}"), base).to_string();
        let reply = server.exchange("POST", "/api/outcomes/deck/requirements", &headers, &body);
        assert_eq!(reply.status, 403, "{headers:?}: {}", reply.body);
    }
    assert_eq!(f.fingerprint(), before);
    for (id, headers) in [
        (
            "R2",
            vec![("Cookie", cookie.as_str()), ("Origin", origin.as_str())],
        ),
        (
            "R3",
            vec![
                ("Cookie", cookie.as_str()),
                ("Sec-Fetch-Site", "same-origin"),
            ],
        ),
    ] {
        let body = requirement(id, "x", &format!("ok-{id}"), server.revision()).to_string();
        let reply = server.exchange("POST", "/api/outcomes/deck/requirements", &headers, &body);
        assert_eq!(reply.status, 200, "{headers:?}: {}", reply.body);
    }
    assert_eq!(requirement_ids(&server), ["R1", "R2", "R3"]);
    // A script holding the token can mint another link for a browser.
    let minted = server.exchange(
        "POST",
        "/api/login-url",
        &[("X-Loopx-Token", &server.token)],
        "",
    );
    assert_eq!(minted.status, 200, "{}", minted.body);
    let fresh = minted.json()["login_url"].as_str().unwrap().to_owned();
    assert_ne!(fresh, link);
    assert_eq!(server.login(&fresh).status, 303);
}

#[test]
fn the_start_line_names_the_token_file_never_the_token() {
    let f = loop_with_outcome();
    let mut child = spawn(&f, &[]);
    let line = first_line(&mut child);
    let _ = child.kill();
    let _ = child.wait();
    let file = f.dir.join("serve.token");
    let token = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    assert!(line.starts_with("loopx serve: http://127.0.0.1:"), "{line}");
    assert!(
        line.contains(&format!(
            "token file {}",
            file.canonicalize().unwrap().display()
        )),
        "{line}"
    );
    assert!(!line.contains(&token), "{line}");
    // --json: the first line is one JSON object.
    let server = serve(&f, &[]);
    let start = &server.start;
    assert_eq!(start["status"], "ok");
    assert_eq!(start["url"], format!("http://127.0.0.1:{}/", server.port));
    assert!(start["login_url"]
        .as_str()
        .unwrap()
        .contains("/login?once="));
    assert_eq!(server.token, token, "the token file is reused");
    assert!(!start.to_string().contains(&token));
}

#[test]
fn the_token_file_is_private_reused_and_refused_when_exposed() {
    use std::os::unix::fs::PermissionsExt;
    let f = loop_with_outcome();
    let first = serve(&f, &[]);
    let file = f.dir.join("serve.token");
    let meta = std::fs::symlink_metadata(&file).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let token = first.token.clone();
    assert_eq!(token.len(), 64);
    drop(first);
    assert_eq!(serve(&f, &[]).token, token, "reused across restarts");
    // Readable by others: someone may hold it, so it is not used.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = f.fingerprint();
    f.loopx()
        .args(["serve", "--dir", f.d(), "--addr", "127.0.0.1:0"])
        .env_remove("LOOPX_SERVE_TOKEN")
        .assert()
        .failure()
        .stderr(predicates::str::contains("mode 644"))
        .stderr(predicates::str::contains("delete"));
    assert_eq!(f.fingerprint(), before);
    // A planted symlink is never followed, never written through.
    std::fs::remove_file(&file).unwrap();
    let target = f.temp.path().join("planted");
    std::os::unix::fs::symlink(&target, &file).unwrap();
    f.loopx()
        .args(["serve", "--dir", f.d(), "--addr", "127.0.0.1:0"])
        .env_remove("LOOPX_SERVE_TOKEN")
        .assert()
        .failure()
        .stderr(predicates::str::contains("symlink"));
    assert!(!target.exists());
    // Deleting it rotates the token.
    std::fs::remove_file(&file).unwrap();
    assert_ne!(serve(&f, &[]).token, token);
}

#[test]
fn an_explicit_token_overrides_the_file_and_writes_none() {
    let f = loop_with_outcome();
    let before = f.fingerprint();
    let mut child = spawn(&f, &["--json", "--token", "a-token-of-sixteen-or-more"]);
    let start: Value = serde_json::from_str(&first_line(&mut child)).unwrap();
    let server = Server {
        child,
        port: start["port"].as_u64().unwrap() as u16,
        token: "a-token-of-sixteen-or-more".into(),
        start: start.clone(),
    };
    assert_eq!(start["token_file"], Value::Null);
    assert_eq!(server.get("/api/status").status, 200);
    assert_eq!(f.fingerprint(), before, "no serve.token was written");
    f.loopx()
        .args([
            "serve",
            "--dir",
            f.d(),
            "--addr",
            "127.0.0.1:0",
            "--token",
            "short",
        ])
        .assert()
        .failure()
        .stderr(predicates::str::contains("at least 16"));
}

/// Run `script` as user `nobody` with `sh`; `None` (with the reason
/// printed) when this machine cannot.
fn as_nobody(script: &str) -> Option<std::process::Output> {
    let unavailable = |why: &str| {
        common::skipped_without(&format!("the other-uid check needs {why}"));
        None
    };
    if !std::path::Path::new("/usr/bin/curl").exists() {
        return unavailable("/usr/bin/curl");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return unavailable("root, to switch to `nobody` without a password");
    }
    match Command::new("su")
        .args(["nobody", "-s", "/bin/sh", "-c", script])
        .output()
    {
        Ok(output) => Some(output),
        Err(e) => unavailable(&format!("su ({e})")),
    }
}

#[test]
fn another_local_user_can_neither_read_nor_write_nor_take_the_token() {
    use std::os::unix::fs::PermissionsExt;
    let f = loop_with_outcome();
    // A secret only the driver's owner may see, in iteration 2's record.
    f.loopx()
        .args([
            "append-iteration",
            "--dir",
            f.d(),
            "--mode",
            "bounded-research",
            "--objective",
            "marker-owner-only-4242",
            "--decision",
            "continue",
            "--evidence-id",
            "e.md",
        ])
        .assert()
        .success();
    // Everyone may reach the loop directory: only the file modes protect.
    for dir in [f.temp.path(), f.dir.as_path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let server = serve(&f, &[]);
    assert!(server
        .get("/api/iterations/2")
        .body
        .contains("marker-owner-only-4242"));
    let token_file = f.dir.join("serve.token");
    let base = format!("http://127.0.0.1:{}", server.port);
    let revise = json!({"document": {"objective": "hijacked", "reason": "r", "source_ref": "s"}, "expected_provider_revision": server.revision(), "operation_id": "evil-1"}).to_string();
    let before = f.fingerprint();
    let script = format!(
        "for p in / /api/status /api/iterations/1 /api/iterations/2 /iterations/2 /fragment/live; do \
           printf '%s ' \"$p\"; curl -s -o /tmp/.nobody-$$ -w '%{{http_code}}' {base}$p; \
           printf ' '; cat /tmp/.nobody-$$ | tr '\\n' ' '; echo; done; \
         printf 'revise '; curl -s -o /tmp/.nobody-$$ -w '%{{http_code}}' -X POST -H 'Content-Type: application/json' \
           -H 'X-Loopx-Token: guess' -H 'Origin: {base}' --data '{revise}' {base}/api/objective/revise; \
           printf ' '; cat /tmp/.nobody-$$ | tr '\n' ' '; echo; \
         printf 'token '; cat '{}' 2>&1; rm -f /tmp/.nobody-$$",
        token_file.display()
    );
    let Some(output) = as_nobody(&script) else {
        return;
    };
    let report = String::from_utf8_lossy(&output.stdout).into_owned();
    eprintln!("{report}{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), 8, "{report}");
    for line in &lines[..7] {
        let mut words = line.split_whitespace();
        let (path, status) = (words.next().unwrap(), words.next().unwrap());
        assert_eq!(status, "403", "{path} as nobody: {line}");
    }
    assert!(lines[7].contains("Permission denied"), "{}", lines[7]);
    assert!(!report.contains(&server.token), "{report}");
    assert!(!report.contains("marker-owner-only-4242"), "{report}");
    assert!(!report.contains("Prove lemma B"), "{report}");
    assert_eq!(f.fingerprint(), before, "nobody changed the loop");
}

#[test]
fn a_stale_write_is_refused_and_its_retry_writes_exactly_once() {
    let f = loop_with_outcome();
    let server = serve(&f, &[]);
    let page_base = server.revision();
    // Someone else commits through the CLI after the page loaded.
    someone_else_commits(&f);
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
        .env_remove("LOOPX_SERVE_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = first_line(&mut child);
    let port: u16 = line
        .split("0.0.0.0:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    let token = std::fs::read_to_string(f.dir.join("serve.token"))
        .unwrap()
        .trim()
        .to_owned();
    assert!(!line.contains(&token));
    let server = Server {
        child,
        port,
        token,
        start: Value::Null,
    };
    assert_eq!(server.exchange("GET", "/api/goal", &[], "").status, 403);
    assert_eq!(
        server
            .exchange("GET", &format!("/api/goal?token={}", server.token), &[], "")
            .status,
        403,
        "a token in the URL is not a credential"
    );
    assert_eq!(server.get("/api/goal").status, 200);
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

#[test]
fn a_taken_port_says_to_pass_another_addr() {
    let f = Fixture::new();
    f.init(3, &[]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    f.loopx()
        .args(["serve", "--dir", f.d(), "--addr", &addr])
        .assert()
        .failure()
        .stderr(
            predicates::str::contains(format!("cannot listen on {addr}: the port is taken")).and(
                predicates::str::contains("pass --addr 127.0.0.1:0 for any free port"),
            ),
        );
}

#[test]
fn dashboard_hands_the_browser_its_login_link_in_a_private_file_not_on_a_command_line() {
    let f = loop_with_outcome();
    let bin = f.temp.path().join("bin");
    let seen = f.temp.path().join("seen");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&seen).unwrap();
    // A browser opener that records what it was given and what it found.
    let opener = bin.join("xdg-open");
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\nf=\"${{1#file://}}\"\nstat -c %a \"$f\" > {s}/mode\nstat -c %a \"$(dirname \"$f\")\" > {s}/dir-mode\ncat \"$f\" > {s}/page.tmp\necho \"$@\" > {s}/args\nmv {s}/page.tmp {s}/page\n",
            s = seen.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let mut child = Command::new(common::loopx_path())
        .args([
            "dashboard",
            "--dir",
            f.d(),
            "--addr",
            "127.0.0.1:0",
            "--json",
        ])
        .env("PATH", &path)
        .env("TMPDIR", f.temp.path())
        .env_remove("LOOPX_SERVE_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start: Value = serde_json::from_str(&first_line(&mut child)).unwrap();
    let port = start["port"].as_u64().unwrap() as u16;
    let server = Server {
        child,
        port,
        token: String::new(),
        start,
    };
    let page = seen.join("page");
    for _ in 0..100 {
        if page.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let html = std::fs::read_to_string(&page).expect("the opener ran");
    let args = std::fs::read_to_string(seen.join("args")).unwrap();
    let login = server.start["login_url"].as_str().unwrap();
    let once = login.split("once=").nth(1).unwrap();
    assert!(args.starts_with("file:///"), "{args}");
    assert!(
        !args.contains(once),
        "the secret is on a command line: {args}"
    );
    assert_eq!(
        std::fs::read_to_string(seen.join("mode")).unwrap().trim(),
        "600"
    );
    assert_eq!(
        std::fs::read_to_string(seen.join("dir-mode"))
            .unwrap()
            .trim(),
        "700"
    );
    assert!(html.contains(login), "{html}");
    assert_eq!(server.login(login).status, 303);
    assert_eq!(server.login(login).status, 403, "the link is single-use");
}

#[test]
fn each_error_class_answers_with_its_status_and_names_its_class() {
    let f = loop_with_outcome();
    let server = serve(&f, &[]);
    let class = |reply: &Reply| reply.json()["class"].as_str().map(str::to_owned);
    // Refused: a request the rules turn down.
    let base = server.revision();
    let refused = server.post(
        "/api/outcomes/deck/requirements",
        &json!({"requirement_id": "R2", "description": "x", "source_ref": " ", "operation_id": "ui-1", "base_revision": base}),
    );
    assert_eq!(
        (refused.status, class(&refused)),
        (400, Some("refused".into()))
    );
    // Stale: prepared against a revision that is no longer current.
    someone_else_commits(&f);
    let stale = server.post(
        "/api/outcomes/deck/requirements",
        &requirement("R2", "Results first", "ui-2", base),
    );
    assert_eq!(
        (stale.status, class(&stale)),
        (409, Some("stale".into())),
        "{}",
        stale.body
    );
    // Conflict: an operation id reused for another request.
    let fresh = server.revision();
    let ok = server.post(
        "/api/outcomes/deck/requirements",
        &requirement("R2", "Results first", "ui-3", fresh),
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    let conflict = server.post(
        "/api/outcomes/deck/requirements",
        &requirement("R3", "Other", "ui-3", fresh + 1),
    );
    assert_eq!(
        (conflict.status, class(&conflict)),
        (409, Some("conflict".into())),
        "{}",
        conflict.body
    );
    assert_eq!(conflict.json()["status"], "failed");
    // Not found: an iteration the ledger does not hold.
    for path in ["/api/iterations/99", "/api/iterations/zero"] {
        let missing = server.get(path);
        assert_eq!(
            (missing.status, class(&missing)),
            (404, Some("not_found".into())),
            "{path}"
        );
    }
}

#[test]
fn status_json_and_api_status_are_the_same_object() {
    let f = loop_with_outcome();
    let server = serve(&f, &[]);
    let cli = f.json(&["status", "--dir", f.d()]);
    let http = server.get("/api/status").json();
    let (cli, http) = (cli.as_object().unwrap(), http.as_object().unwrap());
    assert_eq!(
        cli.keys().collect::<Vec<_>>(),
        http.keys().collect::<Vec<_>>()
    );
    for (key, value) in cli {
        assert_eq!(Some(value), http.get(key), "field {key}");
    }
}

#[test]
fn the_health_line_names_the_state_and_the_command_that_acts_on_it() {
    let f = loop_with_outcome();
    let server = serve(&f, &[]);
    let health = server.get("/api/health").json();
    assert_eq!(health["state"], "not_driven", "{health}");
    assert!(health["command"]
        .as_str()
        .is_some_and(|c| c.starts_with("loopx drive --dir ")));
    std::fs::write(f.dir.join("PAUSE"), "").unwrap();
    let health = server.get("/api/health").json();
    assert_eq!(health["state"], "paused", "{health}");
    assert_eq!(
        health["command"].as_str(),
        Some(format!("rm {}/PAUSE", f.dir.display()).as_str())
    );
    std::fs::write(f.dir.join("STOP_REQUESTED"), "").unwrap();
    let health = server.get("/api/health").json();
    assert_eq!(
        (health["state"].as_str(), health["line"].as_str()),
        (
            Some("stopped_by_user"),
            Some("stopped by the user (STOP_REQUESTED)")
        )
    );
    assert_eq!(server.get("/api/health").status, 200);
}

/// Drive the loop in `f` for one real turn whose agent takes at least a
/// second, so the turn has a duration and the registry a driven entry.
fn drive_one_slow_turn(f: &Fixture) {
    drive_turns(f, 1, "sleep 1");
}

/// Drive the loop in `f` for `turns` real turns, each running `first`
/// and then recording one iteration.
fn drive_turns(f: &Fixture, turns: u32, first: &str) {
    let agent = f.temp.path().join("agent");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\n{first}\n'{}' append-iteration --mode bounded-research --objective 'a turn' --decision continue >/dev/null\n",
            common::loopx_path().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = f.temp.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    f.loopx()
        .args(["drive", "--dir", f.d(), "--root", root.to_str().unwrap()])
        .args(["--cmd", agent.to_str().unwrap()])
        .args(["--max-iterations", &turns.to_string()])
        .assert()
        .success();
}

/// A second loop in the fixture's temp dir and registry, armed there.
fn armed_loop(f: &Fixture, name: &str) -> std::path::PathBuf {
    let dir = f.temp.path().join(name);
    let d = dir.to_str().unwrap();
    f.loopx()
        .args(["init", "--dir", d, "--goal", &format!("Goal of {name}")])
        .args(["--success-criteria", "done", "--max-iterations", "5"])
        .assert()
        .success();
    f.loopx()
        .args(["arm", "--dir", d, "--root", f.temp.path().to_str().unwrap()])
        .args(["--force"])
        .assert()
        .success();
    dir.canonicalize().unwrap()
}

/// The row of `/api/loops` for the loop directory `dir`.
fn row_of<'a>(loops: &'a Value, dir: &std::path::Path) -> &'a Value {
    let dir = dir.to_str().unwrap();
    loops["loops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["loop_dir"] == dir)
        .unwrap_or_else(|| panic!("no row for {dir}: {loops}"))
}

#[test]
fn serve_all_lists_every_registered_loop_and_opens_each_behind_one_token() {
    let f = Fixture::new();
    f.init(10, &[]);
    drive_one_slow_turn(&f);
    let driven = f.dir.canonicalize().unwrap();
    let armed = armed_loop(&f, "second");
    let gone = armed_loop(&f, "gone");
    std::fs::remove_dir_all(&gone).unwrap();
    let before = (f.fingerprint(), common::fingerprint(&armed));

    let server = serve_all(&f);
    assert_eq!(
        server.start["token_file"].as_str(),
        Some(f.registry.join("serve.token").to_str().unwrap()),
        "one credential, kept beside the registry"
    );
    let loops = server.get("/api/loops").json();
    assert_eq!(loops["count"], 3, "{loops}");

    let first = row_of(&loops, &driven);
    assert_eq!(first["reach"], "readable", "{first}");
    assert_eq!(first["sources"], json!(["created", "driven"]));
    assert_eq!(first["health"]["state"], "not_driven", "{first}");
    assert!(first["last_activity"].is_string(), "{first}");
    let iterations = first["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "iterations")
        .unwrap();
    assert_eq!(
        (iterations["used"].as_f64(), iterations["max"].as_f64()),
        (Some(1.0), Some(10.0))
    );

    let second = row_of(&loops, &armed);
    assert_eq!(
        (second["reach"].as_str(), second["sources"].clone()),
        (Some("readable"), json!(["armed", "created"]))
    );
    assert_eq!(second["goal"], "Goal of second");

    let lost = row_of(&loops, &gone);
    assert_eq!(lost["reach"], "gone", "{lost}");
    assert!(
        lost["problem"].as_str().is_some_and(|p| p.contains("gone")
            && p.contains(&format!(
                "loopx disarm --run-id {}",
                lost["run_id"].as_str().unwrap()
            ))),
        "{lost}"
    );

    // Each readable loop's own dashboard and API, through the same token.
    for (row, dir) in [(first, &driven), (second, &armed)] {
        let base = format!("/loops/{}/", row["id"].as_str().unwrap());
        let status = server.get(&format!("{base}api/status")).json();
        assert_eq!(status["run_id"], row["run_id"], "{status}");
        assert_eq!(
            status["dir"].as_str().map(std::path::Path::new),
            Some(dir.as_path()),
            "{status}"
        );
        let overview = server.get(&base);
        assert_eq!(overview.status, 200);
        assert!(
            overview.body.contains("href=\"../../\""),
            "links back to all loops"
        );
        assert_eq!(server.get(&format!("{base}fragment/live")).status, 200);
    }
    let lost_status = server.get(&format!(
        "/loops/{}/api/status",
        lost["id"].as_str().unwrap()
    ));
    assert_eq!(lost_status.status, 404, "{}", lost_status.body);
    assert_eq!(server.get("/loops/0123456789abcdef/api/status").status, 404);

    // The page: a link into each readable loop, the gone one said so.
    let page = server.get("/");
    assert_eq!(page.status, 200);
    assert_eq!(
        page.body.matches("data-testid=\"loop-link\"").count(),
        2,
        "{}",
        page.body
    );
    assert!(page.body.contains("data-reach=\"gone\""), "{}", page.body);

    // One credential: none is refused, and a loop's own token is not it.
    assert_eq!(server.exchange("GET", "/api/loops", &[], "").status, 403);
    let first_base = format!("/loops/{}/api/status", first["id"].as_str().unwrap());
    assert_eq!(server.exchange("GET", &first_base, &[], "").status, 403);
    assert_eq!(
        server
            .exchange(
                "GET",
                &first_base,
                &[("X-Loopx-Token", "a-token-of-one-loop-only-0000")],
                ""
            )
            .status,
        403
    );
    // Reading every loop wrote nothing into any of them (no token file).
    assert_eq!((f.fingerprint(), common::fingerprint(&armed)), before);
}

#[test]
fn a_turn_shows_how_long_it_took_on_the_timeline_and_in_the_api() {
    let f = Fixture::new();
    f.init(10, &[]);
    drive_one_slow_turn(&f);
    let server = serve(&f, &[]);
    let turns = server.get("/api/turns").json();
    let turn = &turns["turns"][0];
    assert_eq!(turn["iteration"], 1, "{turns}");
    assert!(turn["seconds"].as_u64().is_some_and(|s| s >= 1), "{turns}");
    assert_eq!(turn["outcome"], "advanced", "{turns}");
    let page = server.get("/").body;
    let seconds = turn["seconds"].as_u64().unwrap();
    assert!(
        page.contains(&format!("data-seconds=\"{seconds}\""))
            && page.contains(&format!("took {seconds}s")),
        "{page}"
    );
}

#[test]
fn drive_registers_its_loop_for_the_all_loops_page() {
    let f = Fixture::new();
    f.init(10, &[]);
    drive_one_slow_turn(&f);
    let run_id = f.json(&["status", "--dir", f.d()])["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let entry: Value = serde_json::from_slice(
        &std::fs::read(f.registry.join(format!("driven/{run_id}.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(
        entry["loop_dir"].as_str(),
        f.dir.canonicalize().unwrap().to_str()
    );
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(f.registry.join("driven"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "the registry is private");
}

#[test]
fn serve_all_never_follows_a_planted_entry_or_symlink_out() {
    use std::os::unix::fs::PermissionsExt as _;
    let f = Fixture::new();
    let real = armed_loop(&f, "real");
    // A registry file that is a symlink to a valid entry elsewhere.
    let outside = f.temp.path().join("outside.json");
    let entry = std::fs::read_dir(f.registry.join("armed"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::copy(&entry, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, f.registry.join("armed/planted.json")).unwrap();
    // An entry whose loop directory is a symlink to the real loop.
    let link = f.temp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let mut linked: Value = serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
    linked["run_id"] = "linked".into();
    linked["loop_dir"] = link.to_str().unwrap().into();
    std::fs::write(f.registry.join("armed/linked.json"), linked.to_string()).unwrap();

    let server = serve_all(&f);
    let loops = server.get("/api/loops").json();
    assert_eq!(loops["count"], 2, "{loops}");
    assert_eq!(row_of(&loops, &real)["reach"], "readable");
    let through = row_of(&loops, &link);
    assert_eq!(through["reach"], "unreadable", "{through}");
    assert!(
        through["problem"].as_str().unwrap().contains("symlink"),
        "{through}"
    );
    let refused = server.get(&format!(
        "/loops/{}/api/status",
        through["id"].as_str().unwrap()
    ));
    assert_eq!(refused.status, 404, "{}", refused.body);
    assert!(
        loops["passed_over"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().contains("planted.json")),
        "{loops}"
    );

    // A registry directory others may write is not read at all: the
    // real loop is listed only because `init` noted it.
    let armed = f.registry.join("armed");
    std::fs::set_permissions(&armed, std::fs::Permissions::from_mode(0o777)).unwrap();
    let loops = server.get("/api/loops").json();
    assert_eq!(loops["count"], 1, "{loops}");
    assert_eq!(row_of(&loops, &real)["sources"], json!(["created"]));
    assert!(
        loops["passed_over"][0]
            .as_str()
            .unwrap()
            .contains("mode 777"),
        "{loops}"
    );
    std::fs::set_permissions(&armed, std::fs::Permissions::from_mode(0o700)).unwrap();

    // Another user's loop directory is listed as such and never opened.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&real, Some(65534), None).unwrap();
        let loops = server.get("/api/loops").json();
        let theirs = row_of(&loops, &real);
        assert_eq!(theirs["reach"], "not_yours", "{theirs}");
        assert!(theirs["health"].is_null(), "{theirs}");
        let refused = server.get(&format!("/loops/{}/", theirs["id"].as_str().unwrap()));
        assert_eq!(refused.status, 404);
    }
}

/// `loopx serve` over `f`'s registry from `cwd`, with `LOOPX_DIR` set to
/// `loopx_dir` or unset.
fn serve_from(
    f: &Fixture,
    which: &[&str],
    loopx_dir: Option<&str>,
    cwd: &std::path::Path,
) -> Server {
    let mut serve = Command::new(common::loopx_path());
    serve
        .arg("serve")
        .args(which)
        .args(["--addr", "127.0.0.1:0", "--json"])
        .env("LOOPX_REGISTRY_DIR", &f.registry)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_SERVE_TOKEN")
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(dir) = loopx_dir {
        serve.env("LOOPX_DIR", dir);
    }
    Server::started(serve.spawn().unwrap())
}

#[test]
fn serve_without_a_dir_lists_every_loop_and_all_overrides_loopx_dir() {
    let f = Fixture::new();
    f.init(10, &[]);
    let armed = armed_loop(&f, "second");
    let with_loopx_dir = |which: &[&str]| serve_from(&f, which, Some(f.d()), f.temp.path());

    // Neither --dir, LOOPX_DIR nor ./.loopx: the all-loops page, as with
    // --all, with every loop `init` made here, armed or not.
    let loops = Server::started(common::spawn_serve(&f, &[], &["--json"]))
        .get("/api/loops")
        .json();
    assert_eq!(loops["count"], 2, "{loops}");
    assert_eq!(row_of(&loops, &armed)["reach"], "readable");
    assert_eq!(
        row_of(&loops, &f.dir.canonicalize().unwrap())["sources"],
        json!(["created"])
    );
    // LOOPX_DIR names one loop; --all still lists them all.
    let loops = with_loopx_dir(&["--all"]).get("/api/loops").json();
    assert_eq!(loops["count"], 2, "{loops}");
    // LOOPX_DIR alone serves that loop.
    let status = with_loopx_dir(&[]).get("/api/status").json();
    assert_eq!(
        status["dir"].as_str().map(std::path::Path::new),
        Some(f.dir.as_path()),
        "{status}"
    );
    // In a project with a `.loopx`, that loop, as every other command;
    // --all there is every loop again.
    let project = f.temp.path().join("project");
    f.loopx()
        .current_dir(f.temp.path())
        .args([
            "init",
            "--dir",
            "project/.loopx",
            "--goal",
            "Goal of the project",
        ])
        .args(["--success-criteria", "done", "--max-iterations", "3"])
        .assert()
        .success();
    let in_project = |which: &[&str]| serve_from(&f, which, None, &project);
    let status = in_project(&[]).get("/api/status").json();
    assert_eq!(status["goal"], "Goal of the project", "{status}");
    let loops = in_project(&["--all"]).get("/api/loops").json();
    assert_eq!(loops["count"], 3, "{loops}");
}

#[test]
fn serve_all_and_a_dir_are_one_or_the_other() {
    let f = Fixture::new();
    f.init(10, &[]);
    f.loopx()
        .args(["serve", "--all", "--dir", f.d(), "--addr", "127.0.0.1:0"])
        .assert()
        .code(2);
}

#[test]
fn turns_are_paged_newest_first_with_a_cursor_and_each_iteration_finds_its_dispatch() {
    let f = Fixture::new();
    f.init(10, &[]);
    drive_turns(&f, 5, "true");
    let server = serve(&f, &[]);
    let iterations = |page: &Value| -> Vec<u64> {
        page["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["iteration"].as_u64().unwrap())
            .collect()
    };
    let newest = server.get("/api/turns?limit=3").json();
    assert_eq!(
        (
            iterations(&newest),
            &newest["total"],
            &newest["schema_version"]
        ),
        (vec![3, 4, 5], &json!(5), &json!(2)),
        "{newest}"
    );
    assert!(newest["turns"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["outcome"] == "advanced"));
    let older = newest["older"].as_u64().expect("two turns are older");
    let rest = server
        .get(&format!("/api/turns?limit=3&before={older}"))
        .json();
    assert_eq!(iterations(&rest), [1, 2], "{rest}");
    assert!(rest["older"].is_null(), "{rest}");
    let all = server.get("/api/turns").json();
    assert_eq!(iterations(&all), [1, 2, 3, 4, 5]);
    // Each iteration's detail names the dispatch that recorded it.
    for (i, turn) in all["turns"].as_array().unwrap().iter().enumerate() {
        let detail = server.get(&format!("/api/iterations/{}", i + 1)).json();
        assert_eq!(detail["record"]["iteration"], json!(i + 1));
        assert_eq!(
            detail["dispatch"]["dispatch_id"], turn["dispatch_id"],
            "{detail}"
        );
    }
    assert_eq!(server.get("/api/iterations/6").status, 404);
}

#[test]
fn the_live_view_stays_small_at_ten_thousand_todos_and_links_to_the_paged_list() {
    let f = Fixture::new();
    f.init(10, &[]);
    f.large_goal(10_000, 0, 0);
    let server = serve(&f, &[]);
    let live = server.get("/fragment/live").body;
    assert!(
        live.len() < 64 * 1024,
        "the live view is {} bytes",
        live.len()
    );
    assert_eq!(
        live.matches("data-testid=\"todo-card\"").count(),
        20,
        "one column of 20 cards"
    );
    assert!(live.contains("and 9980 more"), "{live}");
    // The goal's readback lists the first 100 todos and counts them all.
    let goal = server.get("/api/goal");
    assert!(
        goal.body.len() < 64 * 1024,
        "/api/goal is {} bytes",
        goal.body.len()
    );
    let goal = goal.json();
    assert_eq!(
        (
            goal["todos"].as_array().unwrap().len(),
            &goal["todos_total"]
        ),
        (100, &json!(10_000))
    );
    let page = server.get("/api/todos?limit=2").json();
    let ids: Vec<_> = page["todos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].clone())
        .collect();
    assert_eq!(
        (ids, &page["total"]),
        (vec![json!("t1"), json!("t2")], &json!(10_000))
    );
    // A cursor names the goal's lifetime (`main#1@2`): sent encoded.
    let cursor = page["next_cursor"].as_str().unwrap().replace('#', "%23");
    let next = server
        .get(&format!("/api/todos?limit=2&cursor={cursor}"))
        .json();
    assert_eq!(next["todos"][0]["id"], "t3");
    assert_eq!(server.get("/api/todos?limit=0").status, 400);
}

#[test]
fn the_all_loops_views_are_paged() {
    let f = Fixture::new();
    f.init(10, &[]);
    armed_loop(&f, "second");
    armed_loop(&f, "third");
    let server = serve_all(&f);
    let first = server.get("/api/loops?limit=2").json();
    assert_eq!(
        (
            first["count"].as_u64(),
            first["loops"].as_array().unwrap().len(),
            first["next"].as_u64()
        ),
        (Some(3), 2, Some(2)),
        "{first}"
    );
    let last = server.get("/api/loops?limit=2&start=2").json();
    assert_eq!(last["loops"].as_array().unwrap().len(), 1, "{last}");
    assert!(last["next"].is_null());
    let page = server.get("/?limit=2").body;
    assert!(
        page.contains("showing 1–2") && page.contains("data-testid=\"next-loops\""),
        "{page}"
    );
}

#[test]
fn a_snapshotted_turn_shows_both_commits_and_its_stat_on_its_iteration() {
    let f = Fixture::new();
    f.init(10, &[]);
    let root = f.temp.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    common::git(&root, &["init", "-q"]);
    common::git(&root, &["commit", "-q", "--allow-empty", "-m", "start"]);
    let agent = "printf 'one\\ntwo\\n' > made.txt; loopx append-iteration --mode bounded-research --objective edit --decision continue >/dev/null";
    f.loopx()
        .args(["drive", "--dir", f.d(), "--root", root.to_str().unwrap()])
        .args(["--cmd", agent, "--max-iterations", "1"])
        .assert()
        .success();
    let server = serve(&f, &[]);
    let detail = server.get("/api/iterations/1").json();
    let after = detail["snapshot"]["after"].as_str().unwrap().to_owned();
    assert_eq!(detail["snapshot"]["stat"]["insertions"], 2, "{detail}");
    let turns = server.get("/api/turns").json();
    assert_eq!(turns["turns"][0]["snapshot"]["after"], after.as_str());
    let page = server.get("/iterations/1").body;
    assert!(page.contains("data-testid=\"snapshot\""), "{page}");
    assert!(
        page.contains(&after) && page.contains("1 file, +2 -0"),
        "{page}"
    );
}

#[test]
fn the_page_shows_each_configured_check_with_its_last_result() {
    let f = loop_with_outcome();
    let page = |f: &Fixture| serve(f, &[]).get("/").body;
    assert!(page(&f).contains("no configured checks"));
    let config = f.json_file(
        "checks.json",
        &json!({"outcome_id": "deck", "criteria": [{"id": "R1", "validation_argv": ["true", "--intro"]}]}),
    );
    let proposal = f.json(&[
        "goal-acceptance",
        "prepare-checks",
        "--dir",
        f.d(),
        "--file",
        &config,
    ]);
    let basis = proposal["basis"].as_str().unwrap();
    f.loopx()
        .args([
            "goal-acceptance",
            "apply-checks",
            "--dir",
            f.d(),
            "--file",
            &config,
            "--basis",
            basis,
        ])
        .assert()
        .success();
    let before = page(&f);
    assert!(
        before.contains(r#"data-check="R1" data-state="never_run""#),
        "{before}"
    );
    assert!(before.contains("true --intro"));
    let root = f.temp.path();
    f.loopx()
        .args(["check", "run", "--dir", f.d(), "--root"])
        .arg(root)
        .assert()
        .success();
    let after = page(&f);
    assert!(
        after.contains(r#"data-check="R1" data-state="passed""#),
        "{after}"
    );
    assert!(after.contains("last pass (exit 0)"), "{after}");
    assert!(after.contains("against no git HEAD, by owner"), "{after}");
}

/// Stops the loop's supervisor and driver however the test ends.
struct StopsTheLoop<'a>(&'a Fixture, String);

impl Drop for StopsTheLoop<'_> {
    fn drop(&mut self) {
        let _ = self
            .0
            .loopx()
            .args(["stop", "--dir", self.0.d(), "--grace", "2s"])
            .env("PATH", &self.1)
            .output();
    }
}

/// The overview shows the supervisor's line beside the driver's, from
/// `service-status`'s use case: none before a supervisor ever ran; pid,
/// alive, backend, uptime and restarts while one runs; its end after.
#[test]
fn the_overview_shows_the_supervisor_beside_the_driver() {
    let f = Fixture::new();
    // One iteration: the turn's `continue` is refused, its `stop` ends the loop.
    f.init(1, &[]);
    let loopx_dir = common::loopx_path().parent().unwrap().display().to_string();
    let stop_marker = f.temp.path().join("finish");
    let (root, path) = f.fake_provider(
        "claude",
        &format!(
            r#"[ "$1" = --version ] && exit 0
while [ ! -e '{marker}' ]; do sleep 0.1; done
loopx append-iteration --mode bounded-research --objective "supervised turn" --decision continue >/dev/null 2>&1 || loopx append-iteration --mode bounded-research --objective "supervised turn" --decision stop >/dev/null"#,
            marker = stop_marker.display()
        ),
    );
    let path = format!("{loopx_dir}:{path}");
    let _stops = StopsTheLoop(&f, path.clone());
    let overview = |server: &Server| server.get("/").body;
    {
        let server = serve(&f, &[]);
        let page = overview(&server);
        assert!(page.contains("data-testid=\"driver\""), "{page}");
        assert!(!page.contains("data-testid=\"supervisor\""), "{page}");
    }
    f.loopx()
        .args(["start", "--dir", f.d(), "--root", root.to_str().unwrap()])
        .args(["--provider", "claude", "--detach"])
        .env("PATH", &path)
        .env("LOOPX_INJECTED_PROVIDERS", "1")
        .assert()
        .success();
    let server = serve(&f, &[]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let running = loop {
        let page = overview(&server);
        if page.contains("alive (detach), up ") || std::time::Instant::now() > deadline {
            break page;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let line = running
        .split("data-testid=\"supervisor\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap_or_else(|| panic!("no supervisor line: {running}"));
    assert!(line.starts_with("pid "), "{line}");
    assert!(line.contains("alive (detach), up "), "{line}");
    assert!(line.ends_with("0 restarts"), "{line}");
    // The turn ends the loop; the supervisor ends with it (after its
    // driver, whose own line says "with exit 0" first).
    std::fs::write(&stop_marker, "").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let ended = loop {
        let page = overview(&server);
        if page.contains("with exit 0 (done), 0 restarts") || std::time::Instant::now() > deadline {
            break page;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(ended.contains("(detach) ended at "), "{ended}");
    assert!(ended.contains("with exit 0 (done), 0 restarts"), "{ended}");
}
