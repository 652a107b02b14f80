//! The Linux-only API of [`super`] on the other Unixes: no subreaper and
//! no `/proc`, so a turn's process group is the only fence and a recorded
//! pid carries no start time, and two files are never swapped in one step
//! (views are replaced by a plain rename).

pub fn start_time(_pid: u32) -> Option<u64> {
    None
}

pub fn become_subreaper() -> bool {
    false
}

pub fn children() -> Vec<u32> {
    Vec::new()
}

pub fn exchange(_a: &std::path::Path, _b: &std::path::Path) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

pub fn die_with_parent(command: &mut std::process::Command) -> &mut std::process::Command {
    command
}
