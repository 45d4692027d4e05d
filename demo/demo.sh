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

step "Shared views: alice shares her notes on auth as a signed view, through a local hub"
PUBLIC=$(memsync keys generate --out "$DEMO/view.key")
echo "signing key written; consumers pin $PUBLIC"
memsync hub init "$DEMO/hub" > /dev/null
export PUB_TOKEN READ_TOKEN
PUB_TOKEN=$(memsync hub token create --data "$DEMO/hub" --scope publish:auth --label alice 2>/dev/null)
READ_TOKEN=$(memsync hub token create --data "$DEMO/hub" --scope read:auth --label bob 2>/dev/null)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
HUB="http://127.0.0.1:$PORT"
memsync hub serve --data "$DEMO/hub" --listen "127.0.0.1:$PORT" 2> "$DEMO/hub.log" &
HUB_PID=$!
trap 'kill $HUB_PID 2>/dev/null || true' EXIT
python3 - "$HUB" <<'PY'
import sys, time, urllib.request
deadline = time.monotonic() + 15
while True:
    try:
        urllib.request.urlopen(sys.argv[1] + "/v1/health", timeout=1).read()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("the hub did not start")
        time.sleep(0.05)
PY
echo "hub serving on $HUB"
git -C "$DEMO/alice" reset -q --hard HEAD~1   # drop the refused commit from alice's side
cat >> "$DEMO/alice/MEMORY.md" <<'MD'

# Auth Systems {#auth}

- `login` services use short-lived tokens → []
- `refresh` refresh tokens rotate on every use → [dep:login]
MD
mkdir -p "$DEMO/alice/shared_views/auth"
printf '# Auth\n\nHow our services authenticate.\n' > "$DEMO/alice/shared_views/auth/view.md"
cat > "$DEMO/alice/shared_views/auth/recipe.toml" <<'TOML'
version = 1
view_id = "auth"
kind = "file"
title = "Auth"
approved = true
intent = "How our services authenticate"
render = "extractive"
include_headings = ["auth"]
include_nodes = []
include_files = []
exclude_ids = []
TOML
git -C "$DEMO/alice" add MEMORY.md shared_views
git -C "$DEMO/alice" commit -qm "memory: auth notes, shared as a view"
run memsync views publish auth --root "$DEMO/alice" --hub "$HUB" --token env:PUB_TOKEN --key "$DEMO/view.key"

cat >> "$DEMO/config.yaml" <<YAML
views:
  team-auth:
    root: bob
    view_id: auth
    source: {kind: http, url: $HUB/v1/views/auth, token: {env: READ_TOKEN}}
    trust: {keys: ["$PUBLIC"]}
YAML
step "Bob pulls it: manifest verified against the pinned key, package checked, swapped in atomically"
run memsync views pull
IMPORT="$DEMO/bob/.runtime/shared_views/imports/team-auth/dist/MEMORY.md"
run cat "$IMPORT"
run memsync views pull

step "A package tampered with at rest on the hub is refused; bob's import keeps serving"
sed -i 's/short-lived tokens/5-minute tokens/' "$DEMO/alice/MEMORY.md"
git -C "$DEMO/alice" commit -qam "memory: tokens live 5 minutes"
memsync views publish auth --root "$DEMO/alice" --hub "$HUB" --token env:PUB_TOKEN --key "$DEMO/view.key"
python3 - "$DEMO/hub/views/auth/revisions/2/package" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[len(data) // 2] ^= 0xFF
open(sys.argv[1], "wb").write(bytes(data))
PY
before=$(sha256sum "$IMPORT")
set +e
memsync views pull
code=$?
set -e
echo "exit code $code (1: the view is stale)"
if [ "$before" != "$(sha256sum "$IMPORT")" ]; then
  echo "demo failed: the import changed" >&2
  exit 1
fi
echo "bob's import is still revision 1, byte for byte"

step "The daemon: carol's commit reaches dave by itself (validated, pushed, hub event, synced)"
git init -q --bare -b main "$DEMO/team2.git"
memsync init "$DEMO/carol" --upstream "$DEMO/team2.git" > /dev/null
memsync init "$DEMO/dave" --upstream "$DEMO/team2.git" > /dev/null
FOLLOW=$(memsync hub token create --data "$DEMO/hub" --scope root:team2 --label daemon 2>/dev/null)
NOTIFY=$(memsync hub token create --data "$DEMO/hub" --scope notify:team2 --label daemon 2>/dev/null)
cat > "$DEMO/daemon.yaml" <<YAML
version: 1
state_dir: $DEMO/daemon-state
control: {socket: $DEMO/daemon.sock}
roots:
YAML
for who in dave carol; do
  cat >> "$DEMO/daemon.yaml" <<YAML
  $who:
    path: $DEMO/$who
    watch: true
    sync:
      interval: 10m
      events: "$HUB/v1/events?root=team2"
      events_token: {value: "$FOLLOW"}
      notify: {hub: "$HUB", token: {value: "$NOTIFY"}, root: team2}
YAML
done
cat >> "$DEMO/daemon.yaml" <<YAML
    insight: {enabled: true, trigger_points: 1, points_per_commit: 1}   # carol (the last root above)
YAML
cat >> "$DEMO/daemon.yaml" <<YAML
roles:
  insight: {executor: command, command: [sh, $PWD/examples/agents/write-insight.sh], timeout: 60s}
YAML
MEMSYNC_CONFIG="$DEMO/daemon.yaml" memsync run 2> "$DEMO/daemon.log" &
DAEMON_PID=$!
trap 'kill $HUB_PID $DAEMON_PID 2>/dev/null || true' EXIT
python3 - "$DEMO" <<'PY'
import subprocess, sys, time
demo = sys.argv[1]
deadline = time.monotonic() + 20
while "following hub events" not in open(f"{demo}/daemon.log").read():
    if time.monotonic() > deadline:
        sys.exit("the daemon did not come up:\n" + open(f"{demo}/daemon.log").read())
    time.sleep(0.05)
def head(root):
    return subprocess.run(["git", "-C", f"{demo}/{root}", "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
with open(f"{demo}/carol/MEMORY.md", "a") as f:
    f.write("\nReleases are cut from main after the Tuesday deploy.\n")
subprocess.run(["git", "-C", f"{demo}/carol", "commit", "-qam", "memory: release rule"], check=True)
made, started = head("carol"), time.monotonic()
print(f"carol committed {made[:12]} (plain git commit; no sync-now anywhere)")
while head("dave") != made:
    if time.monotonic() - started > 20:
        sys.exit("demo failed: dave never received carol's commit")
    time.sleep(0.01)
print(f"dave published it {int((time.monotonic() - started) * 1000)} ms later "
      "(watch -> validate -> push -> hub event -> validate -> publish)")
PY
run tail -n 1 "$DEMO/dave/MEMORY.md"

step "An insight cycle, run by the daemon itself: carol's next memory commit tips the pressure"
printf '# Deploys\n\nTuesdays only.\n' > "$DEMO/carol/MEMORY_deploys.md"
git -C "$DEMO/carol" add -f MEMORY_deploys.md
git -C "$DEMO/carol" commit -qm "memory: deploy notes"
python3 - "$DEMO" <<'PY'
import subprocess, sys, time
demo = sys.argv[1]
deadline = time.monotonic() + 30
while True:
    names = subprocess.run(["git", "-C", f"{demo}/dave", "ls-files", "insight_logs"],
                           capture_output=True, text=True, check=True).stdout.split()
    if names:
        print(f"dave received {names[0]} (written by carol's insight role, validated, pushed)")
        break
    if time.monotonic() > deadline:
        sys.exit("demo failed: no insight landed:\n" + open(f"{demo}/daemon.log").read())
    time.sleep(0.05)
PY
run git -C "$DEMO/carol" log -1 --format='%s%n%n%b' -- insight_logs
MEMSYNC_CONFIG="$DEMO/daemon.yaml" run memsync status
kill -TERM $DAEMON_PID
wait $DAEMON_PID && echo "the daemon stopped cleanly on SIGTERM"

step "Status"
run memsync status
echo
echo "demo finished: see .demo/ (config.yaml, state/, team.git, alice, bob, hub/)"
