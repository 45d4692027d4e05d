"""The oldest git memsync works with: one number, used by `doctor`, the git-missing hint
and the README (a test keeps the README's text equal to it).

Each entry is a git feature memsync's calls rely on and the release that brought it; the
minimum is the newest of them. Add a line when a call starts to use something newer.
"""

from __future__ import annotations

# (feature, the git release that added it)
REQUIRED_FEATURES: tuple[tuple[str, tuple[int, int]], ...] = (
    ("`--end-of-options` before every user-supplied argument", (2, 24)),
    ("`rev-parse --show-object-format`", (2, 25)),
    ("`config --show-scope` (the repository config guard)", (2, 26)),
    ("`update-ref --stdin` with start/prepare/commit (the fenced publish)", (2, 27)),
    ("`init --initial-branch`", (2, 28)),
    ("`fetch --no-write-fetch-head`; `init --object-format`", (2, 29)),
    ("`rev-parse --path-format=absolute`", (2, 31)),
    ("`ls-files --deduplicate`", (2, 31)),
    ("GIT_CONFIG_COUNT/KEY_n/VALUE_n (forced config in the environment)", (2, 31)),
    ("GIT_CONFIG_GLOBAL (the user's ~/.gitconfig is not read)", (2, 32)),
    ("`repack --geometric`", (2, 32)),
)

MIN_GIT: tuple[int, int] = max(version for _, version in REQUIRED_FEATURES)
MIN_GIT_TEXT = ".".join(map(str, MIN_GIT))
