#!/bin/sh
# Times `loopx drive --workers N` end to end with the real binary on a
# real git repository (issue 34's numbers; see BENCHMARKS.md):
#   - merge-queue throughput: TODOS todos, instant agents, 4 workers;
#   - turn throughput at N = 1, 2, 4, 8 with agents that sleep SLEEP seconds,
#     against the agents' own time one at a time.
# Usage: scripts/bench-workers.sh [path/to/loopx] [TODOS] [SLEEP]
set -eu
LOOPX=${1:-target/release/loopx}
TODOS=${2:-16}
SLEEP=${3:-1}
LOOPX=$(cd "$(dirname "$LOOPX")" && pwd)/$(basename "$LOOPX")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

project() { # $1: name
    root=$WORK/$1
    mkdir -p "$root"
    git -C "$root" init -q -b main
    echo "loop/" > "$root/.gitignore"
    git -C "$root" add .gitignore
    git -C "$root" -c user.name=b -c user.email=b@b commit -qm first
    "$LOOPX" init --dir "$root/loop" --goal bench --success-criteria files --max-iterations 1000 >/dev/null
    for line in $(seq 1 "$TODOS"); do
        "$LOOPX" todo add --dir "$root/loop" "item $line" --id "t$line" >/dev/null
    done
}

agent() { # $1: seconds to sleep
    cat > "$WORK/agent-$1.sh" <<AGENT
#!/bin/sh
cat >/dev/null
sleep $1
echo "\$LOOPX_TODO_ID" > "out-\$LOOPX_TODO_ID.txt"
AGENT
    chmod +x "$WORK/agent-$1.sh"
    echo "$WORK/agent-$1.sh"
}

seconds() { # runs "$@", prints its wall time in seconds
    start=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    end=$(date +%s.%N)
    echo "$end - $start" | bc
}

instant=$(agent 0)
project queue
t=$(cd "$WORK/queue" && seconds "$LOOPX" drive --dir loop --cmd "$instant" --workers 4)
landed=$("$LOOPX" queue list --dir "$WORK/queue/loop" --json | tr -d " \n" | sed -n 's/.*"landed":\([0-9]*\).*/\1/p')
echo "merge queue: $landed of $TODOS todos landed in ${t}s with instant agents and 4 workers ($(echo "scale=1; $landed / $t" | bc) landings/s)"

sleeper=$(agent "$SLEEP")
serial=$(echo "$TODOS * $SLEEP" | bc)
echo "agent time alone: $TODOS todos x ${SLEEP}s = ${serial}s (one at a time)"
for n in 1 2 4 8; do
    project "n$n"
    t=$(cd "$WORK/n$n" && seconds "$LOOPX" drive --dir loop --cmd "$sleeper" --workers "$n")
    echo "N=$n: ${t}s (ideal $(echo "scale=2; $serial / $n" | bc)s; speed-up $(echo "scale=2; $serial / $t" | bc)x)"
done
