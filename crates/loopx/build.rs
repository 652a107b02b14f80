//! Link options for the `loopx` executable: it is started once per agent
//! command, so what the dynamic loader does before `main` is paid on every
//! `append-iteration`, `status` and `done` (issue 10). Owns nothing else:
//! no code generation, no dependency detection.

fn main() {
    // A position-dependent executable: the linker resolves the ~21,000
    // pointers in vtables and static tables (`.data.rel.ro`, the GOT) at
    // link time, so the loader neither relocates them nor copies the ~90
    // pages they live in on every start. The cost is that the binary's own
    // code and data load at a fixed address (shared libraries, heap and
    // stack stay randomized). See BENCHMARKS.md, issue 10 start-up.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
