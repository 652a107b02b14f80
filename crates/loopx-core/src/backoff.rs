//! The one back-off schedule: a wait that starts at a first step and
//! doubles with every retry up to a cap.
//!
//! Owns only the arithmetic. Each caller keeps what differs on purpose:
//! its first step and cap, whether and how it jitters (a writer that lost
//! a race takes a random share of the window; a driver waiting for a
//! server never waits much less than the step), and how it sleeps.

use std::time::Duration;

/// The wait before retry `step` (from 0): `first`, doubled `step` times,
/// never more than `cap`. Saturates instead of overflowing at any step.
pub fn doubling(first: Duration, step: u32, cap: Duration) -> Duration {
    first.saturating_mul(1 << step.min(31)).min(cap)
}

#[cfg(test)]
mod tests {
    use super::doubling;
    use std::time::Duration;

    #[test]
    fn doubles_from_the_first_step_and_stops_at_the_cap() {
        let ms = Duration::from_millis;
        let waits: Vec<_> = (0..6)
            .map(|step| doubling(ms(100), step, ms(1000)))
            .collect();
        assert_eq!(
            waits,
            [ms(100), ms(200), ms(400), ms(800), ms(1000), ms(1000)]
        );
        assert_eq!(doubling(ms(100), u32::MAX, ms(1000)), ms(1000));
        assert_eq!(doubling(Duration::MAX, 31, Duration::MAX), Duration::MAX);
        assert_eq!(doubling(Duration::ZERO, 7, ms(1000)), Duration::ZERO);
    }
}
