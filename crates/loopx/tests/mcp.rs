//! `loopx mcp` through a real MCP client: the binary runs as a child
//! process and rmcp's client talks to it over stdio, as Claude Code, Codex
//! or OpenCode would. Every tool is called on a real loop; replay by
//! operation id, a conflicting reuse, a foreign agent's lease and an
//! attempt to route through a tool's input are each checked against the
//! store.

mod common;

use common::{iteration_numbers, Fixture};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt as _;
use serde_json::{json, Value};

type Client = RunningService<RoleClient, ()>;

const TOOLS: [&str; 14] = [
    "adopt_goal_objective",
    "append_evidence",
    "append_iteration",
    "claim_todo",
    "complete_todo",
    "prepare_goal_objective",
    "refine_outcome",
    "refresh_state",
    "release_todo",
    "renew_lease",
    "run_checks",
    "should_run",
    "status",
    "work_context",
];

impl Fixture {
    /// `loopx <args> --dir D --json` as `agent` (None = the owner); must succeed.
    fn cli(&self, agent: Option<&str>, args: &[&str]) -> Value {
        let mut command = self.loopx();
        command.args(args).args(["--dir", self.d(), "--json"]);
        if let Some(agent) = agent {
            command.env("LOOPX_AGENT_ID", agent);
        }
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// `loopx mcp` bound to this loop as `agent`, through the driver's
    /// variables, with rmcp's client on its stdio.
    async fn mcp(&self, agent: &str) -> Client {
        self.mcp_in(agent, &std::env::current_dir().unwrap()).await
    }

    /// [`Fixture::mcp`] with its working directory (the project) `cwd`.
    async fn mcp_in(&self, agent: &str, cwd: &std::path::Path) -> Client {
        let mut command = tokio::process::Command::new(common::loopx_path());
        command.current_dir(cwd);
        command
            .arg("mcp")
            .env("LOOPX_REGISTRY_DIR", &self.registry)
            .env("LOOPX_DIR", &self.dir)
            .env("LOOPX_AGENT_ID", agent)
            .env("LOOPX_DISPATCH_ID", "");
        ().serve(TokioChildProcess::new(command).unwrap())
            .await
            .expect("the MCP server initializes")
    }
}

async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"))
}

/// A successful call's structured result.
async fn ok(client: &Client, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments).await;
    assert_eq!(result.is_error, Some(false), "{tool} failed: {result:?}");
    result.structured_content.expect("a structured result")
}

/// A tool error's structured body; its text starts with `[class]`.
async fn failed(client: &Client, tool: &str, arguments: Value, class: &str) -> Value {
    let result = call(client, tool, arguments).await;
    assert_eq!(result.is_error, Some(true), "{tool} succeeded: {result:?}");
    let text = &result.content[0].as_text().expect("a text error").text;
    assert!(text.starts_with(&format!("[{class}] ")), "{tool}: {text}");
    let body = result.structured_content.expect("a structured error");
    assert_eq!(body["class"], class, "{tool}: {body}");
    body
}

fn setup() -> Fixture {
    let f = Fixture::new();
    f.init(20, &[]);
    for title in ["Build the deck", "Write the abstract", "Check the figures"] {
        f.cli(None, &["todo", "add", "--title", title]);
    }
    for agent in ["a", "b"] {
        f.cli(
            None,
            &["goal-acceptance", "register-agent", "--agent-id", agent],
        );
    }
    // t2 is b's: agent a's server must not be able to touch it.
    f.cli(Some("b"), &["todo", "claim", "t2"]);
    f
}

#[tokio::test]
async fn initialize_and_list_every_tool_with_a_schema() {
    let f = setup();
    let client = f.mcp("a").await;
    let info = client.peer_info().expect("the server answered initialize");
    assert_eq!(info.server_info.as_ref().unwrap().name, "loopx");
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    let mut expected: Vec<_> = TOOLS.iter().map(|t| t.to_string()).collect();
    expected.sort();
    assert_eq!(names, expected);
    for tool in &tools {
        assert!(tool.description.as_deref().is_some_and(|d| !d.is_empty()));
        assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
        let properties = tool.input_schema.get("properties");
        let required = tool.input_schema.get("required");
        let reads = ["work_context", "should_run", "status"];
        if reads.contains(&tool.name.as_ref()) {
            continue;
        }
        // Every write takes an operation id, and nothing that routes.
        assert!(
            required.is_some_and(|r| r.as_array().unwrap().contains(&json!("operation_id"))),
            "{}: {:?}",
            tool.name,
            tool.input_schema
        );
        for routing in ["dir", "goal_id", "agent_id", "dispatch_id"] {
            assert!(
                properties.is_some_and(|p| p.get(routing).is_none()),
                "{} takes {routing}",
                tool.name
            );
        }
        assert_eq!(tool.input_schema["additionalProperties"], false);
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn every_tool_acts_on_the_bound_loop_as_the_bound_agent() {
    let f = setup();
    let client = f.mcp("a").await;

    let context = ok(&client, "work_context", json!({})).await;
    assert_eq!(context["selected_todo"]["id"], "t1", "{context}");
    assert!(context["task_body"]["body"]
        .as_str()
        .unwrap()
        .contains("t1"));
    let decision = ok(&client, "should_run", json!({})).await;
    assert_eq!(decision["should_run"], true, "{decision}");

    let claim = json!({"todo_id": "t1", "ttl_seconds": 600, "operation_id": "claim-t1"});
    let claimed = ok(&client, "claim_todo", claim.clone()).await;
    assert_eq!(claimed["todo_id"], "t1");
    assert_eq!(claimed["replayed"], false);
    let renew = json!({"todo_id": "t1", "ttl_seconds": 900, "operation_id": "renew-t1"});
    assert_eq!(ok(&client, "renew_lease", renew).await["todo_id"], "t1");
    let note = json!({"note": "intro slide found", "evidence_refs": ["deck.pdf#1"], "operation_id": "ev-1"});
    let noted = ok(&client, "append_evidence", note).await;
    assert_eq!(noted["outcome"], Value::Null);
    let update = json!({
        "outcome_id": "deck",
        "objective": "A talk deck that keeps the accepted introduction",
        "add_requirements": [{"id": "R1", "description": "Keep the intro slide first"}],
        "link_todos": ["t1"],
        "source": {"ref": "msg-1", "summary": "user: keep my intro"}
    });
    let refined = ok(
        &client,
        "refine_outcome",
        json!({"update": update, "operation_id": "refine-1"}),
    )
    .await;
    assert!(
        refined["effects"].to_string().contains("outcome"),
        "{refined}"
    );
    let completed = ok(
        &client,
        "complete_todo",
        json!({"todo_id": "t1", "note": "deck built", "operation_id": "done-t1"}),
    )
    .await;
    assert_eq!(completed["todo_id"], "t1");
    let claim3 = json!({"todo_id": "t3", "ttl_seconds": 600, "operation_id": "claim-t3"});
    ok(&client, "claim_todo", claim3).await;
    let release = json!({"todo_id": "t3", "operation_id": "release-t3"});
    assert_eq!(ok(&client, "release_todo", release).await["todo_id"], "t3");
    let review = json!({"outcome_id": "deck", "reviews": [{"requirement_id": "R1", "conclusion": "met", "reasoning": "slide 1 is the intro", "evidence_refs": ["deck.pdf#1"]}]});
    let writeback = json!({
        "note": "turn done", "evidence_refs": ["deck.pdf"],
        "block": [{"todo_id": "t3", "reason": "needs the data"}],
        "outcome_update": review, "operation_id": "turn-1"
    });
    let refreshed = ok(&client, "refresh_state", writeback).await;
    assert_eq!(refreshed["outcome"]["replayed"], false, "{refreshed}");

    let iteration = json!({
        "mode": "bounded-research", "objective": "Build the deck",
        "decision": "continue", "output": "deck built", "operation_id": "iter-1"
    });
    let appended = ok(&client, "append_iteration", iteration).await;
    assert_eq!(appended["iteration"], 1);
    let status = ok(&client, "status", json!({})).await;
    assert_eq!(status["dir"], f.d(), "{status}");

    // The objective: a proposes, the owner revises, a adopts.
    let proposal = json!({"objective": "Write the talk and an abstract", "reason": "user asked", "source_ref": "msg-5", "operation_id": "prep-1"});
    let proposed = ok(&client, "prepare_goal_objective", proposal).await;
    assert_eq!(proposed["effects"], json!(["objective_proposed"]));
    let doc = f.temp.path().join("revision.json");
    std::fs::write(
        &doc,
        json!({"objective": "Write the talk and an abstract", "reason": "user asked", "source_ref": "msg-5"}).to_string(),
    )
    .unwrap();
    let provider = f.cli(None, &["goal-acceptance", "inspect"])["provider_revision"].to_string();
    f.cli(
        None,
        &[
            "goal-acceptance",
            "revise-objective",
            "--document",
            doc.to_str().unwrap(),
            "--expected-provider-revision",
            &provider,
            "--execute",
        ],
    );
    let view = f.cli(
        Some("a"),
        &["goal-acceptance", "inspect", "--agent-id", "a"],
    );
    let adoption = json!({
        "revision": 1,
        "digest": view["objective"]["current_digest"],
        "work_digest": view["objective"]["objective_work_digest"],
        "review_summary": "my todos fit the new scope",
        "operation_id": "adopt-1"
    });
    let adopted = ok(&client, "adopt_goal_objective", adoption).await;
    assert_eq!(adopted["replayed"], false, "{adopted}");
    let states: Vec<_> = f.cli(None, &["goal-acceptance", "inspect"])["objective"]["adoption"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["agent_id"].clone(), a["state"].clone()))
        .collect();
    assert!(
        states.contains(&(json!("a"), json!("adopted"))),
        "{states:?}"
    );

    // The goal saw agent a, never the owner or b.
    let todos = f.cli(None, &["todo", "list"]);
    assert_eq!(todos["todos"][0]["status"], "done", "{todos}");
    assert_eq!(todos["todos"][1]["lease"]["holder"], "b", "{todos}");
    f.assert_valid();
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn in_enforce_mode_append_iteration_stages_a_candidate_instead_of_banking() {
    let f = Fixture::new();
    f.init(5, &["--goal-focus-mode", "enforce"]);
    std::fs::create_dir_all(f.dir.join("notes")).unwrap();
    std::fs::write(f.dir.join("notes/b.md"), "lemma B holds for n <= 4\n").unwrap();
    // Staging binds to the driver's open dispatch: the server runs as the
    // agent of that turn would.
    let dispatch = f.open_dispatch("claude");
    let mut command = tokio::process::Command::new(common::loopx_path());
    command
        .arg("mcp")
        .env("LOOPX_REGISTRY_DIR", &f.registry)
        .env("LOOPX_DIR", &f.dir)
        .env("LOOPX_AGENT_ID", "a")
        .env("LOOPX_DISPATCH_ID", &dispatch)
        .env("AAS_AUTOLOOP_PRIMARY_PROVIDER", "claude");
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let iteration = |evidence: &str| {
        json!({
            "mode": "bounded-research", "objective": "Check lemma B",
            "decision": "continue", "claim_ids": ["c1"],
            "claim_evidence": [format!("c1={evidence}")], "operation_id": "iter-1"
        })
    };

    // Evidence outside the loop directory is refused, and nothing is written.
    let before = f.fingerprint();
    failed(
        &client,
        "append_iteration",
        iteration("../outside.md"),
        "refused",
    )
    .await;
    assert_eq!(f.fingerprint(), before, "a refused staging wrote");

    let staged = ok(&client, "append_iteration", iteration("notes/b.md")).await;
    assert_eq!(staged["state"], "pending_review", "{staged}");
    let fingerprint = staged["candidate_fingerprint"].as_str().unwrap();
    assert!(fingerprint.starts_with("sha256:"), "{staged}");
    let status = f.cli(None, &["goal-focus", "status"]);
    assert_eq!(
        status["candidate"]["pending"]["fingerprint"], fingerprint,
        "{status}"
    );
    assert_eq!(
        status["candidate"]["pending"]["dispatch_id"],
        dispatch.as_str()
    );
    assert_eq!(f.cli(None, &["status"])["iterations"], 0, "nothing banked");
    f.assert_valid();
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_repeated_call_replays_and_a_changed_one_conflicts() {
    let f = setup();
    let client = f.mcp("a").await;
    let claim = json!({"todo_id": "t1", "ttl_seconds": 600, "operation_id": "claim-t1"});
    let first = ok(&client, "claim_todo", claim.clone()).await;
    let iteration = json!({
        "mode": "bounded-research", "objective": "Build the deck",
        "decision": "continue", "operation_id": "iter-1"
    });
    let appended = ok(&client, "append_iteration", iteration.clone()).await;

    // A lost reply is recovered by repeating the call: same receipt, nothing written.
    let before = f.fingerprint();
    let again = ok(&client, "claim_todo", claim).await;
    assert_eq!(again["replayed"], true);
    for key in ["operation_id", "revision", "committed_at", "todo_id"] {
        assert_eq!(again[key], first[key], "{key}");
    }
    let replayed = ok(&client, "append_iteration", iteration).await;
    assert_eq!(replayed["replayed"], true);
    assert_eq!(replayed["revision"], appended["revision"]);
    assert_eq!(f.fingerprint(), before, "a replay wrote");
    assert_eq!(iteration_numbers(&f.dir), [1], "one journal row");

    // The same id for a different request is a conflict, and writes nothing.
    let changed = json!({"todo_id": "t1", "ttl_seconds": 60, "operation_id": "claim-t1"});
    let body = failed(&client, "claim_todo", changed, "conflict").await;
    assert!(
        body["hint"].as_str().unwrap().contains("operation_id"),
        "{body}"
    );
    let changed = json!({
        "mode": "bounded-research", "objective": "Something else",
        "decision": "continue", "operation_id": "iter-1"
    });
    failed(&client, "append_iteration", changed, "conflict").await;
    assert_eq!(f.fingerprint(), before, "a conflict wrote");
    assert_eq!(f.cli(None, &["status"])["iterations"], 1);
    f.assert_valid();
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_key_in_any_tool_input_never_reaches_the_store() {
    const KEY: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let f = setup();
    let client = f.mcp("a").await;
    let note = json!({
        "note": format!("the log showed token_{KEY}"),
        "evidence_refs": [format!("log-{KEY}"), "deck.pdf#1"],
        "operation_id": "ev-key"
    });
    ok(&client, "append_evidence", note).await;
    let iteration = json!({
        "mode": "bounded-research", "objective": "Build the deck",
        "decision": "continue", "operation_id": "iter-key",
        "input_refs": [format!("key_{KEY}")],
        "source_ids": [format!("src_{KEY}")],
        "guard_refs": [format!("guard_{KEY}")],
        "evidence_ids": [format!("ev_{KEY}")],
        "claim_ids": [format!("claim_{KEY}")]
    });
    ok(&client, "append_iteration", iteration).await;
    client.cancel().await.unwrap();

    let stored = common::stored_text(&f.dir);
    assert!(stored.contains("[REDACTED]"), "nothing was redacted");
    assert!(!stored.contains(KEY), "a key survived: {stored}");
    // An honest reference is kept as given.
    assert!(stored.contains("deck.pdf#1"), "{stored}");
    f.assert_valid();
}

#[tokio::test]
async fn a_foreign_agents_todo_and_routing_through_inputs_are_refused() {
    let f = setup();
    let client = f.mcp("a").await;
    let before = f.fingerprint();
    for (tool, arguments) in [
        (
            "claim_todo",
            json!({"todo_id": "t2", "ttl_seconds": 600, "operation_id": "steal"}),
        ),
        (
            "complete_todo",
            json!({"todo_id": "t2", "operation_id": "finish-b"}),
        ),
        (
            "release_todo",
            json!({"todo_id": "t2", "operation_id": "release-b"}),
        ),
    ] {
        let body = failed(&client, tool, arguments, "refused").await;
        assert!(
            body["error"].as_str().unwrap().contains("t2"),
            "{tool}: {body}"
        );
    }
    // There is no input that names a loop, goal or agent: one that tries is
    // rejected (rmcp's tool error for parameters that do not deserialize),
    // never obeyed; so is a write without an operation id.
    for (tool, arguments, named) in [
        (
            "complete_todo",
            json!({"todo_id": "t2", "operation_id": "as-b", "agent_id": "b", "dir": "/elsewhere"}),
            "unknown field `agent_id`",
        ),
        (
            "claim_todo",
            json!({"todo_id": "t1", "ttl_seconds": 600}),
            "missing field `operation_id`",
        ),
    ] {
        let result = call(&client, tool, arguments).await;
        assert_eq!(result.is_error, Some(true), "{tool}: {result:?}");
        let text = &result.content[0].as_text().unwrap().text;
        assert!(text.contains(named), "{tool}: {text}");
    }
    assert_eq!(f.fingerprint(), before, "a refusal wrote");
    client.cancel().await.unwrap();
}

/// The official MCP inspector (`@modelcontextprotocol/inspector`, `--cli`
/// mode) when it is installed: `LOOPX_MCP_INSPECTOR` names its
/// `mcp-inspector` executable, else it is looked up on PATH. Without it the
/// test says so and passes; the rmcp client tests above stand alone.
fn inspector() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("LOOPX_MCP_INSPECTOR") {
        return Some(path.into());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("mcp-inspector"))
        .find(|candidate| candidate.is_file())
}

#[test]
fn the_official_inspector_lists_calls_and_replays() {
    let Some(inspector) = inspector() else {
        common::skipped_without("mcp-inspector is not installed (set LOOPX_MCP_INSPECTOR)");
        return;
    };
    let f = setup();
    let run = |method: &[&str]| -> Value {
        let output = std::process::Command::new(&inspector)
            .args(["--cli", common::loopx_path().to_str().unwrap(), "mcp"])
            .args(method)
            .env("LOOPX_REGISTRY_DIR", &f.registry)
            .env("LOOPX_DIR", &f.dir)
            .env("LOOPX_AGENT_ID", "a")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{method:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let tools = run(&["--method", "tools/list"]);
    assert_eq!(tools["tools"].as_array().unwrap().len(), TOOLS.len());
    let claim = [
        "--method",
        "tools/call",
        "--tool-name",
        "claim_todo",
        "--tool-arg",
        "todo_id=t1",
        "--tool-arg",
        "ttl_seconds=600",
        "--tool-arg",
        "operation_id=claim-t1",
    ];
    let first = run(&claim);
    assert_eq!(first["isError"], false, "{first}");
    let again = run(&claim);
    assert_eq!(again["structuredContent"]["replayed"], true, "{again}");
    assert_eq!(
        again["structuredContent"]["revision"],
        first["structuredContent"]["revision"]
    );
    let foreign = run(&[
        "--method",
        "tools/call",
        "--tool-name",
        "complete_todo",
        "--tool-arg",
        "todo_id=t2",
        "--tool-arg",
        "operation_id=finish-b",
    ]);
    assert_eq!(foreign["isError"], true, "{foreign}");
    assert_eq!(
        foreign["structuredContent"]["class"], "refused",
        "{foreign}"
    );
}

/// `loopx mcp` on raw pipes, as a client that sends what it likes: lines
/// written from a thread (a long one blocks until the server reads it),
/// each line of output parsed as it comes.
struct RawServer {
    child: std::process::Child,
    input: Option<std::process::ChildStdin>,
    replies: std::sync::mpsc::Receiver<Value>,
}

impl RawServer {
    fn start(f: &Fixture) -> Self {
        use std::io::BufRead as _;
        use std::process::Stdio;
        let mut child = std::process::Command::new(common::loopx_path())
            .arg("mcp")
            .env("LOOPX_REGISTRY_DIR", &f.registry)
            .env("LOOPX_DIR", &f.dir)
            .env("LOOPX_AGENT_ID", "agent-a")
            .env("LOOPX_DISPATCH_ID", "")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let (send, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let line = line.unwrap();
                let value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("the server wrote a line that is not JSON ({e}): {line}")
                });
                if send.send(value).is_err() {
                    return;
                }
            }
        });
        RawServer {
            input: child.stdin.take(),
            child,
            replies,
        }
    }

    /// Write `bytes` (one or more lines) from another thread.
    fn send(&mut self, bytes: Vec<u8>) -> std::thread::JoinHandle<()> {
        use std::io::Write as _;
        let mut input = self.input.take().unwrap();
        let (back, returned) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            input.write_all(&bytes).unwrap();
            input.flush().unwrap();
            back.send(input).unwrap();
        });
        self.input = Some(returned.recv().unwrap());
        writer
    }

    /// The next line the server writes, within a minute.
    fn reply(&self) -> Value {
        self.replies
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the server sent no reply: the client would hang")
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        drop(self.input.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn every_line_gets_a_reply_whatever_it_holds() {
    let f = setup();
    let mut server = RawServer::start(&f);
    let deep = format!("{}{}\n", "[".repeat(5000), "]".repeat(5000));
    let mut huge = vec![b'x'; 200 * 1024 * 1024];
    huge.push(b'\n');
    // What each is, its bytes, the error code and the id answered (the
    // request's own when it can be read; none when nothing can be).
    let cases: Vec<(&str, Vec<u8>, i64, Value)> = vec![
        ("not JSON", b"hello there\n".to_vec(), -32700, Value::Null),
        (
            "cut short",
            b"{\"jsonrpc\": \"2.0\", \"id\": 1\n".to_vec(),
            -32700,
            Value::Null,
        ),
        (
            "invalid UTF-8",
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"\xff\"}\n".to_vec(),
            -32700,
            Value::Null,
        ),
        ("5000-deep nesting", deep.into_bytes(), -32700, Value::Null),
        ("a 200 MB line", huge, -32600, Value::Null),
        (
            "JSON that is no request",
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":42}\n".to_vec(),
            -32600,
            json!(7),
        ),
    ];
    for (what, bytes, code, id) in cases {
        let started = std::time::Instant::now();
        server.send(bytes).join().unwrap();
        let reply = server.reply();
        assert_eq!(reply["error"]["code"], code, "{what}: {reply}");
        assert_eq!(reply["jsonrpc"], "2.0", "{what}: {reply}");
        assert_eq!(reply["id"], id, "{what}: {reply}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{what} took {:?}",
            started.elapsed()
        );
    }

    // And the session goes on: initialize and list the tools.
    let initialize = json!({"jsonrpc": "2.0", "id": 10, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    server
        .send(format!("{initialize}\n").into_bytes())
        .join()
        .unwrap();
    let reply = server.reply();
    assert_eq!(reply["id"], 10, "{reply}");
    assert!(reply["result"]["serverInfo"].is_object(), "{reply}");
    let rest = format!(
        "{}\n{}\n",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 11, "method": "tools/list"})
    );
    server.send(rest.into_bytes()).join().unwrap();
    let reply = server.reply();
    assert_eq!(reply["id"], 11, "{reply}");
    assert_eq!(
        reply["result"]["tools"].as_array().unwrap().len(),
        TOOLS.len()
    );
}

#[tokio::test]
async fn a_server_refuses_a_database_swapped_under_it_for_another_loop() {
    let f = setup();
    let client = f.mcp("a").await;
    let before = ok(&client, "status", json!({})).await;
    // Another loop's database, moved into this loop's place while the
    // server runs (as a restore from the wrong backup would).
    let other = Fixture::new();
    other.init(5, &[]);
    for name in ["loopx.sqlite", "loopx.sqlite-wal", "loopx.sqlite-shm"] {
        let _ = std::fs::remove_file(f.dir.join(name));
        if other.dir.join(name).exists() {
            std::fs::copy(other.dir.join(name), f.dir.join(name)).unwrap();
        }
    }
    let swapped = common::fingerprint(&f.dir);
    for (tool, arguments) in [
        ("status", json!({})),
        (
            "claim_todo",
            json!({"todo_id": "t1", "ttl_seconds": 600, "operation_id": "c1"}),
        ),
        (
            "append_iteration",
            json!({"mode": "monitor", "objective": "o", "decision": "continue", "operation_id": "a1"}),
        ),
    ] {
        let body = failed(&client, tool, arguments, "refused").await;
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains("not loop"), "{tool}: {body}");
        assert!(
            error.contains(before["run_id"].as_str().unwrap()),
            "{tool}: {body} / {before}"
        );
    }
    // Nothing of the other loop was read into, or written to.
    assert_eq!(common::fingerprint(&f.dir), swapped);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn should_run_is_bounded_at_ten_thousand_todos_unless_the_detail_is_asked_for() {
    let f = Fixture::new();
    f.init(5, &[]);
    f.large_goal(10_000, 12, 20);
    let client = f.mcp("a").await;
    let brief = ok(&client, "should_run", json!({})).await;
    let bytes = brief.to_string().len();
    assert!(bytes <= 8 * 1024, "should_run is {bytes} bytes: {brief}");
    assert_eq!(brief["selected_todo"]["id"], "t1", "{brief}");
    assert_eq!(brief["counts"]["todos"], 10_000);
    assert_eq!(brief["open_gaps"].as_array().unwrap().len(), 5);
    assert_eq!(brief["open_gaps_total"], 12);
    let detail = ok(&client, "should_run", json!({"detail": true})).await;
    assert_eq!(detail["open_gaps"].as_array().unwrap().len(), 12);
    assert_eq!(detail["scheduler_hint"], brief["scheduler_hint"]);
    let refused = call(
        &client,
        "should_run",
        json!({"detail": true, "loop": "other"}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true), "unknown fields are refused");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_agent_asks_the_host_to_run_the_owners_checks_and_a_retry_runs_nothing_twice() {
    let f = setup();
    let project = f.temp.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let marker = f.temp.path().join("ran");
    let update = json!({"outcome_id": "deck", "objective": "A deck",
        "add_requirements": [{"id": "slides:built", "description": "the slides build"}],
        "source": {"ref": "msg-1"}});
    let document = f.json_file("outcome.json", &update);
    f.cli(
        None,
        &["goal-acceptance", "refine-outcome", "--document", &document],
    );
    let config = f.json_file("checks.json", &json!({"outcome_id": "deck", "criteria": [
        {"id": "slides:built", "validation_argv": ["sh", "-c", format!("echo run >> '{}'", marker.display())]}]}));
    let proposal = f.cli(
        None,
        &["goal-acceptance", "prepare-checks", "--file", &config],
    );
    let basis = proposal["basis"].as_str().unwrap();
    f.cli(
        None,
        &[
            "goal-acceptance",
            "apply-checks",
            "--file",
            &config,
            "--basis",
            basis,
        ],
    );
    let client = f.mcp_in("a", &project).await;
    let ask = json!({"outcome_id": "deck", "operation_id": "run-1"});
    let ran = ok(&client, "run_checks", ask.clone()).await;
    assert_eq!(ran["criteria"][0]["state"], "passed", "{ran}");
    assert_eq!(ran["criteria"][0]["last"]["ran_by"], "agent a (MCP)");
    let again = ok(&client, "run_checks", ask).await;
    assert_eq!(again["replayed"], true, "{again}");
    let runs = std::fs::read_to_string(&marker).unwrap().lines().count();
    assert_eq!(runs, 1, "a retry ran the checks again");
    // The agent names no command and supplies no result.
    for smuggled in [
        json!({"outcome_id": "deck", "operation_id": "run-2", "validation_argv": ["true"]}),
        json!({"outcome_id": "deck", "operation_id": "run-3", "results": []}),
    ] {
        let refused = call(&client, "run_checks", smuggled).await;
        assert_eq!(refused.is_error, Some(true), "unknown fields are refused");
    }
    client.cancel().await.unwrap();
}
