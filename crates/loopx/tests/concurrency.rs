//! Several real processes appending to one loop at once.

mod common;

use common::{iteration_numbers, Fixture};
use std::process::Stdio;

#[test]
fn racing_processes_never_share_an_iteration_number_or_lose_a_record() {
    let f = Fixture::new();
    f.init(1000, &[]);
    let (writers, each) = (4, 12);
    let children: Vec<_> = (0..writers)
        .map(|w| {
            let script = (0..each)
                .map(|i| {
                    format!(
                        "{} append-iteration --dir {} --mode monitor --objective w{w}-{i} --decision continue --operation-id w{w}-{i} || exit 1",
                        common::loopx_path().display(),
                        f.d()
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            std::process::Command::new("sh")
                .arg("-c")
                .arg(script)
                .env("LOOPX_REGISTRY_DIR", &f.registry)
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a writer failed");
    }
    let numbers = iteration_numbers(&f.dir);
    assert_eq!(numbers, (1..=(writers * each) as u64).collect::<Vec<_>>());
    f.assert_valid();
}
