#!/bin/sh
# One agent turn with an ARVIS instance of its own (docs/deploy.md, "One instance per turn").
#
#   deploy/per-turn/run-turn.sh RUN_ID AGENT_COMMAND [ARGS...]
#
# Starts `arvis serve-turn RUN_ID` on TURN_HOST:TURN_PORT (default 127.0.0.1 and 0, a
# free port) and waits for its ready line, runs the agent with ARVIS_URL (the instance's
# URL), ARVIS_API_KEY (the agent's key, from this script's environment) and TURN_RUN_ID
# in its environment, then ends the turn (SIGTERM) and waits for ARVIS to drain, journal
# and release its lease. Exits with the agent's status when the agent failed, else with
# ARVIS's: 0 when every call it admitted is journaled. ARVIS takes its settings
# (ARVIS_DATABASE_URL, ...) from the environment. SIGTERM or SIGINT to this script ends
# the turn early, the same way.
set -eu

if [ "$#" -lt 2 ]; then
  echo "usage: $0 RUN_ID AGENT_COMMAND [ARGS...]" >&2
  exit 2
fi
run_id=$1
shift
if [ -z "${ARVIS_API_KEY:-}" ]; then
  echo "run-turn: set ARVIS_API_KEY to the agent's key: the agent calls ARVIS with it" >&2
  exit 2
fi

work=$(mktemp -d)
mkfifo "$work/stdout"
arvis serve-turn "$run_id" --host "${TURN_HOST:-127.0.0.1}" --port "${TURN_PORT:-0}" > "$work/stdout" &
arvis_pid=$!
exec 3< "$work/stdout"
rm -rf "$work"

agent_pid=
stop() {
  kill -TERM "$arvis_pid" 2>/dev/null || true
  if [ -n "$agent_pid" ]; then kill -TERM "$agent_pid" 2>/dev/null || true; fi
}
trap stop TERM INT

# The first line is {"event": "ready", "url": ..., ...}; nothing is on stdout before it.
if ! IFS= read -r ready <&3; then
  status=0
  wait "$arvis_pid" || status=$?
  echo "run-turn: arvis serve-turn exited ($status) before it was ready" >&2
  exit "$(( status == 0 ? 1 : status ))"
fi
url=$(printf '%s\n' "$ready" | sed -n 's/.*"url": "\([^"]*\)".*/\1/p')

ARVIS_URL=$url ARVIS_API_KEY=$ARVIS_API_KEY TURN_RUN_ID=$run_id "$@" &
agent_pid=$!
agent_status=0
wait "$agent_pid" || agent_status=$?
# A trapped signal interrupts `wait`; the agent was told to stop: wait for it to end.
while kill -0 "$agent_pid" 2>/dev/null; do
  agent_status=0
  wait "$agent_pid" || agent_status=$?
done

kill -TERM "$arvis_pid" 2>/dev/null || true
arvis_status=0
wait "$arvis_pid" || arvis_status=$?
while kill -0 "$arvis_pid" 2>/dev/null; do
  arvis_status=0
  wait "$arvis_pid" || arvis_status=$?
done
# {"event": "stopped", ...}: how the instance ended, for the orchestrator's log.
cat <&3 >&2
exec 3<&-

if [ "$agent_status" -ne 0 ]; then
  exit "$agent_status"
fi
exit "$arvis_status"
