//! The turn prompt's policy sections through the real binary: the panel
//! section when a panel runs (by `AAS_AUTOLOOP_PANEL`, or the driver's own
//! `--panel on`), after the contract, and the sentence that keeps the
//! primary from starting panel CLIs itself, panel or not.

mod common;

use common::Fixture;

const NO_NESTED: &str = "Do not start reviewer or panel agent CLIs yourself";

fn task_body(f: &Fixture, panel: Option<&str>) -> String {
    let mut command = f.loopx();
    command.args(["task-body", "--dir", f.d()]);
    if let Some(value) = panel {
        command.env("AAS_AUTOLOOP_PANEL", value);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_panel_section_follows_the_contract_only_when_a_panel_runs() {
    let f = Fixture::new();
    f.init(5, &[]);
    let off = task_body(&f, None);
    assert!(off.contains(NO_NESTED), "{off}");
    assert!(!off.contains("## Review panel"), "{off}");
    let on = task_body(&f, Some("on"));
    let contract = on.find("## The one-iteration contract").unwrap();
    let panel = on.find("## Review panel").unwrap_or_else(|| panic!("{on}"));
    assert!(contract < panel, "{on}");
    assert!(on[panel..].contains(NO_NESTED), "{on}");
    assert!(on[panel..].contains(&format!("{}/panel/", f.d())), "{on}");
    assert_eq!(task_body(&f, Some("off")), off);
}

#[test]
fn a_driven_turn_with_the_panel_on_gets_the_panel_section() {
    let f = Fixture::new();
    f.init(5, &[]);
    let seen = f.temp.path().join("prompt");
    let (root, path) = f.fake_provider(
        "claude",
        &format!(
            "printf '%s' \"$2\" > {}\nloopx append-iteration --mode bounded-research --objective turn --decision continue >/dev/null",
            seen.display()
        ),
    );
    let output = f
        .loopx()
        .args(["drive", "--dir", f.d(), "--root"])
        .arg(&root)
        .args([
            "--provider",
            "claude",
            "--max-iterations",
            "1",
            "--panel",
            "on",
        ])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let prompt = std::fs::read_to_string(&seen).unwrap();
    let contract = prompt.find("## The one-iteration contract").unwrap();
    let panel = prompt
        .find("## Review panel")
        .unwrap_or_else(|| panic!("{prompt}"));
    assert!(contract < panel, "{prompt}");
    assert!(prompt.contains(NO_NESTED), "{prompt}");
}
