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
cargo build --release --quiet -p loopx
export PATH="$PWD/target/release:$PATH"
project="target/demo-project"
rm -rf "$project"
mkdir -p "$project"
loop="$project/.loopx"

run() { printf '\n$ loopx %s\n' "$*"; loopx "$@"; }

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
