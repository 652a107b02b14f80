#!/usr/bin/env bash
# The main job on the embedded default: a real loop in a fresh directory,
# with SQLite inside it, driven through the same commands an agent calls.
# This script plays the agent for three turns, then asks the stop arbiter.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p loopx
loopx="$PWD/target/release/loopx"
dir="${1:-target/demo-loop}"
case "$dir" in target/*) rm -rf "$dir" ;; *) [ ! -e "$dir" ] || { echo "demo: $dir exists; pass a new directory" >&2; exit 2; } ;; esac

run() { printf '\n$ loopx %s\n' "$*"; "$loopx" "$@"; }

run init --dir "$dir" --goal "Show a bounded loop end to end" \
  --success-criteria "a machine-checked proof artifact is banked" --max-iterations 4 --max-usd 1
run append-iteration --dir "$dir" --mode bounded-research --objective "Survey the open evidence gaps" \
  --decision continue --tokens 1200 --usd 0.02 --remaining-gap "lemma B unproved" \
  --next-action "Draft the proof of lemma B"
run append-iteration --dir "$dir" --mode implementation-support --objective "Draft the proof of lemma B" \
  --decision revise --tokens 3400 --usd 0.05 --next-action "Check the draft with the verifier"

# The agent's verifier passed: it writes the proof and its artifact.
mkdir -p "$dir/proofs"
echo 'theorem lemma_b : True := trivial' > "$dir/proofs/lemma_b.lean"
cat > "$dir/proof_artifacts/lemma-b.json" <<'JSON'
{"schema_version": "1.0", "id": "lemma-b", "artifact_type": "lean", "machine_checkable": true,
 "target": "lemma B", "proof_path": "proofs/lemma_b.lean", "checker": {"name": "lean", "status": "passed"}}
JSON
run append-iteration --dir "$dir" --mode bounded-research --objective "Bank the checked proof" \
  --decision stop --stop-reason proof_found --evidence-id lemma-b --tokens 800 --usd 0.01
run status --dir "$dir"
run done --dir "$dir"
run validate --dir "$dir"
printf '\nrecovery view (%s/recovery.md):\n\n' "$dir"
cat "$dir/recovery.md"
