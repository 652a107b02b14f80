//! The one clock reading adapters hand to the owners.

use jiff::{Timestamp, Unit};

/// Now, to the millisecond: finer digits only make ledgers harder to read.
pub fn now() -> Timestamp {
    let now = Timestamp::now();
    now.round(Unit::Millisecond).unwrap_or(now)
}
