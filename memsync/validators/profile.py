"""A graph's profile: what a RightMemory graph may contain and where it starts.

`local` is a memory root, `mf` an imported shared view (`Profile.named`). The cross-file
pass, the lineage records and the cache key their work by it; a sync whose lineage record
needs no parse loads this without the parser or the graph's values (`graphmodel`, issue 18).
"""

from __future__ import annotations

from memsync.validators.headings import ANCHOR_KINDS
from memsync.values import value

MEMORY = "memory"
PURSUIT = "pursuit"
MEMORY_ONLY_KINDS = frozenset({"M#", "S#", "MF#", "MQ#"})
MF_KINDS = frozenset({"#", "F#", "M#", "S#"})
DEFAULT_MF_ROOT = "dist/MEMORY.md"


@value
class Profile:
    """What a graph may contain and where it starts.

    `local` is a memory root: `MEMORY.md` and `PURSUITS.md`, every anchor kind, Focus. `mf`
    is an imported shared view: one Memory document (default `dist/MEMORY.md`), backing
    files beside it, kinds `#`, F#, M#, S#, and all prose under addressable headings.
    """

    name: str
    namespace: str
    roots: tuple[tuple[str, str], ...]  # (path, tree)
    base: str  # directory prefix of backing files: "" or "dist/"
    kinds: frozenset[str]
    focus: bool
    addressed_prose: bool

    @classmethod
    def named(
        cls, name: str, root_path: str | None = None, namespace: str | None = None
    ) -> Profile:
        if name == "local":
            if root_path is not None:
                raise ValueError("the local profile always starts at MEMORY.md and PURSUITS.md")
            roots = (("MEMORY.md", MEMORY), ("PURSUITS.md", PURSUIT))
            return cls("local", namespace or "local", roots, "", ANCHOR_KINDS, True, False)
        if name == "mf":
            root = root_path or DEFAULT_MF_ROOT
            base = root.rpartition("/")[0]
            base = f"{base}/" if base else ""
            return cls("mf", namespace or "MF", ((root, MEMORY),), base, MF_KINDS, False, True)
        raise ValueError(f"unknown graph profile {name!r}; use 'local' or 'mf'")

    def kind_problem(self, tree: str, kind: str, item_id: str) -> tuple[str, str] | None:
        """The code and message when an addressable heading of `kind` may not stand in
        `tree` under this profile (a kind the profile lacks, a Memory-only kind in Pursuit,
        the reserved Pursuit F# id `rules`); None when it may."""
        if tree == MEMORY and kind not in self.kinds:
            return (
                "kind-not-allowed",
                f"{kind} heading `{item_id}` is not valid in {self.namespace}",
            )
        if tree != MEMORY and kind in MEMORY_ONLY_KINDS:
            message = f"{kind} heading `{item_id}` is only valid in Memory, not in Pursuit"
            return "memory-only-kind", message
        if kind == "F#" and tree == PURSUIT and item_id.casefold() == "rules":
            message = (
                f"Pursuit F# id `{item_id}` is reserved (it would map to the legacy "
                "PURSUIT_RULES.md); choose another id"
            )
            return "reserved-id", message
        return None

    def backing_path(self, tree: str, kind: str, item_id: str) -> str | None:
        """Where the backing file of an F#, M# or S# heading lives; None for other kinds."""
        if kind == "F#":
            prefix = "MEMORY_" if tree == MEMORY else "PURSUIT_"
        elif kind == "M#":
            prefix = "MEMORY_"
        elif kind == "S#":
            prefix = "MEMORY_SKILL_"
        else:
            return None
        return f"{self.base}{prefix}{item_id}.md"
