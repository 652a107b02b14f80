//! Link options for the `loopx` executable: it is started once per agent
//! command, so what the dynamic loader does before `main` is paid on every
//! `append-iteration`, `status` and `done` (issue 10). Owns nothing else:
//! no code generation, no dependency detection.

fn main() {
    // A position-dependent executable: the linker resolves the ~21,000
    // pointers in vtables and static tables (`.data.rel.ro`, the GOT) at
    // link time, so the loader neither relocates them nor copies the ~90
    // pages they live in on every start (0.3-0.6 ms of a 2 ms start). The
    // cost is that the binary's own code and data load at a fixed address
    // (shared libraries, heap and stack stay randomized), as Go's default
    // Linux executables do. A packager who prefers a fully randomized
    // layout builds with `LOOPX_LINK_PIE=1`. See BENCHMARKS.md, issue 10.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LOOPX_LINK_PIE");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    let pie_requested = std::env::var("LOOPX_LINK_PIE").is_ok_and(|v| v == "1");
    if linux && !pie_requested {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
