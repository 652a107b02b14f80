//! The command surface: every command and subcommand explains itself.

mod common;

fn help(args: &[&str]) -> String {
    let output = std::process::Command::new(common::loopx_path())
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(output.status.success(), "{args:?} --help failed");
    String::from_utf8(output.stdout).unwrap()
}

/// (name, description) of each entry in a help page's command list.
fn commands(page: &str) -> Vec<(String, String)> {
    page.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let l = l.trim_start();
            let (name, rest) = l.split_once(' ').unwrap_or((l, ""));
            (name.to_owned(), rest.trim().to_owned())
        })
        .filter(|(name, _)| name != "help")
        .collect()
}

#[test]
fn every_command_and_subcommand_has_help_text() {
    let top = commands(&help(&[]));
    assert!(top.len() >= 20, "{top:?}");
    for (name, description) in top {
        assert!(!description.is_empty(), "`loopx {name}` has no description");
        let page = help(&[&name]);
        for (sub, description) in commands(&page) {
            assert!(
                !description.is_empty(),
                "`loopx {name} {sub}` has no description"
            );
            help(&[&name, &sub]);
        }
    }
}

/// Each option and argument of a help page (clap's long format), with
/// whether it has a description: a line below it that is not a bracketed
/// note such as `[default: ...]` or `[possible values: ...]`.
fn options(page: &str) -> Vec<(String, bool)> {
    let lines: Vec<&str> = page
        .lines()
        .skip_while(|l| !l.starts_with("Arguments:") && !l.starts_with("Options:"))
        .collect();
    let is_entry = |line: &str| {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        (2..=6).contains(&indent)
            && (trimmed.starts_with('-') || trimmed.starts_with('<') || trimmed.starts_with('['))
    };
    let mut found = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if !is_entry(line) {
            continue;
        }
        let name = line.split_whitespace().next().unwrap_or("").to_owned();
        // Compact format: the description follows the flag after a gap.
        let inline = line
            .trim_start()
            .split_once("  ")
            .map(|(_, rest)| rest.trim())
            .is_some_and(|text| !text.is_empty() && !text.starts_with('['));
        let described = inline
            || lines[index + 1..]
                .iter()
                .take_while(|next| !is_entry(next) && !next.ends_with(':'))
                .map(|next| next.trim())
                .any(|text| !text.is_empty() && !text.starts_with('['));
        found.push((name, described));
    }
    found
}

#[test]
fn every_flag_of_every_command_has_help_text() {
    let mut missing = Vec::new();
    let top = commands(&help(&[]));
    for (name, _) in top {
        let page = help(&[&name]);
        let subs = commands(&page);
        let mut pages = vec![(name.clone(), page)];
        for (sub, _) in subs {
            pages.push((format!("{name} {sub}"), help(&[&name, &sub])));
        }
        for (command, page) in pages {
            for (flag, described) in options(&page) {
                if !described {
                    missing.push(format!("loopx {command} {flag}"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "flags without help:\n{}",
        missing.join("\n")
    );
}

#[test]
fn todo_add_takes_the_title_positionally_or_as_a_flag_but_not_both() {
    let fixture = common::Fixture::new();
    fixture.init(5, &[]);
    let d = fixture.d();
    fixture
        .loopx()
        .args(["todo", "add", "--dir", d, "Read the paper"])
        .assert()
        .success();
    fixture
        .loopx()
        .args(["todo", "add", "--dir", d, "--title", "Check lemma 2"])
        .assert()
        .success();
    let before = fixture.fingerprint();
    fixture
        .loopx()
        .args(["todo", "add", "--dir", d, "One", "--title", "Two"])
        .assert()
        .code(2);
    fixture
        .loopx()
        .args(["todo", "add", "--dir", d])
        .assert()
        .code(2);
    assert_eq!(
        fixture.fingerprint(),
        before,
        "a refused add changed the loop"
    );
    let list = fixture.json(&["todo", "list", "--dir", d]);
    let titles: Vec<&str> = list["todos"]
        .as_array()
        .unwrap_or_else(|| panic!("no todos in {list}"))
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Read the paper", "Check lemma 2"]);
}

#[test]
fn text_says_counts_in_good_grammar_and_times_as_people_read_them() {
    let fixture = common::Fixture::new();
    let d = fixture.d();
    let init = fixture
        .loopx()
        .args(["init", "--dir", d, "--goal", "g", "--success-criteria", "c"])
        .args(["--max-iterations", "1", "--max-wall", "2h"])
        .output()
        .unwrap();
    let init = String::from_utf8_lossy(&init.stdout);
    assert!(init.contains("(1 iteration at most)"), "{init}");
    let status = fixture
        .loopx()
        .args(["status", "--dir", d])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("0s elapsed of 2h (2h left)")
            || status.contains("1s elapsed of 2h (1h 59m left)"),
        "{status}"
    );
    fixture
        .loopx()
        .args(["todo", "add", "--dir", d, "Read"])
        .assert()
        .success();
    fixture
        .loopx()
        .args([
            "todo",
            "claim",
            "--dir",
            d,
            "t1",
            "--agent-id",
            "ann",
            "--ttl",
            "600",
        ])
        .assert()
        .success();
    let list = fixture
        .loopx()
        .args(["todo", "list", "--dir", d])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.contains("leased to ann until "), "{list}");
    assert!(
        list.contains("(in 9m)") || list.contains("(in 10m)"),
        "{list}"
    );
}

/// The README's words about the command surface, read from the file.
fn readme() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn what_the_readme_calls_not_implemented_is_not_and_what_it_says_is_implemented_is() {
    let readme = readme();
    let missing = readme
        .split("- not yet implemented: ")
        .nth(1)
        .and_then(|rest| rest.split(".\n").next())
        .expect("the README lists what is not implemented");
    let (commands, flags) = missing
        .split_once("commands, and `drive`'s")
        .expect("commands, then drive's flags");
    let names = |text: &str| -> Vec<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    };
    let top = help(&[]);
    for command in names(commands) {
        assert!(
            !top.contains(&format!("\n  {command} ")),
            "the README says `{command}` is not implemented, but it is"
        );
    }
    let drive = help(&["drive"]);
    for flag in names(flags) {
        assert!(
            !drive.contains(&format!("{flag} ")),
            "the README says drive's {flag} is not implemented, but it is"
        );
    }
    // What it does say is there, is.
    assert!(help(&["panel"]).contains("--smoke"));
    assert!(help(&["notify-event"]).contains("--event"));
    assert!(
        readme.contains("panel") && !readme.contains("nor `--smoke`"),
        "the README still says panel --smoke is missing"
    );
}

#[test]
fn the_readme_installs_with_the_locked_dependency_versions() {
    for line in readme().lines().filter(|l| l.contains("cargo install")) {
        assert!(line.contains("--locked"), "{line}");
    }
}
