//! Named pause points for crash tests.
//!
//! `LOOPX_FAILPOINTS=sqlite.commit.before_snapshot` makes a process that
//! reaches that point inside a commit transaction print `failpoint: <name>`
//! on stderr and sleep, so a test can SIGKILL it at exactly that boundary;
//! `<name>#N` waits for the N-th time the process reaches it.
//!
//! These pause points exist only in a build with the `failpoints`
//! feature (the test suite's: `cargo test --workspace --features
//! loopx/failpoints`) and in this crate's own unit tests. Anywhere else
//! [`reached`] and [`hold`] are empty functions the compiler removes: a
//! released binary has no variable that can freeze it mid-commit. The
//! injected errors ([`arm_error`]) stay: only code in the same process can
//! arm them, never the environment.

#[cfg(any(test, feature = "failpoints"))]
pub use armed::{hold, injected_providers, reached};
#[cfg(not(any(test, feature = "failpoints")))]
pub use inert::{hold, injected_providers, reached};

#[cfg(not(any(test, feature = "failpoints")))]
mod inert {
    #[inline(always)]
    pub fn reached(_name: &str) {}

    #[inline(always)]
    pub fn hold(_name: &str) {}

    #[inline(always)]
    pub fn injected_providers() -> bool {
        false
    }
}

#[cfg(any(test, feature = "failpoints"))]
mod armed {
    use std::sync::OnceLock;

    /// Whether the provider processes of this test run are injected
    /// stand-ins (`LOOPX_INJECTED_PROVIDERS=1`): offline contract tests of
    /// enforce mode drive fake provider scripts, which the provider
    /// transport would otherwise refuse as real primaries. A released
    /// binary has no such switch.
    pub fn injected_providers() -> bool {
        std::env::var("LOOPX_INJECTED_PROVIDERS").as_deref() == Ok("1")
    }

    /// Pause here for good when `LOOPX_FAILPOINTS` names `name`.
    pub fn reached(name: &str) {
        static ARMED: OnceLock<Option<String>> = OnceLock::new();
        let armed = ARMED.get_or_init(|| std::env::var("LOOPX_FAILPOINTS").ok());
        if let Some(list) = armed {
            // `name#N` pauses at the N-th time this process reaches `name`:
            // for a point a use case passes more than once (the second
            // grouped commit of a drive).
            static HITS: std::sync::Mutex<Vec<(String, u32)>> = std::sync::Mutex::new(Vec::new());
            let hit = {
                let mut hits = HITS.lock().unwrap_or_else(|e| e.into_inner());
                match hits.iter_mut().find(|(n, _)| n == name) {
                    Some((_, count)) => {
                        *count += 1;
                        *count
                    }
                    None => {
                        hits.push((name.to_owned(), 1));
                        1
                    }
                }
            };
            let nth = format!("{name}#{hit}");
            if let Some(armed) = list
                .split(',')
                .find(|armed| *armed == name || *armed == nth)
            {
                eprintln!("failpoint: {armed}");
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(3600));
                }
            }
        }
    }

    /// Like [`reached`], but the process continues once a line arrives on its
    /// stdin: a test holds it at `name`, acts (another writer commits), then
    /// lets it go on, to prove what happens to a commit prepared before that.
    pub fn hold(name: &str) {
        static ARMED: OnceLock<Option<String>> = OnceLock::new();
        let armed = ARMED.get_or_init(|| std::env::var("LOOPX_HOLD").ok());
        if let Some(list) = armed {
            if list.split(',').any(|armed| armed == name) {
                eprintln!("held: {name}");
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
            }
        }
        reached(name);
    }
}

thread_local! {
    static FAILING: std::cell::RefCell<Vec<&'static str>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Make [`fail_here`] at `name` return an error on this thread until
/// [`disarm`]: an in-process failpoint for tests that prove a transaction is
/// all-or-nothing without killing a process. Thread-local, so tests running
/// side by side never trip each other's.
pub fn arm_error(name: &'static str) {
    FAILING.with(|failing| failing.borrow_mut().push(name));
}

/// Undo every [`arm_error`] on this thread.
pub fn disarm() {
    FAILING.with(|failing| failing.borrow_mut().clear());
}

/// A point where a test may inject a storage error (see [`arm_error`]);
/// also a [`reached`] pause point of the same name.
pub fn fail_here(name: &str) -> Result<(), crate::StoreError> {
    reached(name);
    if FAILING.with(|failing| failing.borrow().contains(&name)) {
        return Err(crate::StoreError::Backend(format!("failpoint {name}")));
    }
    Ok(())
}
