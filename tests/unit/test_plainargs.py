"""The plain forms of `memsync status`, `sync-now`, `run` and `cycle` (`cli.plain.parse`):
whatever it takes, click parses to the same command and values; whatever else it leaves to
click."""

from __future__ import annotations

import itertools
from typing import Any

import click
from hypothesis import given
from hypothesis import strategies as st

from memsync.cli.group import cli
from memsync.cli.plain import COMMANDS, Plain, parse

# What each command's click parameters are called, by the flag that sets them.
PARAMS = {"--json": "as_json", "--accept-rewrite": "accept_rewrite", "--no-push": "no_push"}
PARAMS["--dry-run"] = "dry_run"
PARAMS["--force"] = "force"

TOKENS = st.sampled_from(
    [
        "status",
        "sync-now",
        "run",
        "cycle",
        "insight",
        "prune",
        "Prune",
        "--force",
        "--json",
        "--config",
        "--config=",
        "--config=c.yaml",
        "--config=-x",
        "--config=a=b",
        "c.yaml",
        "root",
        "-x",
        "--debug",
        "--log-format",
        "text",
        "--",
        "",
        "-h",
        "--help",
        "--version",
        "--dry-run",
        "--no-push",
        "--accept-rewrite",
        "--json=1",
        "--dry",
        "status=1",
        "-",
    ]
)


def clicks_reading(args: list[str]) -> Plain | None:
    """What click makes of `args`, as a `Plain`; None when it is not a run of `status`,
    `sync-now`, `run` or `cycle` with the group's other options at their defaults (an error,
    help, another command, `--debug`...)."""
    try:
        ctx = cli.make_context("memsync", list(args), obj=None)
        if any(v not in (None, False) for k, v in ctx.params.items() if k != "config_path"):
            return None
        rest = [*ctx._protected_args, *ctx.args]
        name, command, sub_args = cli.resolve_command(ctx, rest)
        if name not in COMMANDS or command is None:
            return None
        sub = command.make_context(name, sub_args, parent=ctx)
    except (click.exceptions.Exit, click.ClickException):
        return None
    params: dict[str, Any] = sub.params
    flags = frozenset(f for f, p in PARAMS.items() if params.get(p))
    names = (params["kind"], params["root"]) if name == "cycle" else params.get("roots", ())
    return Plain(name, ctx.params["config_path"], flags, tuple(names))


def test_every_short_argument_list_is_taken_only_as_click_reads_it() -> None:
    alphabet = [
        "status",
        "sync-now",
        "run",
        "--json",
        "--config",
        "--config=c",
        "c",
        "-x",
        "--dry-run",
        "--no-push",
        "--",
        "-h",
    ]
    taken = 0
    for size in range(5):
        for args in itertools.product(alphabet, repeat=size):
            plain = parse(list(args))
            if plain is not None:
                taken += 1
                assert clicks_reading(list(args)) == plain, args
    assert taken > 250  # status and sync-now, their flags and names, after each --config
    assert parse(["run"]) == clicks_reading(["run"]) == Plain("run", None, frozenset(), ())
    # `cycle KIND ROOT`: its own arguments, with and after --config.
    alphabet = ["cycle", "insight", "prune", "Prune", "r", "--force", "--json", "-x", "--"]
    cycles = 0
    for size in range(5):
        for args in itertools.product(alphabet, repeat=size):
            for line in (list(args), ["--config", "c", *args]):
                plain = parse(line)
                if plain is not None:
                    cycles += 1
                    assert clicks_reading(line) == plain, line
    assert cycles > 100


@given(st.lists(TOKENS, max_size=7))
def test_what_the_plain_forms_take_click_reads_the_same(args: list[str]) -> None:
    plain = parse(args)
    if plain is not None:
        assert clicks_reading(args) == plain


def test_the_plain_forms() -> None:
    assert parse(["status"]) == Plain("status", None, frozenset(), ())
    assert parse(["--config=a=b", "status", "--json"]) == Plain(
        "status", "a=b", frozenset({"--json"}), ()
    )
    assert parse(["--config", "c", "sync-now", "a", "--dry-run", "b"]) == Plain(
        "sync-now", "c", frozenset({"--dry-run"}), ("a", "b")
    )
    assert parse(["--config", "c", "run"]) == Plain("run", "c", frozenset(), ())
    assert parse(["cycle", "--json", "insight", "bob", "--force"]) == Plain(
        "cycle", None, frozenset({"--json", "--force"}), ("insight", "bob")
    )
    for other in (
        ["status", "--json", "--json"],
        ["sync-now", "--no-push", "--no-push"],
        ["status", "root"],
        ["--config", "a", "--config", "b", "status"],
        ["--debug", "status"],
        ["--", "status"],
        ["sync-now", "--", "-root"],
        ["--config", "-x", "status"],
        ["--config=", "status"],
        ["sync-now", "-h"],
        ["--json", "status"],
        ["sync-now", "--dry"],
        ["sync-now", "-"],
        ["validate", "."],
        ["run", "--json"],
        ["run", "root"],
        ["--debug", "run"],
        ["--log-format", "json", "run"],
        ["run", "-h"],
        ["cycle", "insight"],
        ["cycle", "Insight", "bob"],
        ["cycle", "prune", "bob", "extra"],
        ["cycle", "prune", "bob", "--dry-run"],
        ["cycle", "prune", "bob", "--force", "--force"],
    ):
        assert parse(other) is None, other
