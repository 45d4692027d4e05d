"""The plain forms of `memsync status` (`statuscli.plain_args`): whatever it takes, click
parses to the same command and values; whatever else it leaves to click."""

from __future__ import annotations

import itertools

import click
from hypothesis import given
from hypothesis import strategies as st

from memsync.cli import cli
from memsync.statuscli import plain_args

TOKENS = st.sampled_from(
    [
        "status",
        "--json",
        "--config",
        "--config=",
        "--config=c.yaml",
        "--config=-x",
        "c.yaml",
        "-x",
        "--debug",
        "--log-format",
        "text",
        "--",
        "",
        "-h",
        "sync-now",
        "--json=1",
        "--config=a=b",
        "status=1",
    ]
)


def clicks_reading(args: list[str]) -> tuple[str | None, bool] | None:
    """(config, as_json) as click parses `args` for `status`; None when it is not a plain
    run of `status` with default options (another command, an error, help, other options)."""
    try:
        ctx = cli.make_context("memsync", list(args), obj=None)
        if set(ctx.params) - {"config_path"} and any(
            ctx.params[k] not in (None, False) for k in ctx.params if k != "config_path"
        ):
            return None
        rest = [*ctx._protected_args, *ctx.args]
        name, command, sub_args = cli.resolve_command(ctx, rest)
        if name != "status" or command is None:
            return None
        sub = command.make_context(name, sub_args, parent=ctx)
    except (click.exceptions.Exit, click.ClickException):
        return None
    return ctx.params["config_path"], sub.params["as_json"]


def test_every_short_argument_list_is_taken_only_as_click_reads_it() -> None:
    alphabet = ["status", "--json", "--config", "--config=c", "c", "-x", "--debug", "--", "-h"]
    taken = 0
    for size in range(5):
        for args in itertools.product(alphabet, repeat=size):
            plain = plain_args(list(args))
            if plain is not None:
                taken += 1
                assert clicks_reading(list(args)) == plain, args
    assert taken == 8  # status [--json], bare or after --config c, --config=c, --config status


@given(st.lists(TOKENS, max_size=6))
def test_what_the_plain_forms_take_click_reads_the_same(args: list[str]) -> None:
    plain = plain_args(args)
    if plain is not None:
        assert clicks_reading(args) == plain


def test_the_plain_forms() -> None:
    assert plain_args(["status"]) == (None, False)
    assert plain_args(["status", "--json"]) == (None, True)
    assert plain_args(["--config", "c.yaml", "status"]) == ("c.yaml", False)
    assert plain_args(["--config=a=b", "status", "--json"]) == ("a=b", True)
    for other in (
        ["status", "--json", "--json"],
        ["--config", "a", "--config", "b", "status"],
        ["--debug", "status"],
        ["--", "status"],
        ["status", "--"],
        ["--config", "-x", "status"],
        ["--config=", "status"],
        ["status", "-h"],
        ["--json", "status"],
    ):
        assert plain_args(other) is None, other
