"""Where a view's files live: its import inside the root, its state under the state dir.

    <root>/.runtime/                                 memsync's own (`.gitignore` is `*`)
    <root>/.runtime/shared_views/imports/<heading>/  the active import (RightMemory's place)
    <root>/.runtime/shared_views/candidates/         extraction targets, old imports
    <state_dir>/views/<view>/                        trust.json, promotion.json, lock, git-cache,
                                                     manifest.json (the trusted manifest),
                                                     imported.zip (the active revision's
                                                     package: `previous.py` reuses from it)

`views/store.py` says how the import directories are replaced; this module only names them.
"""

from __future__ import annotations

from pathlib import Path

from memsync.validators.paths import RUNTIME_DIR


def runtime_dir(root_path: Path) -> Path:
    return root_path / RUNTIME_DIR


def import_dir(root_path: Path, heading: str) -> Path:
    """The active import of the view mounted under `heading`."""
    return runtime_dir(root_path) / "shared_views" / "imports" / heading


def candidates_dir(root_path: Path) -> Path:
    return runtime_dir(root_path) / "shared_views" / "candidates"


def view_state_dir(state_dir: Path, view: str) -> Path:
    return state_dir / "views" / view
