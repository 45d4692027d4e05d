"""The synchronization policy: which paths are synchronized and the size caps.

The default allowlist is RightMemory's `MEMORY_SYNC_PATHS`: each `*` in a glob means
`[^/]*`, every pattern is matched against the whole path, case-sensitively. The update
queue and record paths are exact regular expressions. Everything else is forbidden.

The same policy also renders the root `.gitignore` that keeps unsynchronized files out of
`git add`; the gate, not the `.gitignore`, is what enforces the allowlist.
"""

from __future__ import annotations

import functools
import re

from memsync.values import value

ALLOWED_GLOBS: tuple[str, ...] = (
    ".gitignore",
    "MEMORY.md",
    "MEMORY_*.md",
    "PURSUITS.md",
    "PURSUIT_*.md",
    "AGENT_GUIDANCE_INBOX.md",
    "corrections.md",
    "shared_views.toml",
    "shares.toml",
    "shared_views/*/view.md",
    "shared_views/*/retriever.md",
    "shared_views/*/recipe.toml",
    "shared_views/*/question.toml",
    "shared_views/*/.gitignore",
    "insight_logs/*.md",
)

ALLOWED_REGEXES: tuple[str, ...] = (
    r"update_queue/lease\.json",
    r"update_queue/candidates/[0-9a-f]{32}\.json",
    r"update_queue/recovery/update-batch-[0-9a-f]{64}\.json",
    r"update_records/update-batch-[0-9a-f]{64}\.json",
)

# Legacy reference files: a glob above matches them, but they stay local.
LEGACY_FILES: tuple[str, ...] = ("PURSUIT_RULES.md", "AGENT_CORRECTION_MEMORY_RULES.md")


@value
class SyncPolicy:
    """Size caps and the path allowlist applied to every synchronized tree and commit."""

    max_file_size: int = 4 * 1024 * 1024
    max_path_bytes: int = 1024
    max_component_bytes: int = 255
    allowed_globs: tuple[str, ...] = ALLOWED_GLOBS
    allowed_regexes: tuple[str, ...] = ALLOWED_REGEXES
    legacy_files: tuple[str, ...] = LEGACY_FILES

    def allows(self, path: str) -> bool:
        """True when `path` is synchronized: it matches the allowlist and is not legacy."""
        if self.is_legacy(path):
            return False
        return _compile(self.allowed_globs, self.allowed_regexes).fullmatch(path) is not None

    def is_legacy(self, path: str) -> bool:
        return path in self.legacy_files


DEFAULT_POLICY = SyncPolicy()


def glob_to_regex(glob: str) -> str:
    """Translate an allowlist glob: `*` is `[^/]*`, every other character is literal."""
    return "[^/]*".join(re.escape(part) for part in glob.split("*"))


@functools.lru_cache(maxsize=8)
def _compile(globs: tuple[str, ...], regexes: tuple[str, ...]) -> re.Pattern[str]:
    parts = [glob_to_regex(g) for g in globs] + list(regexes)
    return re.compile("|".join(f"(?:{p})" for p in parts))


def gitignore_text(policy: SyncPolicy = DEFAULT_POLICY) -> str:
    """The root `.gitignore`: ignore everything, then re-include each synchronized path."""
    lines = [
        "# Written by memsync. Only synchronized memory files are tracked:",
        "# everything is ignored, then each synchronized path is re-included.",
        "# Edits here do not widen what memsync synchronizes.",
        "*",
    ]
    lines += [f"!/{g}" for g in policy.allowed_globs if "/" not in g]
    nested = [g for g in policy.allowed_globs if "/" in g]
    nested += [_regex_to_gitignore(r) for r in policy.allowed_regexes]
    # Re-include every parent directory (parents first) so that git descends into it.
    directories: dict[str, None] = {}
    for pattern in nested:
        parts = pattern.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            directories.setdefault("/".join(parts[:depth]) + "/")
    for directory in directories:
        lines.append(f"!/{directory}")
        lines += [f"!/{p}" for p in nested if p.rsplit("/", 1)[0] + "/" == directory]
    lines.append("# Legacy reference files stay local.")
    lines += [f"/{name}" for name in policy.legacy_files]
    return "\n".join(lines) + "\n"


def _regex_to_gitignore(regex: str) -> str:
    """Render the small regex subset used by the allowlist as a gitignore pattern.

    Supported: literal characters, `\\x` escapes, bracket classes and `{n}` repetition of
    the preceding class. Anything else raises ValueError rather than widening the pattern.
    """
    out: list[str] = []
    i = 0
    while i < len(regex):
        char = regex[i]
        if char == "\\":
            out.append(regex[i + 1])
            i += 2
        elif char == "[":
            end = regex.index("]", i)
            out.append(regex[i : end + 1])
            i = end + 1
        elif char == "{":
            end = regex.index("}", i)
            out[-1] *= int(regex[i + 1 : end])
            i = end + 1
        elif char in ".*+?()|^$":
            raise ValueError(f"unsupported regex syntax {char!r} in {regex!r}")
        else:
            out.append(char)
            i += 1
    return "".join(out)
