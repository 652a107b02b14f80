#!/bin/sh
# Peak memory and time of `loopx import --apply` as the source's history
# grows: a reference-runtime loop (the recorded `reference-run` fixture's
# files) whose iterations.jsonl repeats its first record N times, numbered
# 1..N. The target (issue 27 item 6) is memory flat in the history's length.
#
#   benches/import_memory.sh [LOOPX] [SIZES...]
#
# LOOPX defaults to target/release/loopx; SIZES to 1000 10000 100000.
# Needs GNU time (/usr/bin/time) for the peak resident set size.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
loopx=${1:-$here/target/release/loopx}
[ $# -gt 0 ] && shift
sizes=${*:-1000 10000 100000}
fixture=$here/crates/loopx/tests/fixtures/import/reference-run
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "| iterations | source bytes | peak RSS (MB) | wall (s) |"
echo "|---:|---:|---:|---:|"
for n in $sizes; do
    src=$work/source-$n
    mkdir -p "$src"
    cp "$fixture"/*.json "$src"/
    : >"$src/direction_decisions.jsonl"
    # The budget's spent totals must agree with the history: drop them and
    # let the import add the records up; raise the cap above N.
    sed -i -e '/"spent_/d' -e "s/\"max_iterations\": [0-9]*/\"max_iterations\": $((n + 10))/" "$src/budget.json"
    # Not finished: the recorded loop's last state would stop the import.
    sed -i -e 's/"status": "[a-z_]*"/"status": "running"/' "$src/loop_state.json"
    head -n 1 "$fixture/iterations.jsonl" |
        awk -v n="$n" '{ for (i = 1; i <= n; i++) { line = $0; sub(/"iteration": 1,/, "\"iteration\": " i ",", line); print line } }' \
            >"$src/iterations.jsonl"
    bytes=$(wc -c <"$src/iterations.jsonl")
    /usr/bin/time -f '%M %e' -o "$work/time-$n" \
        "$loopx" import --from "$src" --dir "$work/loop-$n" --apply --json >/dev/null
    read -r kb seconds <"$work/time-$n"
    echo "| $n | $bytes | $((kb / 1024)) | $seconds |"
done
