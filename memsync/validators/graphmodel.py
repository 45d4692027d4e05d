"""The values of a RightMemory graph: items, backing references, Focus entries, profiles.

`assembly.build_graph` produces a `MemoryGraph`; the validators, the editor and the
maintenance cycles read it. Everything here is frozen. Items are NamedTuples because a
large root holds 100k of them and tuples are several times faster to build.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from memsync.validators.document import Document
from memsync.validators.edgelists import Edge
from memsync.validators.headings import ANCHOR_KINDS

MEMORY = "memory"
PURSUIT = "pursuit"
MEMORY_ONLY_KINDS = frozenset({"M#", "S#", "MF#", "MQ#"})
MF_KINDS = frozenset({"#", "F#", "M#", "S#"})
DEFAULT_MF_ROOT = "dist/MEMORY.md"


class Item(NamedTuple):
    """One addressable heading or node.

    `parent` is the nearest addressable heading above it in the same file; `logical_parent`
    also crosses into the F# heading that owns a detail file. `content_hash` is the SHA-256
    of the item's logical block: its own lines, every line nested under it and, for F#
    headings, the content of the backing file (recursively).
    """

    id: str
    kind: str  # "heading" or "node"
    anchor: str | None  # the heading's anchor kind: "#", "F#", "M#", "S#", "MF#", "MQ#"
    file: str
    line: int
    end_line: int
    parent: str | None
    logical_parent: str | None
    edges: tuple[Edge, ...]
    content_hash: str
    tree: str  # "memory" or "pursuit"


@dataclass(frozen=True)
class BackingRef:
    """The file behind an F#, M# or S# heading; `exists` means present and regular."""

    id: str
    kind: str
    path: str
    file: str  # where the heading is
    line: int
    exists: bool


class FocusEntry(NamedTuple):
    """One reference in a Pursuit `## Focus` section."""

    target: str
    file: str
    line: int


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class MemoryGraph:
    """Everything parsed from one tree under one profile.

    `files` are the graph files in load order (roots, then F# detail files depth first);
    `evidence_files` the M# and S# files that exist (checked, never parsed). `attached`
    maps an F# heading's location `(file, line)` to the detail file it owns.
    """

    profile: str
    namespace: str
    items: Mapping[str, Item]
    files: tuple[str, ...]
    evidence_files: tuple[str, ...]
    backing: Mapping[str, BackingRef]
    focus: tuple[FocusEntry, ...]
    documents: Mapping[str, Document]
    attached: Mapping[tuple[str, int], str]

    def ancestors(self, item_id: str) -> list[str]:
        """The logical ancestor headings of an item, nearest first."""
        out: list[str] = []
        current = self.items[item_id].logical_parent
        while current is not None:
            out.append(current)
            current = self.items[current].logical_parent
        return out
