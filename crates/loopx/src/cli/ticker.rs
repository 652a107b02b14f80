//! The one-line spinner `drive` shows on a terminal while a turn runs.
//! Presentation only: it reads and writes no state.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A one-line spinner with the turn's elapsed time, on a terminal only;
/// it clears itself when dropped.
pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    pub fn start(label: String) -> Self {
        use std::io::IsTerminal;
        let stop = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return Ticker { stop, thread: None };
        }
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            let mut n = 0;
            while !flag.load(Ordering::Relaxed) {
                eprint!(
                    "\r{} {label} {:.0}s ",
                    frames[n % frames.len()],
                    started.elapsed().as_secs_f64()
                );
                n += 1;
                std::thread::sleep(Duration::from_millis(120));
            }
            eprint!("\r\x1b[2K");
        });
        Ticker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
