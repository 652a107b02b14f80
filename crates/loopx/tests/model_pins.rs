//! Model and thinking pins (`AAS_<PROVIDER>_LATEST_MODEL`,
//! `AAS_CLAUDE_HIGHEST_THINKING`, `AAS_CODEX_HIGHEST_THINKING`) through the
//! real binary: the exact argv `agent-cmd` prints, what a driven turn's
//! process receives, and a bad value refused before anything is written.

mod common;

use common::Fixture;

/// Every pin variable loopx reads; each test clears the ones it does not set.
const PINS: &[&str] = &[
    "AAS_CLAUDE_LATEST_MODEL",
    "AAS_CODEX_LATEST_MODEL",
    "AAS_OPENCODE_LATEST_MODEL",
    "AAS_COPILOT_LATEST_MODEL",
    "AAS_DEEPSEEK_LATEST_MODEL",
    "AAS_GROK_LATEST_MODEL",
    "AAS_KIMI_LATEST_MODEL",
    "AAS_ANTIGRAVITY_LATEST_MODEL",
    "AAS_CLAUDE_HIGHEST_THINKING",
    "AAS_CODEX_HIGHEST_THINKING",
];

fn clean(command: &mut assert_cmd::Command, set: &[(&str, &str)]) {
    for name in PINS {
        command.env_remove(name);
    }
    for (name, value) in set {
        command.env(name, value);
    }
}

/// The argv `agent-cmd --json` prints for `provider` with `set` pins.
fn argv(f: &Fixture, provider: &str, set: &[(&str, &str)]) -> Vec<String> {
    let mut command = f.loopx();
    command.args([
        "agent-cmd",
        "--provider",
        provider,
        "--dir",
        f.d(),
        "--print-prompt",
        "--json",
    ]);
    clean(&mut command, set);
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    serde_json::from_value(json["argv"].clone()).unwrap()
}

/// A provider, the pins set, and what they add to the end of its argv.
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);

#[test]
fn each_pin_is_in_the_exact_argv_agent_cmd_prints() {
    let f = Fixture::new();
    f.init(5, &[]);
    let cases: &[Case] = &[
        (
            "claude",
            &[
                ("AAS_CLAUDE_LATEST_MODEL", "claude-pin-1"),
                ("AAS_CLAUDE_HIGHEST_THINKING", "max"),
            ],
            &["--model", "claude-pin-1", "--effort", "max"],
        ),
        (
            "codex",
            &[
                ("AAS_CODEX_LATEST_MODEL", "gpt-pin-2"),
                ("AAS_CODEX_HIGHEST_THINKING", "xhigh"),
            ],
            &[
                "--model",
                "gpt-pin-2",
                "-c",
                "model_reasoning_effort=\"xhigh\"",
            ],
        ),
        (
            "opencode",
            &[("AAS_OPENCODE_LATEST_MODEL", "anthropic/pin-3")],
            &["--model", "anthropic/pin-3"],
        ),
        (
            "copilot",
            &[("AAS_COPILOT_LATEST_MODEL", "pin-4")],
            &["--model", "pin-4"],
        ),
        (
            "deepseek",
            &[("AAS_DEEPSEEK_LATEST_MODEL", "deepseek-pin-5")],
            &["--model", "deepseek-pin-5"],
        ),
        (
            "codewhale",
            &[("AAS_DEEPSEEK_LATEST_MODEL", "deepseek-pin-5")],
            &["--model", "deepseek-pin-5"],
        ),
        (
            "grok",
            &[("AAS_GROK_LATEST_MODEL", "grok-pin-6")],
            &["-m", "grok-pin-6"],
        ),
        (
            "kimi",
            &[("AAS_KIMI_LATEST_MODEL", "kimi-pin-7")],
            &["-m", "kimi-pin-7"],
        ),
        (
            "antigravity",
            &[("AAS_ANTIGRAVITY_LATEST_MODEL", "gemini-pin-8")],
            &["--model", "gemini-pin-8"],
        ),
    ];
    for (provider, set, tail) in cases {
        let plain = argv(&f, provider, &[]);
        let pinned = argv(&f, provider, set);
        let mut expected = plain.clone();
        expected.extend(tail.iter().map(|s| (*s).to_owned()));
        assert_eq!(pinned, expected, "{provider}");
        // Another provider's pin is not this one's.
        let other = if *provider == "claude" {
            ("AAS_CODEX_LATEST_MODEL", "x")
        } else {
            ("AAS_CLAUDE_LATEST_MODEL", "x")
        };
        assert_eq!(argv(&f, provider, &[other]), plain, "{provider}");
    }
    // The family is the provider's whatever the pin.
    let mut command = f.loopx();
    command.args([
        "agent-cmd",
        "--provider",
        "claude",
        "--dir",
        f.d(),
        "--print-prompt",
        "--json",
    ]);
    clean(&mut command, &[("AAS_CLAUDE_LATEST_MODEL", "gpt-5")]);
    let json: serde_json::Value =
        serde_json::from_slice(&command.output().unwrap().stdout).unwrap();
    assert_eq!(json["family"], "anthropic");
}

#[test]
fn a_driven_turn_starts_the_provider_with_its_pins() {
    let f = Fixture::new();
    f.init(5, &[]);
    let seen = f.temp.path().join("argv");
    let (root, path) = f.fake_provider(
        "claude",
        &format!(
            r#"for a in "$@"; do printf '%s\n' "$a"; done > {seen}
loopx status --json > {seen}.status.json
loopx status > {seen}.status.txt
loopx append-iteration --mode bounded-research --objective "pinned turn" --decision continue >/dev/null"#,
            seen = seen.display()
        ),
    );
    let mut command = f.loopx();
    command
        .args(["drive", "--dir", f.d(), "--root"])
        .arg(&root)
        .args(["--provider", "claude", "--max-iterations", "1"])
        .env("PATH", path);
    clean(
        &mut command,
        &[
            ("AAS_CLAUDE_LATEST_MODEL", "claude-pin-1"),
            ("AAS_CLAUDE_HIGHEST_THINKING", "max"),
        ],
    );
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let argv = std::fs::read_to_string(&seen).unwrap();
    let argv: Vec<&str> = argv.lines().collect();
    assert_eq!(argv[0], "-p", "the prompt still follows -p: {argv:?}");
    assert_eq!(
        argv[argv.len() - 4..],
        ["--model", "claude-pin-1", "--effort", "max"],
        "{argv:?}"
    );
    // While it runs, status says which pins the driver started it with.
    let status = std::fs::read_to_string(seen.with_extension("status.json")).unwrap();
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(
        status["driver"]["pins"],
        serde_json::json!({
            "AAS_CLAUDE_HIGHEST_THINKING": "max",
            "AAS_CLAUDE_LATEST_MODEL": "claude-pin-1"
        }),
        "{status}"
    );
    let text = std::fs::read_to_string(seen.with_extension("status.txt")).unwrap();
    assert!(
        text.contains("pins AAS_CLAUDE_HIGHEST_THINKING=max, AAS_CLAUDE_LATEST_MODEL=claude-pin-1"),
        "{text}"
    );
}

#[test]
fn a_bad_pin_is_refused_naming_its_variable_and_nothing_is_written() {
    let f = Fixture::new();
    f.init(5, &[]);
    let root = f.temp.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    let before = f.fingerprint();
    for (variable, bad) in [
        ("AAS_CLAUDE_LATEST_MODEL", "--dangerously-skip-permissions"),
        ("AAS_CLAUDE_HIGHEST_THINKING", "max effort"),
        ("AAS_CLAUDE_LATEST_MODEL", "a\"b"),
    ] {
        let mut command = f.loopx();
        command
            .args(["drive", "--dir", f.d(), "--root"])
            .arg(&root)
            .args(["--provider", "claude", "--max-iterations", "1"]);
        clean(&mut command, &[(variable, bad)]);
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{variable}={bad}: {stderr}");
        assert!(stderr.contains(variable), "{stderr}");
        assert_eq!(f.fingerprint(), before, "{variable}={bad} changed the loop");

        let mut command = f.loopx();
        command.args([
            "agent-cmd",
            "--provider",
            "claude",
            "--dir",
            f.d(),
            "--print-prompt",
        ]);
        clean(&mut command, &[(variable, bad)]);
        let output = command.output().unwrap();
        assert!(!output.status.success());
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(variable),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn doctor_says_each_pin_in_force_and_fails_an_unusable_one() {
    let f = Fixture::new();
    f.init(5, &[]);
    let pins = |set: &[(&str, &str)]| {
        let mut command = f.loopx();
        command.args(["doctor", "--json", "--dir", f.d()]);
        clean(&mut command, set);
        let view: serde_json::Value =
            serde_json::from_slice(&command.output().unwrap().stdout).unwrap();
        let checks: Vec<serde_json::Value> = view["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["name"].as_str().unwrap().starts_with("pin."))
            .cloned()
            .collect();
        checks
    };
    assert!(pins(&[]).is_empty());
    let set = pins(&[
        ("AAS_CODEX_LATEST_MODEL", "gpt-pin-2"),
        ("AAS_CODEX_HIGHEST_THINKING", "xhigh"),
        ("AAS_KIMI_LATEST_MODEL", "-x"),
    ]);
    let names: Vec<&str> = set.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "pin.AAS_CODEX_LATEST_MODEL",
            "pin.AAS_CODEX_HIGHEST_THINKING",
            "pin.AAS_KIMI_LATEST_MODEL"
        ]
    );
    assert_eq!(set[0]["ok"], true);
    assert!(set[0]["detail"]
        .as_str()
        .unwrap()
        .contains("codex starts with AAS_CODEX_LATEST_MODEL=gpt-pin-2"));
    assert_eq!(set[2]["ok"], false, "{}", set[2]);
    assert!(set[2]["fix"]
        .as_str()
        .unwrap()
        .contains("AAS_KIMI_LATEST_MODEL"));
}
