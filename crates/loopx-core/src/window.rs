//! The newest few of something: the bounded histories states keep (the
//! ledger's recent records, the driver's recent settlements, the goal's
//! notes, held charges, reviewers' recent times).
//!
//! Owns one rule: a push keeps the newest `most` items, oldest first.

/// Push `item` as the newest of `items`, dropping the oldest so that at
/// most `most` (at least one) remain.
pub fn push_newest<T>(items: &mut Vec<T>, item: T, most: usize) {
    debug_assert!(most > 0, "a history keeps at least its newest item");
    let excess = (items.len() + 1).saturating_sub(most);
    items.drain(..excess.min(items.len()));
    items.push(item);
}

#[cfg(test)]
mod tests {
    use super::push_newest;

    #[test]
    fn the_newest_are_kept_oldest_first() {
        let mut items = Vec::new();
        for n in 1..=7 {
            push_newest(&mut items, n, 3);
        }
        assert_eq!(items, [5, 6, 7]);
        // A history longer than the bound (an older, larger bound) is cut
        // to it on the next push.
        let mut long = vec![1, 2, 3, 4, 5];
        push_newest(&mut long, 6, 3);
        assert_eq!(long, [4, 5, 6]);
    }
}
