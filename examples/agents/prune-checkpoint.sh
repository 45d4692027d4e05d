#!/bin/sh
# An example pruner role for `executor: command` (memsync runs it in a candidate worktree,
# with the prompt on stdin and in $MEMSYNC_PROMPT_FILE). A real setup runs an agent CLI
# that reads the prompt and removes what stopped mattering; this script only shows the
# contract's other outcome: nothing goes this generation, so it makes one empty commit
# with the subject `prune: checkpoint` and the ledger as its body.
# memsync rewrites the ledger's `Removed:` and `Revival grace:` sections with what the
# commit actually removed and the revival grace it enforces; other text is kept.
set -eu
cat > /dev/null   # the prompt (also in $MEMSYNC_PROMPT_FILE)
git -c user.name="${GIT_AUTHOR_NAME:-pruner}" -c user.email="${GIT_AUTHOR_EMAIL:-pruner@localhost}" \
  commit -q --allow-empty -F - <<LEDGER
prune: checkpoint

Nothing expired in this generation (operation ${MEMSYNC_OPERATION_ID:-none}).

Removed:
- none
Revival grace:
- none
LEDGER
