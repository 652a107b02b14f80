//! The POSIX resource limits a contained process inherits: set in the
//! child before it execs (so everything it starts inherits them too), and
//! read back by the gate from inside the process before it execs the
//! provider.

use loopx_core::containment::limits::Limits;
use std::io;
use std::process::Command;

/// The limits a contained process gets, as (resource, value) pairs:
/// address space, CPU seconds, open files, per-file size, and no core
/// dumps. `cpu_seconds` bounds its CPU time (its phase's wall time and
/// margin, on every CPU it may use).
fn table(limits: &Limits, cpu_seconds: u64) -> [(libc::__rlimit_resource_t, u64); 5] {
    [
        (libc::RLIMIT_AS, limits.address_space_bytes),
        (libc::RLIMIT_CPU, cpu_seconds),
        (libc::RLIMIT_NOFILE, limits.open_files),
        (libc::RLIMIT_FSIZE, limits.file_size_bytes),
        (libc::RLIMIT_CORE, 0),
    ]
}

/// Set `limits` in the child of `command` before it execs.
pub fn limit_before_exec(command: &mut Command, limits: &Limits, cpu_seconds: u64) {
    use std::os::unix::process::CommandExt;
    let table = table(limits, cpu_seconds);
    // SAFETY: the hook runs in the forked child before exec and calls only
    // setrlimit(2), which is async-signal-safe, on values computed above;
    // it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            for (resource, value) in table {
                let limit = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                if libc::setrlimit(resource, &limit) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Whether this process's limits are at most what `limits` asks for (the
/// CPU limit is checked to be set at all: its value depends on the phase).
pub fn check_inherited_limits(limits: &Limits) -> Result<(), String> {
    let names = [
        "address space",
        "CPU time",
        "open files",
        "file size",
        "core size",
    ];
    for ((resource, asked), name) in table(limits, u64::MAX).into_iter().zip(names) {
        let mut found = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes only into `found`, which we own.
        if unsafe { libc::getrlimit(resource, &mut found) } != 0 {
            return Err(format!(
                "cannot read the {name} limit: {}",
                io::Error::last_os_error()
            ));
        }
        let unlimited = found.rlim_max == libc::RLIM_INFINITY;
        let too_high = if resource == libc::RLIMIT_CPU {
            unlimited
        } else {
            unlimited || found.rlim_max > asked || found.rlim_cur > asked
        };
        if too_high {
            return Err(format!(
                "the inherited {name} limit is {} (hard {}), not the {} asked for",
                shown(found.rlim_cur),
                shown(found.rlim_max),
                if resource == libc::RLIMIT_CPU {
                    "finite limit".to_owned()
                } else {
                    asked.to_string()
                }
            ));
        }
    }
    Ok(())
}

fn shown(value: libc::rlim_t) -> String {
    if value == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        value.to_string()
    }
}
