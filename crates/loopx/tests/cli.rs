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
