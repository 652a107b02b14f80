//! Named pause points for crash tests.
//!
//! `LOOPX_FAILPOINTS=sqlite.commit.before_snapshot` makes a process that
//! reaches that point inside a commit transaction print `failpoint: <name>`
//! on stderr and sleep, so a test can SIGKILL it at exactly that boundary.
//! Unset (always, outside tests) it costs one cached environment lookup.

use std::sync::OnceLock;

pub fn reached(name: &str) {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| std::env::var("LOOPX_FAILPOINTS").ok());
    if let Some(list) = armed {
        if list.split(',').any(|armed| armed == name) {
            eprintln!("failpoint: {name}");
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
    }
}
