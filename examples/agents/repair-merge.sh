#!/bin/sh
# An example repair role for `executor: command` (roots.<name>.repair.role). memsync runs it
# in a private candidate worktree where a sync merge stopped with conflicts; the prompt is
# on stdin and in $MEMSYNC_PROMPT_FILE. A real setup runs an agent CLI here, e.g.
#   command: ["claude", "-p", "--allowedTools", "Read,Edit,Bash(git:*)"]
# This script only shows the contract with a mechanical rule: every conflicted file keeps
# the lines of both sides (a union merge), then ONE commit completes the merge. It cannot
# fix a clean merge whose result is invalid, so then it exits non-zero and changes nothing.
set -eu
cat > /dev/null   # the prompt (also in $MEMSYNC_PROMPT_FILE)
conflicted=$(git diff --name-only --diff-filter=U)
if [ -z "$conflicted" ]; then
  echo "repair-merge.sh: no conflicted paths; this example settles only merge conflicts" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "$conflicted" | while IFS= read -r path; do
  for stage in 1 2 3; do
    git show ":$stage:$path" > "$tmp/$stage" 2>/dev/null || : > "$tmp/$stage"
  done
  if ! git cat-file -e ":2:$path" 2>/dev/null; then    # deleted here, changed upstream
    cp "$tmp/3" "$path"
  elif ! git cat-file -e ":3:$path" 2>/dev/null; then  # changed here, deleted upstream
    cp "$tmp/2" "$path"
  else
    git merge-file -p --union "$tmp/2" "$tmp/1" "$tmp/3" > "$path"
  fi
  git add -f -- "$path"
done
git -c user.name="${GIT_AUTHOR_NAME:-memsync repair}" \
  -c user.email="${GIT_AUTHOR_EMAIL:-repair@localhost}" \
  commit -q --no-edit
