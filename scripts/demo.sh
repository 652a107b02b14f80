#!/usr/bin/env bash
# The main job on the embedded default: a real unattended loop. `loopx drive`
# runs fresh agent turns until the stop arbiter says done; the agent here is
# the bundled demo agent (scripts/demo-agent.py), which plans a three-line
# poem as todos, writes one line per turn, then verifies it and banks the
# proof. State is one SQLite file in the loop directory.
#
# With a real agent CLI installed, the same loop runs with
#   loopx drive --dir <loop> --provider claude     (or codex, opencode, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
# A cold build takes minutes (about 8 on two cores), almost all of it
# compiling dependencies once: say so, and let cargo show its progress.
say() { printf '==> %s\n' "$*" >&2; }
say "step 1 of 3: building loopx in release mode (a first build compiles every dependency"
say "            once and takes several minutes; later runs take seconds)..."
cargo build --release -p loopx
target_dir=$(scripts/target-dir)
export PATH="$target_dir/release:$PATH"
say "built $target_dir/release/loopx"
say "step 2 of 3: a real unattended loop: init, then loopx drive runs fresh turns of the demo agent"
project="target/demo-project"
rm -rf "$project"
mkdir -p "$project"
loop="$project/.loopx"

# Echo each command shell-quoted, so it can be pasted as it stands.
run() {
  printf '\n$ loopx'
  printf ' %q' "$@"
  printf '\n'
  loopx "$@"
}

run init --dir "$loop" --goal "Write the three-line demo poem" \
  --success-criteria "demo-output/poem.txt holds the three planned lines" \
  --success-check "test \$(wc -l < demo-output/poem.txt) -eq 3" \
  --max-iterations 8 --max-wall 10m
run drive --dir "$loop" --root "$project" --cmd "python3 $PWD/scripts/demo-agent.py"
run status --dir "$loop"
run todo list --dir "$loop"
run validate --dir "$loop"
printf '\n%s:\n' "$project/demo-output/poem.txt"
cat "$project/demo-output/poem.txt"

# What to try next, pasteable from here (`cargo install --locked --path
# crates/loopx` puts loopx on PATH for good).
bin=$(printf '%q' "$target_dir/release/loopx")
dir=$(printf '%q' "$PWD/$loop")
printf '\n==> step 3 of 3: try next\n'
printf '  %s status --dir %s        # the loop at a glance\n' "$bin" "$dir"
printf '  %s serve --dir %s         # its dashboard in a browser (prints a login link)\n' "$bin" "$dir"
printf '  %s install --target claude --dry-run   # what wiring loopx into Claude Code would change\n' "$bin"
