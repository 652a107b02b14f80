#!/usr/bin/env bash
# Record the import fixtures by running the reference runtime itself, so
# `crates/loopx/tests/import.rs` tests what today's reference really writes
# rather than what its specification says it writes.
#
#   scripts/record-reference-fixtures.sh PATH/TO/autonomous_research_loop_runtime.py
#
# The runtime is the reference's CLI (repository hoanganhduc/ai-agents-skills,
# folder canonical/runtime/skills/autonomous-research-loop-runtime); only its
# command line is called, in a temp dir, with its defaults. Two fixtures:
#
#   reference-new  a loop as `init` leaves it (Goal Focus enforce, no iteration)
#   reference-run  the same after `goal-focus set-mode monitor` and two
#                  `append-iteration`s (enforce mode appends only under a live
#                  host dispatch, which needs the reference's driver and panel)
#
# Only the state files import reads are kept (no lock, recovery.md or
# proof_artifacts/). Run ids and timestamps differ on every recording.
set -euo pipefail
runtime=${1:?usage: $0 PATH/TO/autonomous_research_loop_runtime.py}
cd "$(dirname "$0")/.."
fixtures=crates/loopx/tests/fixtures/import
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The reference keeps its registry and notify settings under HOME.
export HOME="$work/home"
mkdir -p "$HOME"
ref() { python3 "$runtime" "$@" >/dev/null; }
files=(loop_state.json budget.json iterations.jsonl goal_contract.json
       approach_registry.json current_plan.json direction_decisions.jsonl
       goal_priority.json)
keep() {
  rm -rf "${fixtures:?}/$2"
  mkdir -p "$fixtures/$2"
  for file in "${files[@]}"; do
    if [ -f "$1/$file" ]; then cp "$1/$file" "$fixtures/$2/$file"; fi
  done
}

loop="$work/run"
ref init --dir "$loop" --goal "Prove lemma B" \
  --success-criteria "a checked proof of lemma B" --max-iterations 10
keep "$loop" reference-new

ref goal-focus set-mode --dir "$loop" --mode monitor \
  --registry-dir "$work/registry" --apply
# append OBJECTIVE DECISION OUTPUT GAP TOKENS USD SECONDS PROVIDER [FLAG ...]
append() {
  ref append-iteration --dir "$loop" --mode bounded-research --objective "$1" \
    --decision "$2" --input-ref recovery.md --output "$3" --remaining-gap "$4" \
    --tokens "$5" --usd "$6" --wall-time-seconds "$7" --executor-provider "$8" \
    "${@:9}"
}
append "Survey the bridge lemma" continue "two candidate routes" \
  "terminal obligation open" 1000 0.5 600 claude \
  --action-taken "read the literature" --completed-summary "surveyed" \
  --current-summary "one obligation open" --next-action "try induction"
append "Try induction on n" revise "base case holds; step open" \
  "inductive step open" 1200 0.25 900 codex \
  --action-taken "wrote the base case" --completed-summary "base case" \
  --current-summary "inductive step open" \
  --next-action "strengthen the hypothesis" --obligation-id GOAL-SC-1 \
  --global-delta reduced --campaign-delta incremental --campaign-id main
keep "$loop" reference-run
echo "recorded $fixtures/reference-new and $fixtures/reference-run" >&2
