//! The resources a trusted-local process may use: the specification's
//! defaults, overridden only through validated `AAS_AUTOLOOP_RESOURCE_*`
//! integer variables. An invalid value is refused before anything starts,
//! naming the variable.

use super::Role;
use serde::{Deserialize, Serialize};
use std::fmt;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// The prefix every override shares.
pub const PREFIX: &str = "AAS_AUTOLOOP_RESOURCE";

/// How long a scope outlives its phase's wall timeout before everything
/// in it is killed.
pub const SCOPE_MARGIN_SECONDS: u64 = 15;

/// What one contained process may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// The cgroup's memory ceiling; swap is always zero.
    pub memory_bytes: u64,
    /// RLIMIT_AS.
    pub address_space_bytes: u64,
    /// The cgroup's CPU quota, in percent of one CPU (100: one CPU's worth
    /// across all its tasks).
    pub cpu_percent: u64,
    /// The cgroup's task (pid) ceiling.
    pub tasks: u64,
    /// RLIMIT_NOFILE.
    pub open_files: u64,
    /// RLIMIT_FSIZE: per file, not an aggregate disk quota.
    pub file_size_bytes: u64,
    /// The combined stdout and stderr the host keeps.
    pub output_bytes: u64,
}

/// An override that is not a whole number in its range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}={value:?} is not a valid limit: expected a whole number from {min} to {max}; nothing was started")]
pub struct InvalidLimit {
    pub variable: String,
    pub value: String,
    pub min: u64,
    pub max: u64,
}

/// One overridable limit: its variable's suffix, its default per role and
/// the range an override must fall in.
struct Knob {
    suffix: &'static str,
    primary: u64,
    panel: u64,
    min: u64,
    max: u64,
}

impl Knob {
    fn read(&self, role: Role, var: &dyn Fn(&str) -> Option<String>) -> Result<u64, InvalidLimit> {
        let variable = format!("{PREFIX}_{}", self.suffix);
        let default = match role {
            Role::Primary => self.primary,
            Role::Panel => self.panel,
        };
        let Some(value) = var(&variable) else {
            return Ok(default);
        };
        value
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| (self.min..=self.max).contains(n))
            .ok_or(InvalidLimit {
                variable,
                value,
                min: self.min,
                max: self.max,
            })
    }
}

/// The limits of a `role` process, from the defaults and the overrides
/// `var` finds. Each role reads its own memory and task variables
/// (`_PANEL_MEMORY_BYTES`, `_PANEL_TASKS` for reviewers).
pub fn limits(role: Role, var: &dyn Fn(&str) -> Option<String>) -> Result<Limits, InvalidLimit> {
    let memory = match role {
        Role::Primary => "MEMORY_BYTES",
        Role::Panel => "PANEL_MEMORY_BYTES",
    };
    let tasks = match role {
        Role::Primary => "TASKS",
        Role::Panel => "PANEL_TASKS",
    };
    let knob = |suffix, primary, panel, min, max| Knob {
        suffix,
        primary,
        panel,
        min,
        max,
    };
    Ok(Limits {
        memory_bytes: knob(memory, 4 * GIB, 3 * GIB, 16 * MIB, 1 << 50).read(role, var)?,
        address_space_bytes: knob("ADDRESS_SPACE_BYTES", 64 * GIB, 64 * GIB, 64 * MIB, 1 << 50)
            .read(role, var)?,
        cpu_percent: knob("CPU_PERCENT", 100, 100, 1, 100_000).read(role, var)?,
        tasks: knob(tasks, 128, 64, 4, 1 << 22).read(role, var)?,
        open_files: knob("OPEN_FILES", 1024, 1024, 16, 1 << 20).read(role, var)?,
        file_size_bytes: knob("FILE_SIZE_BYTES", 4 * GIB, 4 * GIB, 4096, 1 << 50)
            .read(role, var)?,
        // Within what a turn's log cap accepts (64 KiB to 4 GiB).
        output_bytes: knob("OUTPUT_BYTES", 16_000_000, 16_000_000, 64 << 10, 4 << 30)
            .read(role, var)?,
    })
}

impl fmt::Display for Limits {
    /// `4 GiB memory, no swap, 128 tasks, 100% CPU, ...` as `status` says it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} memory, no swap, {} tasks, {}% CPU, {} address space, {} open files, {} per file, no core dumps, {} output",
            bytes(self.memory_bytes),
            self.tasks,
            self.cpu_percent,
            bytes(self.address_space_bytes),
            self.open_files,
            bytes(self.file_size_bytes),
            bytes(self.output_bytes)
        )
    }
}

/// A byte count in the largest binary unit it fills (`4 GiB`, `64 MiB`),
/// else in bytes or MB for the output cap's decimal default.
fn bytes(n: u64) -> String {
    match n {
        n if n >= GIB && n % GIB == 0 => format!("{} GiB", n / GIB),
        n if n >= MIB && n % MIB == 0 => format!("{} MiB", n / MIB),
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{} MB", n / 1_000_000),
        n => format!("{n} bytes"),
    }
}
