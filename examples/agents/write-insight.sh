#!/bin/sh
# An example insight role for `executor: command` (memsync runs it in a candidate worktree,
# with the prompt on stdin and in $MEMSYNC_PROMPT_FILE). A real setup runs an agent CLI here,
# e.g. command: ["claude", "-p", "--output-format", "json"]; this script only shows the
# contract: add one new insight_logs/<UTC time>.md and commit it, or change nothing.
set -eu
cat > /dev/null   # the prompt (also in $MEMSYNC_PROMPT_FILE)
count=$(ls MEMORY_*.md 2>/dev/null | wc -l | tr -d ' ')
[ "$count" -gt 0 ] || exit 0   # nothing to reflect on: a no-op
name="insight_logs/$(date -u +%Y-%m-%d-%H%M%S).md"
mkdir -p insight_logs
{
  echo "# The shape of memory"
  echo
  echo "This root keeps $count detail file(s) beside MEMORY.md. Recent additions:"
  git log -5 --format='- %s' -- 'MEMORY*.md'
} > "$name"
git add -f -- "$name"
git -c user.name="${GIT_AUTHOR_NAME:-insight}" -c user.email="${GIT_AUTHOR_EMAIL:-insight@localhost}" \
  commit -q -m "insight: the shape of memory ($count detail files)"
