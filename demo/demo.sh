#!/usr/bin/env bash
# memsync demo: a team upstream, two memory roots (alice and bob), and the sync gate.
# Everything lives under ./.demo/ and needs no outside service.
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO="$PWD/.demo"
rm -rf "$DEMO"
mkdir -p "$DEMO"

# Plain git (used to play a careless teammate) must not depend on this machine's config.
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME="Demo" GIT_AUTHOR_EMAIL="demo@example.invalid"
export GIT_COMMITTER_NAME="Demo" GIT_COMMITTER_EMAIL="demo@example.invalid"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "A team upstream (a bare Git repository) and two memory roots"
git init -q --bare -b main "$DEMO/team.git"
run memsync init "$DEMO/alice" --upstream "$DEMO/team.git"
run memsync init "$DEMO/bob" --upstream "$DEMO/team.git"

cat > "$DEMO/config.yaml" <<YAML
version: 1
state_dir: $DEMO/state
roots:
  alice:
    path: $DEMO/alice
    watch: false
  bob:
    path: $DEMO/bob
    watch: false
YAML
export MEMSYNC_CONFIG="$DEMO/config.yaml"
run memsync config validate

step "Alice remembers something and syncs: memsync validates her commit, then pushes it"
cat >> "$DEMO/alice/MEMORY.md" <<'MD'

The team deploys on Tuesdays; never on Fridays.
MD
git -C "$DEMO/alice" commit -qam "memory: deploy days"
run memsync sync-now alice

step "Bob syncs: the commit is staged, validated and published by a fenced fast-forward"
run memsync sync-now bob
run tail -n 1 "$DEMO/bob/MEMORY.md"

step "A teammate pushes a forbidden file past memsync (plain git push)"
printf 'api_key = "oops"\n' > "$DEMO/alice/rightmemory.toml"
git -C "$DEMO/alice" add -f rightmemory.toml
git -C "$DEMO/alice" commit -qm "oops: machine config"
git -C "$DEMO/alice" push -q origin main
before=$(git -C "$DEMO/bob" rev-parse HEAD)
set +e
memsync sync-now bob
code=$?
set -e
after=$(git -C "$DEMO/bob" rev-parse HEAD)
echo "exit code $code (1: the verdict is not ok)"
if [ "$before" != "$after" ] || [ -e "$DEMO/bob/rightmemory.toml" ]; then
  echo "demo failed: bob's root changed" >&2
  exit 1
fi
echo "bob is unchanged at ${after:0:12}; the refused head is kept under refs/memsync/rescue/"

step "Status"
run memsync status
echo
echo "demo finished: see .demo/ (config.yaml, state/, team.git, alice, bob)"
