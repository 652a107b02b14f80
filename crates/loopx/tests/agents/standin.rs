//! A scripted stand-in for a model API, on loopback, written for these
//! tests: no model, no network. It speaks, with SSE streaming, the
//! Anthropic Messages API (`/v1/messages`: Claude Code, OpenCode's
//! Anthropic provider) and the OpenAI Responses API (`/v1/responses`:
//! Codex), enough for a real agent CLI to run a real turn against it: the
//! model's replies are a script of shell calls, texts and errors (status,
//! headers, body), or a hang.
//!
//! Each model turn of the agent (a Messages request that offers tools;
//! every Responses request) takes the next reply of the script; a Messages
//! request without tools (a CLI's side call: a session title) is answered
//! with a short text and takes nothing. A script that runs out answers
//! every further turn with a closing text.

use serde_json::{json, Value};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One reply of the model.
#[derive(Debug, Clone)]
pub enum Reply {
    /// The model runs `command` with the CLI's shell tool (Claude Code's
    /// `Bash`, OpenCode's `bash`, Codex's `exec_command` through its
    /// `exec` tool).
    Shell(String),
    /// The model answers `text` and ends its turn.
    Text(&'static str),
    /// The API answers with this status, headers and body.
    Error {
        status: u16,
        headers: Vec<(&'static str, &'static str)>,
        body: &'static str,
    },
    /// The API starts a 200 stream, then sends an `error` event with
    /// this body (Anthropic's overloaded_error mid-stream) and closes.
    BrokenStream(&'static str),
    /// The API never answers (the connection stays open).
    Hang,
}

impl Reply {
    pub fn shell(command: &str) -> Reply {
        Reply::Shell(command.to_owned())
    }
}

/// Input and output tokens the stand-in reports for each model turn.
pub const INPUT_TOKENS: u64 = 1000;
pub const OUTPUT_TOKENS: u64 = 50;

/// What the stand-in saw.
#[derive(Debug, Default)]
struct Seen {
    /// Model turns asked for (requests that offered tools).
    turns: usize,
    /// Each model turn's request body.
    requests: Vec<Value>,
    /// Each request that offered no tool.
    side_calls: Vec<Value>,
    script: Vec<Reply>,
}

pub struct StandIn {
    /// The base URL to give a CLI (no `/v1`: the CLIs add it).
    pub url: String,
    seen: Arc<Mutex<Seen>>,
}

impl StandIn {
    /// Serve `script` on a free loopback port until the test ends.
    pub fn new(script: Vec<Reply>) -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Seen {
            turns: 0,
            requests: Vec::new(),
            side_calls: Vec::new(),
            script: script.into_iter().rev().collect(),
        }));
        let shared = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let _ = serve(stream, &seen);
                });
            }
        });
        StandIn { url, seen }
    }

    /// How many model turns the agent asked for.
    pub fn turns(&self) -> usize {
        self.seen.lock().unwrap().turns
    }

    /// The request body of each model turn, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.seen.lock().unwrap().requests.clone()
    }

    /// Each request that offered the model no tool (answered as a side
    /// call, not a turn of the script).
    pub fn side_calls(&self) -> Vec<Value> {
        self.seen.lock().unwrap().side_calls.clone()
    }
}

/// One request, then the connection is closed.
fn serve(stream: TcpStream, seen: &Mutex<Seen>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let mut out = stream;
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if request_line.starts_with("POST ") && request_line.contains("/v1/responses") {
        let reply = next(seen, &request);
        return responses(&mut out, reply, seen);
    }
    if !request_line.starts_with("POST ") || !request_line.contains("/v1/messages") {
        return respond(&mut out, 404, &[], "application/json", "{}");
    }
    if request_line.contains("/count_tokens") {
        return respond(
            &mut out,
            200,
            &[],
            "application/json",
            r#"{"input_tokens":1000}"#,
        );
    }
    let model = request["model"].as_str().unwrap_or("claude-sonnet-4-5");
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    let reply = if tools.is_empty() {
        seen.lock().unwrap().side_calls.push(request.clone());
        Reply::Text("Stand-in title")
    } else {
        next(seen, &request)
    };
    let streaming = request["stream"].as_bool() == Some(true);
    let block = match reply {
        Reply::BrokenStream(error) => {
            let start = json!({ "type": "message_start", "message": {
                "id": "msg_standin", "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": { "input_tokens": INPUT_TOKENS, "output_tokens": 1 },
            }});
            let error: Value = serde_json::from_str(error).unwrap_or(Value::Null);
            let events = [("message_start", &start), ("error", &error)];
            return stream_events(&mut out, events.into_iter());
        }
        Reply::Hang | Reply::Error { .. } => return fail(&mut out, reply),
        Reply::Text(text) => json!({ "type": "text", "text": text }),
        Reply::Shell(command) => {
            // The shell tool as the CLI names it (`Bash`, `bash`).
            let name = tools
                .iter()
                .find(|t| t.eq_ignore_ascii_case("bash"))
                .copied()
                .unwrap_or("Bash");
            let id = format!("toolu_standin_{}", seen.lock().unwrap().turns);
            let input = json!({ "command": command, "description": "run a command" });
            json!({ "type": "tool_use", "id": id, "name": name, "input": input })
        }
    };
    let stop_reason = if block["type"] == "tool_use" {
        "tool_use"
    } else {
        "end_turn"
    };
    message(&mut out, model, block, stop_reason, streaming)
}

/// The next reply of the script, counting a model turn.
fn next(seen: &Mutex<Seen>, request: &Value) -> Reply {
    let mut seen = seen.lock().unwrap();
    seen.turns += 1;
    seen.requests.push(request.clone());
    seen.script
        .pop()
        .unwrap_or(Reply::Text("The script has ended."))
}

/// A reply that is not the model's: an error response, or none at all
/// (a hang; a broken stream is the caller's, as its protocol has it).
fn fail(out: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::Error {
            status,
            headers,
            body,
        } => respond(out, status, &headers, "application/json", body),
        _ => loop {
            std::thread::sleep(Duration::from_secs(60));
        },
    }
}

/// One Responses API turn, as the SSE events Codex reads: the item (a
/// call of Codex's `exec` tool, whose JavaScript runs `exec_command`, or
/// an assistant message) and the completed response with its usage.
fn responses(out: &mut TcpStream, reply: Reply, seen: &Mutex<Seen>) -> std::io::Result<()> {
    let turn = seen.lock().unwrap().turns;
    let id = format!("resp_standin_{turn}");
    let item = match reply {
        Reply::Hang | Reply::Error { .. } => return fail(out, reply),
        // The stream ends before the response completes.
        Reply::BrokenStream(_) => {
            let created = json!({ "type": "response.created", "response": { "id": id } });
            return stream_events(out, [("response.created", &created)].into_iter());
        }
        Reply::Text(text) => json!({
            "type": "message", "role": "assistant", "id": format!("msg_standin_{turn}"),
            "content": [{ "type": "output_text", "text": text }],
        }),
        Reply::Shell(command) => json!({
            "type": "custom_tool_call", "id": format!("ctc_standin_{turn}"),
            "call_id": format!("call_standin_{turn}"), "name": "exec", "status": "completed",
            "input": format!(
                "const r = await tools.exec_command({{cmd: {}}}); text(r.output);",
                Value::from(command)
            ),
        }),
    };
    let usage = json!({
        "input_tokens": INPUT_TOKENS, "input_tokens_details": { "cached_tokens": 0 },
        "output_tokens": OUTPUT_TOKENS, "output_tokens_details": { "reasoning_tokens": 0 },
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
    });
    let events = [
        json!({ "type": "response.created", "response": { "id": id } }),
        json!({ "type": "response.output_item.added", "output_index": 0, "item": item }),
        json!({ "type": "response.output_item.done", "output_index": 0, "item": item }),
        json!({ "type": "response.completed", "response": { "id": id, "usage": usage } }),
    ];
    stream_events(
        out,
        events.iter().map(|e| (e["type"].as_str().unwrap_or(""), e)),
    )
}

/// A 200 SSE response of `(event, data)` pairs; the connection then closes.
fn stream_events<'a>(
    out: &mut TcpStream,
    events: impl Iterator<Item = (&'a str, &'a Value)>,
) -> std::io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    out.write_all(head.as_bytes())?;
    for (event, data) in events {
        out.write_all(format!("event: {event}\ndata: {data}\n\n").as_bytes())?;
    }
    out.flush()
}

fn respond(
    out: &mut TcpStream,
    status: u16,
    headers: &[(&str, &str)],
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} Stand-in\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(body.as_bytes())?;
    out.flush()
}

/// One assistant message holding `block`, as a JSON body or as the SSE
/// events of the streaming API.
fn message(
    out: &mut TcpStream,
    model: &str,
    block: Value,
    stop_reason: &str,
    streaming: bool,
) -> std::io::Result<()> {
    let usage = json!({ "input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS });
    if !streaming {
        let body = json!({
            "id": "msg_standin", "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop_reason, "stop_sequence": null, "usage": usage,
        });
        return respond(out, 200, &[], "application/json", &body.to_string());
    }
    let mut events = vec![(
        "message_start",
        json!({ "type": "message_start", "message": {
            "id": "msg_standin", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": { "input_tokens": INPUT_TOKENS, "output_tokens": 1 },
        }}),
    )];
    let delta = match block["type"].as_str() {
        Some("tool_use") => {
            let partial = block["input"].to_string();
            let mut start = block.clone();
            start["input"] = json!({});
            events.push((
                "content_block_start",
                json!({ "type": "content_block_start", "index": 0, "content_block": start }),
            ));
            json!({ "type": "input_json_delta", "partial_json": partial })
        }
        _ => {
            events.push(("content_block_start", json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } })));
            json!({ "type": "text_delta", "text": block["text"] })
        }
    };
    events.push((
        "content_block_delta",
        json!({ "type": "content_block_delta", "index": 0, "delta": delta }),
    ));
    events.push((
        "content_block_stop",
        json!({ "type": "content_block_stop", "index": 0 }),
    ));
    events.push((
        "message_delta",
        json!({ "type": "message_delta", "delta": { "stop_reason": stop_reason, "stop_sequence": null }, "usage": { "output_tokens": OUTPUT_TOKENS } }),
    ));
    events.push(("message_stop", json!({ "type": "message_stop" })));
    stream_events(out, events.iter().map(|(event, data)| (*event, data)))
}
