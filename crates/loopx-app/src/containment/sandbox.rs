//! The bubblewrap line a contained process runs under: the host's view,
//! with the planes that could launch work outside the scope masked (the
//! cgroup filesystem, the user service manager's sockets, container
//! control sockets, live tmux and Screen control paths). It trusts the
//! CLI with the rest of the host view; it is not a filesystem allowlist.

use std::path::{Path, PathBuf};

/// Where Debian's bubblewrap is.
pub const BWRAP: &str = "bwrap";

/// The paths masked inside the sandbox for this environment (`var` reads
/// it), each masked as what it is: a directory by an empty tmpfs, a file
/// or socket by `/dev/null`. Only paths that exist are masked (bubblewrap
/// cannot mount over nothing).
pub fn masks(var: &dyn Fn(&str) -> Option<String>, uid: u32) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = vec![
        "/sys/fs/cgroup".into(),
        "/run/systemd/private".into(),
        "/run/dbus/system_bus_socket".into(),
        "/var/run/docker.sock".into(),
        "/run/docker.sock".into(),
        "/run/containerd/containerd.sock".into(),
        "/run/podman/podman.sock".into(),
        "/run/screen".into(),
        "/var/run/screen".into(),
        format!("/run/user/{uid}/systemd").into(),
        format!("/run/user/{uid}/bus").into(),
        format!("/run/user/{uid}/docker.sock").into(),
        format!("/run/user/{uid}/podman").into(),
        format!("/tmp/tmux-{uid}").into(),
    ];
    if let Some(runtime) = var("XDG_RUNTIME_DIR").filter(|v| v.starts_with('/')) {
        for name in ["systemd", "bus", "docker.sock", "podman", "containerd"] {
            paths.push(Path::new(&runtime).join(name));
        }
    }
    // A live tmux server: `$TMUX` is `socket,pid,session`.
    if let Some(tmux) = var("TMUX") {
        if let Some(socket) = tmux.split(',').next().filter(|s| s.starts_with('/')) {
            paths.push(socket.into());
        }
    }
    if let Some(tmpdir) = var("TMUX_TMPDIR").filter(|v| v.starts_with('/')) {
        paths.push(Path::new(&tmpdir).join(format!("tmux-{uid}")));
    }
    if let Some(dir) = var("SCREENDIR").filter(|v| v.starts_with('/')) {
        paths.push(dir.into());
    }
    paths.sort();
    paths.dedup();
    paths.retain(|p| std::fs::symlink_metadata(p).is_ok());
    // A path under a masked directory is hidden already (and bubblewrap
    // could not mount over it inside the empty tmpfs).
    let dirs: Vec<PathBuf> = paths.iter().filter(|p| p.is_dir()).cloned().collect();
    paths.retain(|p| !dirs.iter().any(|d| p != d && p.starts_with(d)));
    paths
}

/// bubblewrap's arguments before the program: the host bound as it is,
/// each of `masks` hidden, and the sandbox ending with its parent.
pub fn arguments(masks: &[PathBuf]) -> Vec<String> {
    let mut args: Vec<String> = ["--dev-bind", "/", "/", "--die-with-parent"]
        .map(str::to_owned)
        .to_vec();
    for path in masks {
        let shown = path.display().to_string();
        if path.is_dir() {
            args.extend(["--tmpfs".to_owned(), shown]);
        } else {
            args.extend(["--ro-bind".to_owned(), "/dev/null".to_owned(), shown]);
        }
    }
    args.push("--".to_owned());
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_existing_launch_planes_are_masked_each_as_what_it_is() {
        let runtime = tempfile::tempdir().unwrap();
        std::fs::create_dir(runtime.path().join("systemd")).unwrap();
        std::fs::write(runtime.path().join("bus"), "").unwrap();
        let tmux = runtime.path().join("tmux-sock");
        std::fs::write(&tmux, "").unwrap();
        let env = |name: &str| match name {
            "XDG_RUNTIME_DIR" => Some(runtime.path().display().to_string()),
            "TMUX" => Some(format!("{},77,0", tmux.display())),
            _ => None,
        };
        let masks = masks(&env, 4_000_000);
        for expected in [
            runtime.path().join("systemd"),
            runtime.path().join("bus"),
            tmux.clone(),
            PathBuf::from("/sys/fs/cgroup"),
        ] {
            assert!(masks.contains(&expected), "{expected:?} not in {masks:?}");
        }
        assert!(
            !masks.contains(&runtime.path().join("podman")),
            "a path that is not there"
        );
        let args = arguments(&masks);
        let systemd = runtime.path().join("systemd").display().to_string();
        let bus = runtime.path().join("bus").display().to_string();
        assert!(args.windows(2).any(|w| w == ["--tmpfs", systemd.as_str()]));
        assert!(args
            .windows(3)
            .any(|w| w == ["--ro-bind", "/dev/null", bus.as_str()]));
        assert_eq!(args.last().map(String::as_str), Some("--"));
    }
}
