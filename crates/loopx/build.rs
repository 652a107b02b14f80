//! Link options for the `loopx` executable. Owns nothing else: no code
//! generation, no dependency detection.
//!
//! By default the executable is position independent, as every Linux
//! distribution builds its programs: its own code and data load at a
//! random address. loopx starts agents with full tool autonomy, so the
//! address randomisation is worth the 0.3-0.6 ms the loader spends on
//! every start relocating the ~21,000 pointers in its vtables and static
//! tables (BENCHMARKS.md, issue 10). `LOOPX_LINK_NO_PIE=1` links a
//! position-dependent executable instead, for someone who measured that
//! start-up cost and chose it over the randomisation.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LOOPX_LINK_NO_PIE");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    let no_pie = std::env::var("LOOPX_LINK_NO_PIE").is_ok_and(|v| v == "1");
    if linux && no_pie {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
