//! The store locator (`--store`, `LOOPX_STORE`), the write-ahead log that
//! now holds recent commits, and `backup`, on the real binary.

mod common;

use common::Fixture;

#[test]
fn after_an_append_the_log_holds_the_commit_and_backup_makes_a_complete_copy() {
    let f = Fixture::new();
    f.init(10, &[]);
    f.append("continue", &[]).success();
    let wal = f.dir.join("loopx.sqlite-wal");
    assert!(
        std::fs::metadata(&wal).unwrap().len() > 0,
        "a writer no longer checkpoints on exit: the commit is in the -wal"
    );

    let copy = f.temp.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    let target = copy.join("loopx.sqlite");
    let out = f.json(&["backup", "--dir", f.d(), "--to", target.to_str().unwrap()]);
    assert_eq!(out["status"], "ok", "{out}");
    // The copy is standalone: no log beside it, and it validates alone.
    assert!(!copy.join("loopx.sqlite-wal").exists());
    let names: Vec<_> = std::fs::read_dir(&copy)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["loopx.sqlite"], "the copy is one file");
    let copied = f.json(&["validate", "--dir", copy.to_str().unwrap()]);
    let original = f.json(&["validate", "--dir", f.d()]);
    assert_eq!(copied["status"], "ok", "{copied}");
    assert_eq!(copied["checked"]["iterations"], 1, "{copied}");
    assert_eq!(
        copied["checked"]["iterations"],
        original["checked"]["iterations"]
    );
    // Backup checkpoints the loop: its main file now holds everything too.
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
}

#[test]
fn the_log_stays_short_over_many_commands_and_every_commit_survives() {
    // Every command is its own process: SQLite's auto-checkpoint never
    // started such a log over, so it grew by every append (about 16 KB
    // each) and every later command read all of it.
    let f = Fixture::new();
    f.init(100, &[]);
    let wal = f.dir.join("loopx.sqlite-wal");
    let mut longest = 0;
    for _ in 0..48 {
        f.append("continue", &[]).success();
        longest = longest.max(std::fs::metadata(&wal).unwrap().len());
    }
    let limit = loopx_store::sqlite::WAL_FOLD_BYTES + 64 * 1024;
    assert!(longest <= limit, "the -wal reached {longest} bytes");
    let out = f.json(&["validate", "--dir", f.d()]);
    assert_eq!(out["status"], "ok", "{out}");
    assert_eq!(out["checked"]["iterations"], 48, "{out}");
}

#[test]
fn backup_never_overwrites_a_file() {
    let f = Fixture::new();
    f.init(10, &[]);
    let target = f.temp.path().join("taken.sqlite");
    std::fs::write(&target, b"precious").unwrap();
    let before = f.fingerprint();
    let out = f
        .loopx()
        .args(["backup", "--dir", f.d(), "--to", target.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("taken.sqlite") && stderr.contains("already exists"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    assert_eq!(f.fingerprint(), before);
}

#[test]
fn a_sqlite_locator_keeps_the_state_in_that_file_and_none_in_the_loop_directory() {
    let f = Fixture::new();
    let db = f.temp.path().join("elsewhere.db");
    let locator = format!("sqlite:{}", db.display());
    f.loopx()
        .args([
            "--store",
            &locator,
            "init",
            "--dir",
            f.d(),
            "--goal",
            "g",
            "--success-criteria",
            "s",
        ])
        .assert()
        .success();
    f.loopx()
        .env("LOOPX_STORE", &locator)
        .args(f.append_words("continue"))
        .assert()
        .success();
    assert!(db.is_file());
    assert!(
        !f.dir.join("loopx.sqlite").exists(),
        "no database in the loop directory"
    );
    f.loopx()
        .args(["--store", &locator, "status", "--dir", f.d()])
        .assert()
        .success();
    let validated = f.json(&["--store", &locator, "validate", "--dir", f.d()]);
    assert_eq!(validated["checked"]["iterations"], 1, "{validated}");
    // Without the locator, the loop directory holds no loop.
    f.loopx()
        .args(["status", "--dir", f.d()])
        .assert()
        .failure();
    assert!(!f.dir.join("loopx.sqlite").exists());
}

#[test]
fn unknown_and_unavailable_stores_are_refused_naming_the_locator_but_no_password() {
    let f = Fixture::new();
    for (locator, names) in [
        ("mysql://root:secret@db/loops", "\"mysql\""),
        (
            // Port 1 on loopback: refused at once, no DNS, no wait.
            "postgres://user:secret@127.0.0.1:1/loops",
            "postgres://user@127.0.0.1:1/loops",
        ),
    ] {
        for args in [
            vec![
                "init",
                "--dir",
                f.d(),
                "--goal",
                "g",
                "--success-criteria",
                "s",
            ],
            vec!["status", "--dir", f.d()],
        ] {
            let out = f
                .loopx()
                .arg("--store")
                .arg(locator)
                .args(&args)
                .output()
                .unwrap();
            assert!(!out.status.success(), "{args:?} with {locator}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains(names), "{stderr}");
            assert!(!stderr.contains("secret"), "{stderr}");
            assert!(
                !f.dir.exists(),
                "a refused store created {}",
                f.dir.display()
            );
        }
    }
    let out = f
        .loopx()
        .env("LOOPX_STORE", "postgres://user:secret@127.0.0.1:1/loops")
        .args(f.init_words())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is unavailable"), "{stderr}");
    assert!(!stderr.contains("secret"), "{stderr}");
    assert!(!f.dir.exists());
}
