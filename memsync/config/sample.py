"""The commented sample configuration printed by `memsync config sample`.

Every key of the schema appears in it, with what it does and its default; a test checks
that it validates and that no schema field is missing from it.
"""

from __future__ import annotations

SAMPLE = """\
# memsync configuration (YAML). Unknown keys are errors; `memsync config validate` lists
# every problem at once. Durations: <int><ms|s|m|h|d> (e.g. 60s, 5m). Sizes:
# <int><B|KiB|MiB|GiB> (e.g. 4MiB). Relative paths are relative to this file's directory.
# Secrets are never plain strings: {env: NAME}, {file: PATH}, {credential: NAME} (systemd
# $CREDENTIALS_DIRECTORY/NAME) or, for tests and demos only, {value: "..."}.
# A reference of every key: its hosts, tokens and keys are examples, so `memsync doctor`
# fails it as it stands. `memsync config init` writes a minimal config that doctor passes.
version: 1

# Where memsync keeps its journal, trusted marks and imported views.
# Default: $XDG_STATE_HOME/memsync, else ~/.local/state/memsync.
state_dir: ~/.local/state/memsync

control:
  # The daemon's control socket (mode 0600) used by `sync-now`, `status`, ...
  # Default (null): $XDG_RUNTIME_DIR/memsync.sock, else <state_dir>/memsync.sock.
  socket: null

# Optional: serve /metrics, /healthz and /readyz on HOST:PORT. Default: off (omit `http`).
http:
  listen: 127.0.0.1:9464

# Memory roots to keep in sync, by name (letters, digits, '_', '.', '-').
roots:
  personal:
    path: ~/.rightmemory          # the Git work tree (required)
    branch: main                  # default (null): the checked-out branch
    max_file_size: 4MiB           # larger synchronized files are `too-large`; default 4MiB
    watch: true                   # sync soon after local edits; default true
    sync:
      enabled: true               # default true
      remote: origin              # the Git remote to fetch from and push to; default origin
      interval: 60s               # how often to check the upstream; default 60s
      push: true                  # push validated local commits; default true
      autocommit: false           # commit local edits before syncing; default false
      timeout: 120s               # limit for one sync cycle; default 120s
      # Optional hub event stream: sync at once when the upstream moves. Default: none.
      events: "https://hub.example/v1/events?root=personal"
      events_token: {env: HUB_TOKEN}   # optional bearer token for `events` (scope root:<name>)
      # Optional: after each push, tell a hub so its subscribers sync at once. Default: none.
      notify: {hub: "https://hub.example", token: {env: HUB_NOTIFY}, root: personal}
      # Optional: credentials for an HTTPS upstream that needs a token (a private GitHub or
      # GitLab repository, a deploy token). memsync's own credential helper hands them to
      # git: never on a command line, in a file or in an environment, and only to the
      # remote's own host (https://, or http:// on loopback). Default: none (git asks no
      # helper; a token written in the remote URL is still used).
      https:
        username: x-access-token  # GitHub tokens; GitLab: oauth2 or the deploy token's user
        token: {env: GH_TOKEN}    # or {credential: git-token} under systemd LoadCredential=
      # Optional: SSH with strict host key checking (unknown or changed host keys refuse).
      # Default: none (ssh -o BatchMode=yes with your ~/.ssh/config and ssh-agent).
      ssh:
        key: {file: ~/.ssh/memsync_deploy}  # or {credential: deploy-key}; omit: ssh-agent
        known_hosts: ~/.ssh/known_hosts   # the upstream's host key must be in it
    prune:                        # periodic expiry of active memory by a role
      enabled: false              # default false
      role: pruner                # a name under `roles`; default pruner
      generation_commits: 70      # commits per generation before pruning is due; default 70
      revival_grace: 2            # generations a pruned item written back is kept; default 2
      check_every: 2h             # how often to check whether pruning is due; default 2h
    insight:                      # insight logs written by a role
      enabled: false              # default false
      role: insight               # a name under `roles`; default insight
      trigger_points: 150         # points that make an insight cycle due; default 150
      points_per_commit: 1        # points each new commit adds; default 1
      check_every: 50m            # how often to check whether insight is due; default 50m
    # Optional: a role that settles a sync merge that conflicts (or merges into invalid
    # memory) with one merge commit in a private candidate; the gate checks it before it
    # lands. It must be an `executor: command` role. Default: none (the root stays
    # `conflict` until a person merges).
    repair:
      role: reconciler            # a name under `roles`
    # Optional: who may write this root's history. `signed` admits only commits (incoming
    # and outgoing, each one, merges too) SSH-signed (git's gpg.format=ssh) by a key listed
    # here; others are `rejected`. Commits trusted when it is turned on stay trusted.
    admission:
      require: "off"              # off or signed; default off
      # OpenSSH public keys (a .pub file's line), or files of them (one a line, # comments)
      signers:
        - "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBw1fVZ+RXJhrH+dg+3RYHQVY4TDMB7Z5T3SRvLIf2/p a@b"
        - {file: ~/.config/memsync/team-signers.pub}
    publish:                      # views of this root to publish to a hub; default none
      - view: auth                # the VIEW_ID under shared_views/ in this root
        hub: https://hub.example  # the hub's base URL
        token: {env: HUB_PUBLISH} # hub token with publish:<view> scope
        key: {env: VIEW_SIGNING_KEY}  # Ed25519 private key; or {file: ~/.config/memsync/view.key}
    # Optional: sign every commit memsync makes here (autocommit, merges, prune, insight,
    # repair, init's baseline) as `git commit -S` with gpg.format=ssh would, in process.
    # An unencrypted OpenSSH private key (ed25519, ecdsa or rsa). Default: none (unsigned).
    signing:
      key: {file: ~/.ssh/memsync_ed25519}

# Views imported from other people's roots into one of yours, by name.
views:
  team-auth:
    root: personal                # the configured root that receives the view (required)
    heading: team-auth            # heading it is mounted under; default (null): the view's name
    view_id: auth                 # the provider's view id; default: last part of url (or path)
    source:                       # where it comes from (required): kind http or git
      kind: http
      url: https://hub.example/v1/views/auth
      token: {env: HUB_TOKEN}     # optional bearer token with read:<view> scope
      allow_http: false           # plain http:// to a non-loopback host; default false
      # or: {kind: git, url: ssh://git@host/team.git, branch: main, path: shares/auth}
      #      (branch defaults to main; path is the directory holding package/ and manifest.json)
    trust:
      keys: ["ed25519:AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA"]  # pinned publisher keys
      threshold: 1                # distinct pinned keys that must sign; default 1
      allow_unsigned: false       # accept unsigned manifests (tests only); default false
    refresh: 5m                   # how often to check for a new revision; default 5m
    max_stale: 7d                 # /readyz fails when the import is older; default 7d
    # Larger files of a package are `too-large` and the revision is refused; default 1MiB,
    # at most 10MiB. Fixed package caps: 512 entries, 10 MiB uncompressed, a 1 MiB
    # manifest, 200:1 compression per entry, 4 directory levels, 255-byte names.
    max_file_size: 1MiB

# Roles run by prune, insight and repair cycles, by name.
roles:
  pruner:
    executor: command             # run a local agent command
    # argv; {prompt_file}, {worktree} and {role} are substituted; the prompt is also on stdin
    command: ["claude", "-p", "--output-format", "json"]
    timeout: 15m                  # killed (process group) after this; default 15m
  reconciler:                     # the repair role above: it resolves the conflict markers
    executor: command             # and commits once, completing the merge
    command: ["claude", "-p", "--allowedTools", "Read,Edit,Bash(git:*)"]
    timeout: 10m
  insight:
    executor: openai              # call an OpenAI-compatible chat completions API
    base_url: http://127.0.0.1:8080/v1
    model: qwen2.5-7b-instruct
    api_key: {env: OPENAI_API_KEY}   # optional
    timeout: 5m                   # default 5m

# Optional: run a program and/or call a webhook when a root's or view's status changes
# (a transition: nothing while a status stays). The JSON result (the `sync-now --json` or
# `views pull --json` entry plus previous_status, event, time) is the program's stdin or
# the POST body. A failing hook is logged and never blocks a sync. Default: none.
hooks:
  - on: [rejected, conflict, auth-failed, error]  # statuses that run it (required)
    roots: [personal]             # only these roots; default: every root and view
    views: [team-auth]            # only these views (with roots: these roots and views)
    # argv, never a shell; env MEMSYNC_HOOK_ROOT|VIEW, MEMSYNC_HOOK_STATUS; default: none
    command: ["/usr/local/bin/page-me", "--quiet"]
    # POST with `Authorization: Bearer` (https, or http to loopback); 3 tries with back-off
    webhook: {url: "https://alerts.example/memsync", token: {env: ALERT_TOKEN}}
    timeout: 30s                  # a command is killed after this; default 30s

# How `memsync run` writes its logs on stderr: text (one line, with a time unless stderr is
# the journal) or json (one object a line). `--log-format` wins. Default: text.
log:
  format: text

# Optional: settings for `memsync hub serve`.
hub:
  data_dir: /var/lib/memsync-hub  # made by `memsync hub init DIR` (required)
  listen: 127.0.0.1:8765          # default 127.0.0.1:8765
  # Limits against hostile or broken clients (`hub serve` options override them):
  header_timeout: 10s             # a request head must arrive whole within this; default 10s
  idle_timeout: 60s               # a connection with no request under way closes; default 60s
  max_connections: null           # per worker; default (null): the descriptor limit
                                  # (ulimit -n, LimitNOFILE=) less an eighth of it (at
                                  # least 64) and less 256
  max_streams_per_token: 16       # event streams one token may hold at once; default 16
  log_interval: 60s               # the same warning is logged at most this often; default 60s
"""
