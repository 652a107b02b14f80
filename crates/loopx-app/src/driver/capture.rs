//! A turn's log on disk: [`BoundedLog`] writes what a process prints
//! within its cap (the head as it comes, the tail held and written at the
//! end, the line saying what was dropped between), and [`sweep_logs`]
//! applies the retention to `driver_logs/` after a settled turn.
//! [`Lines`] cuts the same output into whole lines for a watch
//! (`super::runner::Watch`) while the process runs.
//!
//! Not here: the policy, the words and the numbers
//! (`loopx_core::driver::capture`), reading the process's pipe (the
//! runner).

use loopx_core::driver::capture::{self, LogEntry, OutputCap, Retention};
use loopx_core::driver::stream;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write as _};
use std::path::Path;

/// A log file that keeps at most `cap` bytes of what is written to it.
pub struct BoundedLog {
    file: File,
    cap: OutputCap,
    /// Bytes of the head still to write.
    head_left: u64,
    /// The last bytes past the head, at most `cap.tail()` of them.
    tail: VecDeque<u8>,
    dropped: u64,
}

impl BoundedLog {
    pub fn new(file: File, cap: OutputCap) -> BoundedLog {
        BoundedLog {
            file,
            cap,
            head_left: cap.head(),
            tail: VecDeque::new(),
            dropped: 0,
        }
    }

    /// Take `bytes`: the head is written at once, what follows it is held
    /// and only its last `cap.tail()` bytes are kept.
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        let head = bytes
            .len()
            .min(usize::try_from(self.head_left).unwrap_or(usize::MAX));
        if head > 0 {
            self.head_left -= head as u64;
            self.file.write_all(&bytes[..head])?;
        }
        self.tail.extend(&bytes[head..]);
        let keep = usize::try_from(self.cap.tail()).unwrap_or(usize::MAX);
        if self.tail.len() > keep {
            let excess = self.tail.len() - keep;
            self.tail.drain(..excess);
            self.dropped += excess as u64;
        }
        Ok(())
    }

    /// Write what is held (after the line saying how much was dropped, if
    /// anything was) and close the log: the number of bytes dropped.
    pub fn finish(mut self) -> io::Result<u64> {
        if self.dropped > 0 {
            self.file
                .write_all(self.cap.dropped_line(self.dropped).as_bytes())?;
        }
        let (front, back) = self.tail.as_slices();
        self.file.write_all(front)?;
        self.file.write_all(back)?;
        self.file.flush()?;
        Ok(self.dropped)
    }
}

/// Whole lines cut from a process's output as it arrives, held until the
/// watch takes them. Bounded whatever the process prints: a line longer
/// than [`stream::MAX_EVENT_LINE`] is skipped (no event is that long), and
/// past [`Lines::HELD`] lines not yet taken the oldest go (a retry event
/// names its attempt, so a later one stands for any dropped before it).
#[derive(Debug, Default)]
pub struct Lines {
    partial: Vec<u8>,
    /// The line being read is too long to pass on.
    overlong: bool,
    ready: VecDeque<String>,
}

impl Lines {
    /// The most lines held for the watch.
    pub const HELD: usize = 256;

    pub fn push(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            let (part, rest, ended) = match chunk.iter().position(|b| *b == b'\n') {
                Some(at) => (&chunk[..at], &chunk[at + 1..], true),
                None => (chunk, &[][..], false),
            };
            if !self.overlong {
                if self.partial.len() + part.len() > stream::MAX_EVENT_LINE {
                    self.overlong = true;
                    self.partial.clear();
                } else {
                    self.partial.extend_from_slice(part);
                }
            }
            if ended {
                if !self.overlong {
                    let line = String::from_utf8_lossy(&self.partial).into_owned();
                    if self.ready.len() == Self::HELD {
                        self.ready.pop_front();
                    }
                    self.ready.push_back(line);
                }
                self.partial.clear();
                self.overlong = false;
            }
            chunk = rest;
        }
    }

    /// The whole lines read since the last take, oldest first.
    pub fn take(&mut self) -> VecDeque<String> {
        std::mem::take(&mut self.ready)
    }
}

/// Remove the driver logs `retention` does not keep, oldest first; never
/// the log of `open` (the open dispatch's log name, relative to the loop
/// directory or to `logs`) nor of a process whose record
/// (`<name>.pid`) is still there. Returns how many were removed.
pub fn sweep_logs(logs: &Path, open: Option<&str>, retention: Retention) -> io::Result<usize> {
    let open = open.map(|log| log.rsplit('/').next().unwrap_or(log));
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(logs)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata()?;
        if !meta.is_file() || !name.ends_with(".log") || name.starts_with('.') {
            continue;
        }
        // `<dispatch>.log`, `<name>.check.log`: the record is `<stem>.pid`.
        let stem = name.split('.').next().unwrap_or(&name);
        let recorded = logs.join(format!("{stem}.pid")).exists();
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        entries.push(LogEntry {
            protected: recorded || open == Some(name.as_str()),
            name,
            bytes: meta.len(),
            modified,
        });
    }
    let gone = capture::expired(&entries, retention);
    for name in &gone {
        match std::fs::remove_file(logs.join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(gone.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounded(cap: &str, chunks: &[&[u8]]) -> (Vec<u8>, u64) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.log");
        let mut log = BoundedLog::new(File::create(&path).unwrap(), OutputCap::parse(cap).unwrap());
        for chunk in chunks {
            log.write(chunk).unwrap();
        }
        let dropped = log.finish().unwrap();
        (std::fs::read(&path).unwrap(), dropped)
    }

    #[test]
    fn output_within_the_cap_is_kept_whole() {
        let (bytes, dropped) = bounded("64K", &[b"hello ", &[b'x'; 60_000], b" end"]);
        assert_eq!(dropped, 0);
        assert_eq!(bytes.len(), 6 + 60_000 + 4);
        assert!(bytes.starts_with(b"hello ") && bytes.ends_with(b"x end"));
    }

    #[test]
    fn a_flood_keeps_its_head_and_tail_and_says_what_was_dropped() {
        let flood = vec![b'f'; 1_000_000];
        let (bytes, dropped) = bounded("64K", &[b"FIRST", &flood, &flood, b"LAST"]);
        let cap = OutputCap::parse("64K").unwrap();
        assert_eq!(dropped, 2_000_009 - 65_536);
        let line = cap.dropped_line(dropped);
        assert_eq!(bytes.len() as u64, 65_536 + line.len() as u64);
        assert!(bytes.starts_with(b"FIRST") && bytes.ends_with(b"LAST"));
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text.find(&line), Some(32_768));
    }

    #[test]
    fn lines_come_whole_across_chunks_and_stay_bounded() {
        let mut lines = Lines::default();
        lines.push(b"{\"a\":1}\n{\"b\"");
        lines.push(b":2}\npartial");
        assert_eq!(lines.take(), ["{\"a\":1}", "{\"b\":2}"]);
        assert!(lines.take().is_empty(), "taken once");
        // An overlong line is skipped whole, even split over chunks; the
        // line after it comes through.
        lines.push(&vec![b'x'; stream::MAX_EVENT_LINE]);
        lines.push(b"more\nnext\n");
        assert_eq!(lines.take(), ["next"]);
        // A flood of lines keeps only the newest.
        for n in 0..Lines::HELD + 10 {
            lines.push(format!("{n}\n").as_bytes());
        }
        let held = lines.take();
        assert_eq!(held.len(), Lines::HELD);
        assert_eq!(held.front().map(String::as_str), Some("10"));
    }

    #[test]
    fn the_sweep_removes_the_oldest_logs_and_spares_recorded_and_open_ones() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str, age: u64| {
            let path = dir.path().join(name);
            std::fs::write(&path, b"log").unwrap();
            let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age);
            File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(when)
                .unwrap();
        };
        at("d1-old.log", 500);
        at("d2-running.log", 400);
        std::fs::write(dir.path().join("d2-running.pid"), b"123\n").unwrap();
        at("d3-open.log", 300);
        at("claim-4.check.log", 200);
        at("d5-new.log", 100);
        at("notes.txt", 1000);
        let retention = Retention {
            max_logs: 1,
            max_bytes: 1 << 20,
        };
        let removed = sweep_logs(dir.path(), Some("driver_logs/d3-open.log"), retention).unwrap();
        assert_eq!(removed, 2);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "d2-running.log",
                "d2-running.pid",
                "d3-open.log",
                "d5-new.log",
                "notes.txt"
            ]
        );
    }
}
