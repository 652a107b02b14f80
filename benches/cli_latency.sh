#!/usr/bin/env bash
# Build the release binaries and time the real loopx CLI on large ledgers.
# Arguments are passed to loopx-bench, e.g.:
#   benches/cli_latency.sh --sizes 1000 --runs 5
#   benches/cli_latency.sh --markdown-out /tmp/table.md
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cargo build --release -p loopx -p loopx-bench
target_dir=$(scripts/target-dir)
exec "$target_dir/release/loopx-bench" "$@"
