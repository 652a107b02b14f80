//! The Linux-only API of [`super`] on the other Unixes: no subreaper and
//! no `/proc`, so a turn's process group is the only fence and a recorded
//! pid carries no start time.

pub fn start_time(_pid: u32) -> Option<u64> {
    None
}

pub fn become_subreaper() -> bool {
    false
}

pub fn children() -> Vec<u32> {
    Vec::new()
}
