//! `loopx notify-event` on the real binary: nothing planted leaves the host
//! (dry run, every rendering, the audit log, every transport body, the
//! command hook's stdin); a local HTTPS receiver gets each event exactly
//! once across retries and a lost acknowledgement; redirects and plain
//! HTTP are refused; enforce mode withholds without consent.

mod common;

use common::Fixture;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const KNOWN_SECRET: &str = "PlantedHookSecret-123";
const TELEGRAM_TOKEN: &str = "bot123456:AAHsecretTelegramPath987";
const GITHUB_TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
const EMAIL: &str = "ada.lovelace@example.org";
const PHONE: &str = "+44 20 7946 0958";
const AUTH_VALUE: &str = "Bearer authvalue-XYZ-424242";
/// An Anthropic key, planted glued to a name (`evt-…`, `key_…`).
const ANTHROPIC_KEY: &str = "sk-ant-api03-PLANTEDglued0123456789abcdefghij";

fn planted() -> Vec<&'static str> {
    vec![
        KNOWN_SECRET,
        TELEGRAM_TOKEN,
        "AAHsecretTelegramPath987",
        GITHUB_TOKEN,
        EMAIL,
        PHONE,
        "authvalue-XYZ-424242",
        ANTHROPIC_KEY,
    ]
}

fn assert_clean(what: &str, text: &str) {
    for secret in planted() {
        assert!(
            !text.contains(secret),
            "{secret:?} leaked into {what}: {text}"
        );
    }
}

/// The event flags, every value carrying a planted secret somewhere.
fn secret_event(f: &Fixture) -> Vec<String> {
    [
        "notify-event",
        "--dir",
        f.d(),
        "--event",
        "iteration_ok",
        "--event-id",
        &format!("evt-{ANTHROPIC_KEY}"),
        "--iteration",
        "1",
        "--iteration-status",
        "success",
        "--review-status",
        "passed",
        "--provider",
        "claude",
        "--completed",
        &format!("Verified lemma B; hook said {KNOWN_SECRET}; key_{ANTHROPIC_KEY}"),
        "--current",
        &format!("Ask {EMAIL} or call {PHONE}"),
        "--plan",
        &format!("Rotate {GITHUB_TOKEN} then test A3"),
        "--result",
        &format!("claim-1 via {TELEGRAM_TOKEN}"),
        "--compute-run",
        &format!(r#"{{"service":"hetzner","status":"succeeded","job_ref":"job-{KNOWN_SECRET}"}}"#),
        "--extensions",
        &format!(
            r#"{{"deep":{{"list":["x",{{"auth":"{AUTH_VALUE}","mail":"{EMAIL}"}}]}},"{KNOWN_SECRET}":{{"{GITHUB_TOKEN}":1}}}}"#
        ),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `config` as the loop's notify.json, the known secret always configured
/// and the Telegram token too when no webhook URL carries it.
fn write_config(f: &Fixture, mut config: serde_json::Value) {
    let mut secrets = vec![KNOWN_SECRET];
    if !config.to_string().contains(TELEGRAM_TOKEN) {
        secrets.push(TELEGRAM_TOKEN);
    }
    config["secrets"] = serde_json::json!(secrets);
    std::fs::write(f.dir.join("notify.json"), config.to_string()).unwrap();
}

/// A python3 HTTPS server with a certificate signed by a fresh test CA.
struct Receiver {
    child: Child,
    port: u16,
    log: PathBuf,
    ca: PathBuf,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const SERVER: &str = r#"
import http.server, json, os, ssl, sys
here, mode = sys.argv[1], sys.argv[2]
log = os.path.join(here, "received.jsonl")
first = os.path.join(here, "first-dropped")
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path, "key": self.headers.get("Idempotency-Key"),
                                "auth": self.headers.get("Authorization"), "body": body}) + "\n")
        if mode == "drop_first" and not os.path.exists(first):
            open(first, "w").close()
            self.close_connection = True
            self.connection.close()
            return
        if mode == "redirect":
            self.send_response(302)
            self.send_header("Location", "https://127.0.0.1:9/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(os.path.join(here, "leaf.pem"), os.path.join(here, "leaf.key"))
httpd = http.server.HTTPServer(("127.0.0.1", 0), H)
httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
with open(os.path.join(here, "port.tmp"), "w") as f:
    f.write(str(httpd.server_address[1]))
os.rename(os.path.join(here, "port.tmp"), os.path.join(here, "port"))
httpd.serve_forever()
"#;

fn have(program: &str) -> bool {
    Command::new(program)
        .arg(if program == "openssl" {
            "version"
        } else {
            "--version"
        })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn openssl(here: &Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(here)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "openssl {args:?}");
}

/// Start a receiver in `mode` (ok, drop_first, redirect); `None` (the test
/// says it skipped) when python3 or openssl is missing.
fn receiver(here: &Path, mode: &str) -> Option<Receiver> {
    if !have("python3") || !have("openssl") {
        common::skipped_without("python3 and openssl are needed for the HTTPS receiver");
        return None;
    }
    std::fs::create_dir_all(here).unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=loopx test CA",
    ]);
    openssl(here, &ca);
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "leaf.key",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=localhost",
    ]);
    openssl(here, &csr);
    std::fs::write(
        here.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        here,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ],
    );
    std::fs::write(here.join("server.py"), SERVER).unwrap();
    let child = Command::new("python3")
        .arg(here.join("server.py"))
        .arg(here)
        .arg(mode)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let port = loop {
        if let Ok(text) = std::fs::read_to_string(here.join("port")) {
            break text.trim().parse().unwrap();
        }
        assert!(Instant::now() < deadline, "the receiver did not start");
        std::thread::sleep(Duration::from_millis(50));
    };
    Some(Receiver {
        child,
        port,
        log: here.join("received.jsonl"),
        ca: here.join("ca.pem"),
    })
}

impl Receiver {
    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    fn received(&self) -> Vec<serde_json::Value> {
        match std::fs::File::open(&self.log) {
            Ok(file) => std::io::BufReader::new(file)
                .lines()
                .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

fn notify(f: &Fixture, receiver: &Receiver, args: &[String]) -> serde_json::Value {
    let output = f
        .loopx()
        .args(args)
        .arg("--json")
        .env("LOOPX_NOTIFY_TEST_CA_FILE", &receiver.ca)
        .env("NOTIFY_AUTH", AUTH_VALUE)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_clean("the notify-event output", &stdout);
    assert_clean("stderr", &String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap()
}

fn all_kinds_config(receiver: &Receiver, hook_stdin: &Path) -> serde_json::Value {
    serde_json::json!({
        "research_title": "Bridge lemma",
        "command": ["sh", "-c", format!("cat >> '{}'", hook_stdin.display())],
        "timeout_seconds": 5,
        "attempts": 3,
        "webhooks": [
            {"name": "slack", "kind": "slack", "url": receiver.url("/slack"), "authorization_env": "NOTIFY_AUTH"},
            {"name": "discord", "kind": "discord", "url": receiver.url("/discord")},
            {"name": "zulip", "kind": "zulip", "url": receiver.url("/zulip"), "stream": "research"},
            {"name": "telegram", "kind": "telegram", "url": receiver.url(&format!("/{TELEGRAM_TOKEN}/sendMessage")), "chat_id": "42"},
            {"name": "json", "kind": "json", "url": receiver.url("/json")},
        ],
    })
}

#[test]
fn planted_secrets_never_leave_in_any_output_body_log_or_hook_stdin() {
    let f = Fixture::new();
    f.init(5, &[]);
    let Some(receiver) = receiver(&f.temp.path().join("https"), "ok") else {
        return;
    };
    let hook_stdin = f.temp.path().join("hook-stdin.txt");
    write_config(&f, all_kinds_config(&receiver, &hook_stdin));

    let mut dry = secret_event(&f);
    dry.push("--dry-run".into());
    let before = f.fingerprint();
    let view = notify(&f, &receiver, &dry);
    assert_eq!(f.fingerprint(), before, "a dry run writes nothing");
    assert!(receiver.received().is_empty(), "a dry run sends nothing");
    let opaque = view["event"]["event_id"].as_str().unwrap().to_owned();
    assert!(
        opaque.starts_with("evt-"),
        "a secret-bearing id becomes opaque: {opaque}"
    );
    for rendering in ["markdown", "plain", "telegram_html", "compact"] {
        assert!(view["renderings"][rendering]
            .as_str()
            .is_some_and(|r| r.contains("REDACTED")));
    }

    let view = notify(&f, &receiver, &secret_event(&f));
    assert_eq!(
        view["event"]["event_id"],
        opaque.as_str(),
        "the opaque id is deterministic"
    );
    let outcomes: Vec<&str> = view["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["delivered"; 6], "{view}");
    let received = receiver.received();
    assert_eq!(received.len(), 5);
    for request in &received {
        assert_clean("a webhook body", request["body"].as_str().unwrap());
    }
    // The authorization header did reach its receiver, only as a header.
    assert_eq!(
        received.iter().filter(|r| r["auth"] == AUTH_VALUE).count(),
        1
    );
    let telegram = received
        .iter()
        .find(|r| r["path"].as_str().unwrap().ends_with("sendMessage"))
        .unwrap();
    let body: serde_json::Value = serde_json::from_str(telegram["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["parse_mode"], "HTML");
    assert!(body["text"].as_str().unwrap().contains("<b>Plan:</b>"));
    assert_clean(
        "the command hook's stdin",
        &std::fs::read_to_string(&hook_stdin).unwrap(),
    );
    assert_clean(
        "the audit log",
        &std::fs::read_to_string(f.dir.join("notify_audit.jsonl")).unwrap(),
    );
    let mode = std::os::unix::fs::MetadataExt::mode(
        &std::fs::metadata(f.dir.join("notify_audit.jsonl")).unwrap(),
    );
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn each_event_is_received_exactly_once_across_a_lost_acknowledgement_and_a_resend() {
    let f = Fixture::new();
    f.init(5, &[]);
    let Some(receiver) = receiver(&f.temp.path().join("https"), "drop_first") else {
        return;
    };
    write_config(
        &f,
        serde_json::json!({
            "webhooks": [{"kind": "json", "url": receiver.url("/json")}],
            "timeout_seconds": 5,
            "attempts": 3,
        }),
    );
    let event = secret_event(&f);
    let view = notify(&f, &receiver, &event);
    assert_eq!(view["deliveries"][0]["outcome"], "delivered", "{view}");
    assert_eq!(view["deliveries"][0]["attempts"], 2, "{view}");
    // The receiver read the first attempt and dropped the connection: the
    // retry carries the same idempotency key, so it is one event.
    let received = receiver.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0]["key"], received[1]["key"]);
    // Sent again (a re-run, a later wall clock): remembered, not re-sent.
    let again = notify(&f, &receiver, &event);
    assert_eq!(again["deliveries"][0]["outcome"], "duplicate", "{again}");
    assert_eq!(receiver.received().len(), 2);
    let keys: std::collections::BTreeSet<String> = receiver
        .received()
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(keys.len(), 1, "the receiver saw one event");
}

#[test]
fn redirects_are_not_followed_and_the_failure_is_not_remembered() {
    let f = Fixture::new();
    f.init(5, &[]);
    let Some(receiver) = receiver(&f.temp.path().join("https"), "redirect") else {
        return;
    };
    write_config(
        &f,
        serde_json::json!({"webhooks": [{"kind": "slack", "url": receiver.url("/slack")}]}),
    );
    let view = notify(&f, &receiver, &secret_event(&f));
    let delivery = &view["deliveries"][0];
    assert_eq!(delivery["outcome"], "failed", "{view}");
    assert_eq!(delivery["attempts"], 1, "a redirect is not retried: {view}");
    assert!(delivery["detail"]
        .as_str()
        .unwrap()
        .contains("redirects are not followed"));
    assert_eq!(receiver.received().len(), 1);
    assert!(!f.dir.join("notify_delivered.jsonl").exists());
}

fn refused_config(f: &Fixture, url: &str, env: &[(&str, &str)], expect: &str) {
    write_config(
        f,
        serde_json::json!({"webhooks": [{"kind": "slack", "url": url}]}),
    );
    let before = f.fingerprint();
    let mut command = f.loopx();
    command.args(["notify-event", "--dir", f.d(), "--event", "stop"]);
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{url} was accepted");
    assert!(stderr.contains(expect), "{stderr}");
    assert!(!stderr.contains("pw-secret"), "{stderr}");
    assert_eq!(f.fingerprint(), before, "a refusal writes nothing");
}

#[test]
fn plain_http_and_credentials_in_urls_are_refused() {
    let f = Fixture::new();
    f.init(5, &[]);
    refused_config(&f, "http://hooks.example.com/x", &[], "plain http");
    refused_config(
        &f,
        "http://127.0.0.1:9/x",
        &[],
        "LOOPX_NOTIFY_ALLOW_LOCAL_HTTP=1",
    );
    refused_config(
        &f,
        "http://hooks.example.com/x",
        &[("LOOPX_NOTIFY_ALLOW_LOCAL_HTTP", "1")],
        "use https",
    );
    refused_config(
        &f,
        "https://user:pw-secret@hooks.example.com/x",
        &[],
        "credentials",
    );
}

#[test]
fn enforce_mode_keeps_events_local_without_the_egress_consent() {
    let f = Fixture::new();
    f.init(5, &["--goal-focus-mode", "enforce"]);
    let Some(receiver) = receiver(&f.temp.path().join("https"), "ok") else {
        return;
    };
    write_config(
        &f,
        serde_json::json!({"webhooks": [{"kind": "json", "url": receiver.url("/json")}]}),
    );
    let view = notify(&f, &receiver, &secret_event(&f));
    assert_eq!(view["external"], false);
    assert!(view["local_only_reason"]
        .as_str()
        .unwrap()
        .contains("AAS_AUTOLOOP_EXTERNAL_NOTIFY_EGRESS"));
    assert_eq!(view["deliveries"][0]["outcome"], "withheld");
    assert!(receiver.received().is_empty());
    assert!(
        f.dir.join("notify_audit.jsonl").exists(),
        "the local audit log is always written"
    );

    let output = f
        .loopx()
        .args(secret_event(&f))
        .arg("--json")
        .env("LOOPX_NOTIFY_TEST_CA_FILE", &receiver.ca)
        .env("AAS_AUTOLOOP_EXTERNAL_NOTIFY_EGRESS", "allow")
        .output()
        .unwrap();
    let view: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(view["deliveries"][0]["outcome"], "delivered", "{view}");
    assert_eq!(receiver.received().len(), 1);
}

#[test]
fn the_profile_comes_from_notify_json_then_the_environment() {
    let f = Fixture::new();
    f.init(5, &[]);
    let profile = |env: Option<&str>| {
        let mut command = f.loopx();
        command.args([
            "notify-event",
            "--dir",
            f.d(),
            "--event",
            "stop",
            "--dry-run",
            "--json",
        ]);
        if let Some(v) = env {
            command.env("AAS_AUTOLOOP_NOTIFY_BODY_PROFILE", v);
        }
        let out: serde_json::Value =
            serde_json::from_slice(&command.output().unwrap().stdout).unwrap();
        out["event"]["presentation"]["body_profile"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(profile(None), "operator_full");
    assert_eq!(profile(Some("legacy")), "legacy");
    write_config(&f, serde_json::json!({"body_profile": "operator_compact"}));
    assert_eq!(profile(Some("legacy")), "operator_compact");
}

#[test]
fn bad_event_flags_and_a_bad_configuration_are_refused_and_change_nothing() {
    let f = Fixture::new();
    f.init(5, &[]);
    let before = f.fingerprint();
    for (args, expect) in [
        (
            vec!["--event", "Iteration OK"],
            "event kind \"Iteration OK\"",
        ),
        (
            vec!["--event", "stop", "--iteration-status", "done"],
            "running, success",
        ),
        (
            vec![
                "--event",
                "stop",
                "--compute-run",
                r#"{"service":"aws","status":"succeeded"}"#,
            ],
            "github-actions",
        ),
        (
            vec!["--event", "stop", "--extensions", "[1]"],
            "JSON object",
        ),
    ] {
        f.loopx()
            .args(["notify-event", "--dir", f.d()])
            .args(&args)
            .assert()
            .failure()
            .stderr(predicates::str::contains(expect));
        assert_eq!(f.fingerprint(), before, "{args:?} wrote something");
    }
    std::fs::write(f.dir.join("notify.json"), r#"{"body_profile": "loud"}"#).unwrap();
    let before = f.fingerprint();
    f.loopx()
        .args(["notify-event", "--dir", f.d(), "--event", "stop"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("body_profile \"loud\""));
    assert_eq!(f.fingerprint(), before);
}
