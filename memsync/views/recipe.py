"""`shared_views/<view>/recipe.toml`: what an extractive view selects from a root.

The authoring schema of RightMemory's file views (version 1): the selection arrays are
required for the extractive render, unknown keys are refused. memsync renders extractive
views only; a generative view needs the builder role (a model), which is not run here.
"""

from __future__ import annotations

import tomllib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memsync.errors import UsageError

ID = r"^[A-Za-z0-9_.-]+$"


class RecipeError(UsageError):
    """The recipe is missing, not TOML, or not a valid extractive recipe."""


class PublishTarget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = False
    hub_url: str | None = None
    credential_id: str | None = None


class Recipe(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1]
    view_id: str = Field(pattern=ID)
    kind: Literal["file"]
    title: str = ""
    approved: bool = False
    intent: str = ""
    render: Literal["extractive", "generative"]
    semantic_refresh_days: int = Field(default=7, ge=0)
    last_semantic_refresh_at: str = ""
    last_semantic_refresh_memory_commit: str = ""
    include_headings: tuple[str, ...] = ()
    include_nodes: tuple[str, ...] = ()
    include_files: tuple[str, ...] = ()
    exclude_ids: tuple[str, ...] = ()
    publish: PublishTarget | None = None


def parse_recipe(text: str, *, view_id: str, where: str) -> Recipe:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{where} is not valid TOML: {exc}") from exc
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise RecipeError(
            f"{where}: {loc}: {first['msg']} ({exc.error_count()} problem(s))",
            hint="see the RightMemory file-view recipe format",
        ) from exc
    if recipe.view_id != view_id:
        raise RecipeError(f"{where} names view '{recipe.view_id}', not '{view_id}'")
    if recipe.render != "extractive":
        raise RecipeError(
            f"{where}: render '{recipe.render}' needs the shared-view builder "
            "role; memsync builds extractive views only"
        )
    if not (recipe.include_headings or recipe.include_nodes or recipe.include_files):
        raise RecipeError(
            f"{where} selects nothing",
            hint="list ids under include_headings, include_nodes or include_files",
        )
    return recipe
