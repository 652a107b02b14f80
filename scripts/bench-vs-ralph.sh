#!/bin/sh
# The driver's gap between turns and its time per iteration, loopx against
# ralph-orchestrator, on the same fake agent, interleaved on one machine
# (issue 27, target 1). Needs `ralph` (`cargo install ralph-cli --locked`,
# about 20 minutes; not run in CI).
#
# The agent stamps the clock when it starts and when it ends, and records
# one loopx iteration in between (what a loopx turn must do to advance; for
# ralph the same script runs, so both drive the same process).
#   gap:           next agent's start - this agent's end (median)
#   per iteration: (wall time of the run - the agents' own time) / turns
# Usage: scripts/bench-vs-ralph.sh [loopx] [ralph] [TURNS] [ROUNDS]
set -eu
LOOPX=${1:-target/release/loopx}
RALPH=${2:-ralph}
TURNS=${3:-20}
ROUNDS=${4:-3}
LOOPX=$(cd "$(dirname "$LOOPX")" && pwd)/$(basename "$LOOPX")
RALPH=$(command -v "$RALPH")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PATH=$(dirname "$LOOPX"):$PATH
export PATH

agent() { # $1: where its stamps go
    cat > "$1/agent.sh" <<AGENT
#!/bin/sh
echo "start \$(date +%s%N)" >> $1/stamps
cat > /dev/null
loopx append-iteration --mode monitor --objective noop --decision continue >/dev/null 2>&1 || true
echo "end \$(date +%s%N)" >> $1/stamps
AGENT
    chmod +x "$1/agent.sh"
}

now() { date +%s%N; }

# Prints "gap_ms per_iteration_ms" for the stamps in $1 and a wall time $2 (ns).
summarise() {
    awk -v wall="$2" -v turns="$TURNS" '
        $1 == "start" { if (last_end) gaps[n++] = ($2 - last_end) / 1e6; start = $2 }
        $1 == "end" { last_end = $2; own += $2 - start }
        END {
            # median of the gaps
            for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (gaps[j] < gaps[i]) { t = gaps[i]; gaps[i] = gaps[j]; gaps[j] = t }
            printf "%.2f %.2f\n", gaps[int(n / 2)], (wall - own) / 1e6 / turns
        }' "$1/stamps"
}

run_loopx() { # $1: work dir
    mkdir -p "$1"
    agent "$1"
    "$LOOPX" init --dir "$1/loop" --goal bench --success-criteria none --max-iterations 100000 >/dev/null
    t0=$(now)
    (cd "$1" && "$LOOPX" drive --dir loop --cmd "$1/agent.sh" --max-iterations "$TURNS" --git-snapshot off >/dev/null 2>&1)
    t1=$(now)
    summarise "$1" $((t1 - t0))
}

run_ralph() { # $1: work dir
    mkdir -p "$1"
    agent "$1"
    (
        cd "$1"
        git init -q
        git -c user.name=b -c user.email=b@b commit -q --allow-empty -m first
        printf 'cli:\n  backend: "custom"\n  command: "%s/agent.sh"\n  prompt_mode: "stdin"\nevent_loop:\n  prompt_file: "PROMPT.md"\n  completion_promise: "LOOP_COMPLETE"\n  max_iterations: %s\n  cooldown_delay_seconds: 0\n' "$1" "$TURNS" > ralph.yml
        echo noop > PROMPT.md
    )
    t0=$(now)
    (cd "$1" && "$RALPH" run -a -q --skip-preflight --max-iterations "$TURNS" >/dev/null 2>&1 || true)
    t1=$(now)
    summarise "$1" $((t1 - t0))
}

echo "$TURNS turns per run, $ROUNDS interleaved rounds; ms: gap (median) / driver time per iteration"
echo "round | loopx | ralph $("$RALPH" --version 2>/dev/null | head -n1)"
round=1
while [ "$round" -le "$ROUNDS" ]; do
    l=$(run_loopx "$WORK/loopx-$round")
    r=$(run_ralph "$WORK/ralph-$round")
    echo "$round | $l | $r"
    round=$((round + 1))
done
