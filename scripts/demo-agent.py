#!/usr/bin/env python3
"""The bundled demo agent: one bounded turn of a demo goal, through the loopx CLI.

`loopx drive --cmd "python3 scripts/demo-agent.py"` runs it once per turn
with the prompt on stdin, in the project root, with LOOPX_DIR set. Like a
real agent it keeps no memory between turns: every turn reads the state,
does the one selected action, writes it back and records one iteration.
The demo goal: write a three-line poem to demo-output/poem.txt, one line
per todo, then verify it and bank the proof.
"""

import json
import os
import subprocess
import sys
import time

LINES = ["loops outlive their turns", "the ledger keeps every word", "stop when the proof holds"]


def loopx(*args):
    result = subprocess.run(["loopx", *args, "--json"], capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"loopx {' '.join(args)} failed")
    return json.loads(result.stdout)


def append(objective, decision, *extra):
    loopx("append-iteration", "--mode", "implementation-support", "--objective", objective, "--decision", decision, *extra)


def main():
    sys.stdin.read()  # the prompt; this agent reads the same state through loopx instead
    time.sleep(0.2)  # pretend to think
    poem = os.path.join("demo-output", "poem.txt")
    decision = loopx("quota", "should-run")
    reason = decision["scheduler_hint"]["reason_code"]
    if reason == "ledger_next_iteration":
        for line in LINES:
            loopx("todo", "add", "--title", f"write the line: {line}")
        append("Plan the poem as one todo per line", "continue", "--next-action", "write the first line")
    elif reason == "runnable_todo":
        todo = decision["selected_todo"]
        loopx("todo", "claim", todo["id"], "--ttl", "600")
        os.makedirs("demo-output", exist_ok=True)
        with open(poem, "a", encoding="utf-8") as out:
            out.write(todo["title"].split(": ", 1)[1] + "\n")
        loopx("refresh-state", "--complete", todo["id"], "--note", f"wrote {todo['id']}", "--evidence-ref", poem)
        append(f"Write {todo['id']}", "continue", "--evidence-id", todo["id"], "--next-action", "write the next line")
    elif reason == "frontier_complete_review":
        with open(poem, encoding="utf-8") as text:
            written = [line.strip() for line in text]
        if written != LINES:
            append("Verify the poem", "revise", "--remaining-gap", "the poem does not match the plan")
            return
        loop = os.environ["LOOPX_DIR"]
        os.makedirs(os.path.join(loop, "proofs"), exist_ok=True)
        with open(os.path.join(loop, "proofs", "poem.txt"), "w", encoding="utf-8") as proof:
            proof.write("\n".join(written) + "\n")
        artifact = {
            "schema_version": "1.0", "id": "poem-check", "artifact_type": "python-verifier",
            "machine_checkable": True, "target": "the demo poem has its three planned lines",
            "proof_path": "proofs/poem.txt", "checker": {"name": "demo-agent line check", "status": "passed"},
        }
        with open(os.path.join(loop, "proof_artifacts", "poem-check.json"), "w", encoding="utf-8") as out:
            json.dump(artifact, out)
        append("Verify the poem and bank the proof", "stop", "--stop-reason", "success", "--evidence-id", "poem-check")
    else:
        append(f"Nothing runnable ({reason})", "revise", "--output", decision["scheduler_hint"]["reason"])


if __name__ == "__main__":
    main()
