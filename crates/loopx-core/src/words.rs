//! Plain-English pieces every text view shares: a count with the right
//! form of its noun, and a span of seconds as a person would say it. Pure;
//! the views and adapters that print for people call these, never their
//! own copies.

/// `1 iteration`, `2 iterations`, `0 iterations`.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A span of seconds at the precision a person reads at a glance: `45s`,
/// `12m`, `3h 20m`, `2d 4h`.
pub fn duration(seconds: u64) -> String {
    const MINUTE: u64 = 60;
    const HOUR: u64 = 60 * MINUTE;
    const DAY: u64 = 24 * HOUR;
    match seconds {
        s if s < MINUTE => format!("{s}s"),
        s if s < HOUR => format!("{}m", s / MINUTE),
        s if s < DAY => match (s / HOUR, s % HOUR / MINUTE) {
            (h, 0) => format!("{h}h"),
            (h, m) => format!("{h}h {m}m"),
        },
        s => match (s / DAY, s % DAY / HOUR) {
            (d, 0) => format!("{d}d"),
            (d, h) => format!("{d}d {h}h"),
        },
    }
}

/// `then` as seen from `now`, at a glance: `12m ago`, `in 3h 20m`, `just
/// now` (the last minute; the future keeps its seconds, a countdown).
pub fn relative(then: jiff::Timestamp, now: jiff::Timestamp) -> String {
    let seconds = now.duration_since(then).as_secs();
    match seconds {
        0..=59 => "just now".to_owned(),
        s if s > 0 => format!("{} ago", duration(s as u64)),
        s => format!("in {}", duration(s.unsigned_abs())),
    }
}

/// How many single-character edits turn `a` into `b` (Levenshtein): how
/// near a mistyped name is to one that exists.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    // One row of the table at a time: row[j] is the distance from the
    // prefix of `a` read so far to b[..j].
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_single_character_edits() {
        assert_eq!(edit_distance(".loopx", ".loopx"), 0);
        assert_eq!(edit_distance(".lopx", ".loopx"), 1);
        assert_eq!(edit_distance(".looxp", ".loopx"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn one_thing_is_singular_and_every_other_count_plural() {
        assert_eq!(count(0, "iteration"), "0 iterations");
        assert_eq!(count(1, "iteration"), "1 iteration");
        assert_eq!(count(2, "turn"), "2 turns");
    }

    #[test]
    fn relative_times_say_ago_or_in() {
        let now: jiff::Timestamp = "2026-12-03T12:00:00Z".parse().unwrap();
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        assert_eq!(relative(at("2026-12-03T11:48:00Z"), now), "12m ago");
        assert_eq!(relative(at("2026-12-03T11:59:30Z"), now), "just now");
        assert_eq!(relative(at("2026-12-03T12:00:30Z"), now), "in 30s");
        assert_eq!(relative(at("2026-12-03T15:20:00Z"), now), "in 3h 20m");
    }

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(duration(0), "0s");
        assert_eq!(duration(59), "59s");
        assert_eq!(duration(60), "1m");
        assert_eq!(duration(3599), "59m");
        assert_eq!(duration(3600), "1h");
        assert_eq!(duration(3600 + 20 * 60 + 5), "1h 20m");
        assert_eq!(duration(2 * 86400 + 4 * 3600), "2d 4h");
        assert_eq!(duration(86400), "1d");
    }
}
