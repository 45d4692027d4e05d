"""Frozen values (`memsync.values`, issue 18): a class made by `@value` behaves as the class
`@dataclass` makes of the same declarations, for everything memsync's code and tests do
with one: construction (positional, keyword, defaults, per-instance factories, errors),
`repr`, equality and hash, order, immutability, and the `dataclasses` functions."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync import values
from memsync.values import field, value


def _pair(
    annotations: dict[str, str], defaults: dict[str, object], **params: bool
) -> tuple[type, type]:
    """One declaration, made by `@value` and by `@dataclass` (frozen unless told)."""
    made: list[Any] = []
    for decorate in (value, dataclasses.dataclass):
        space: dict[str, object] = {"__annotations__": dict(annotations), "__module__": __name__}
        for name, default in defaults.items():
            if isinstance(default, _Factory):
                maker = values.field if decorate is value else dataclasses.field
                space[name] = maker(default_factory=default.make)
            else:
                space[name] = default
        options = {"frozen": True, **params}
        made.append(decorate(**options)(type("Shape", (), space)))
    return made[0], made[1]


class _Factory:
    def __init__(self) -> None:
        self.make = tuple


NAMES = ["a", "b", "c", "d", "e"]
plain = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.text(max_size=3),
    st.tuples(st.integers(0, 2)),
    st.just(Path("x")),
    st.just(timedelta(seconds=3)),
)


@st.composite
def shapes(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, object], dict[str, bool]]:
    count = draw(st.integers(0, 5))
    names = NAMES[:count]
    first_default = draw(st.integers(0, count))
    defaults: dict[str, object] = {}
    for name in names[first_default:]:
        defaults[name] = _Factory() if draw(st.booleans()) else draw(plain)
    params = {
        "frozen": draw(st.booleans()),
        "order": draw(st.booleans()),
        "repr": draw(st.booleans()),
    }
    return dict.fromkeys(names, "object"), defaults, params


def _outcome(make: type, args: tuple[object, ...], kwargs: dict[str, object]) -> Any:
    try:
        return make(*args, **kwargs)
    except TypeError:
        return TypeError


@given(
    shapes(), st.lists(plain, max_size=6), st.dictionaries(st.sampled_from([*NAMES, "z"]), plain)
)
def test_a_value_is_made_and_behaves_as_the_dataclass(
    shape: tuple[dict[str, str], dict[str, object], dict[str, bool]],
    args: list[object],
    kwargs: dict[str, object],
) -> None:
    annotations, defaults, params = shape
    ours, theirs = _pair(annotations, defaults, **params)
    mine, other = _outcome(ours, tuple(args), kwargs), _outcome(theirs, tuple(args), kwargs)
    assert (mine is TypeError) == (other is TypeError)
    if mine is TypeError:
        return
    names = list(annotations)
    assert vars(mine) == vars(other) and list(vars(mine)) == names
    if params["repr"]:
        assert repr(mine) == repr(other)
    twin = ours(**vars(mine))
    assert twin == mine and (twin != mine) is False and mine != other and mine != tuple(vars(mine))
    if params["frozen"]:
        assert hash(mine) == hash(other) == hash(twin)
        for name in [*names, "extra"]:
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(mine, name, 1)
            with pytest.raises(dataclasses.FrozenInstanceError):
                delattr(mine, name)
    else:
        assert type(mine).__hash__ is None and type(other).__hash__ is None
    if params["order"]:
        for test in ("__lt__", "__le__", "__gt__", "__ge__"):
            try:
                ours_says: object = getattr(mine, test)(twin)
            except TypeError:
                ours_says = TypeError
            try:
                theirs_say: object = getattr(other, test)(theirs(**vars(other)))
            except TypeError:
                theirs_say = TypeError
            assert ours_says == theirs_say
        assert mine.__lt__(other) is NotImplemented
    # the `dataclasses` functions, through the fields made when first asked for
    assert all(dataclasses.is_dataclass(made) for made in (ours, mine))
    assert [f.name for f in dataclasses.fields(mine)] == names
    assert dataclasses.asdict(mine) == dataclasses.asdict(other)
    assert str(inspect.signature(ours)) == str(inspect.signature(theirs))
    if names:
        changed = {names[0]: "changed"}
        assert vars(values.replace(mine, **changed)) == vars(dataclasses.replace(other, **changed))
        assert dataclasses.replace(mine, **changed) == values.replace(mine, **changed)
    with pytest.raises(TypeError):
        values.replace(mine, z=1)
    assert copy.copy(mine) == mine and copy.deepcopy(mine) == mine


def test_a_factory_makes_a_default_for_each_instance() -> None:
    @value
    class Held:
        """A holder."""

        items: tuple[int, ...] = field(default_factory=tuple)
        note: str = field(default="n", repr=False, compare=False)

    one = Held()
    assert one.items == ()
    assert repr(one) == "test_a_factory_makes_a_default_for_each_instance.<locals>.Held(items=())"
    assert Held(note="x") == Held(note="y") and hash(Held(note="x")) == hash(Held(note="y"))
    assert [(f.name, f.compare, f.repr) for f in dataclasses.fields(Held)] == [
        ("items", True, True),
        ("note", False, False),
    ]


def test_a_mutable_value_gets_a_new_default_each_time_and_no_hash() -> None:
    @value(frozen=False)
    class Open:
        """An open value."""

        items: list[int] = field(default_factory=list)

    one, two = Open(), Open()
    one.items = [1]
    assert two.items == [] and Open().items is not two.items and Open.__hash__ is None


def test_a_post_init_runs_and_a_subclass_may_add_attributes() -> None:
    ran: list[int] = []

    @value
    class Checked:
        """A checked value."""

        n: int

        def __post_init__(self) -> None:
            ran.append(self.n)

    class Child(Checked):
        pass

    Checked(3)
    child = Child(4)
    child.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        child.n = 5  # type: ignore[misc]
    assert ran == [3, 4] and child != Checked(4)


def test_a_value_pickles_as_a_frozen_dataclass_does() -> None:
    assert pickle.loads(pickle.dumps(Pickled(1, "x"))) == Pickled(1, "x")  # noqa: S301 - ours


@value
class Pickled:
    """A module-level value (pickle finds it by name)."""

    n: int
    s: str


def test_what_a_value_cannot_declare_is_refused() -> None:
    with pytest.raises(ValueError, match="mutable default"):
        value(type("Bad", (), {"__annotations__": {"x": "list[int]"}, "x": []}))
    with pytest.raises(TypeError, match="non-default argument"):
        value(type("Bad", (), {"__annotations__": {"x": "int", "y": "int"}, "x": 1}))
    with pytest.raises(TypeError, match="plain field"):
        value(type("Bad", (), {"__annotations__": {"x": "ClassVar[int]"}}))
    with pytest.raises(TypeError, match="no base class"):
        value(type("Bad", (Pickled,), {"__annotations__": {"x": "int"}}))
    with pytest.raises(TypeError, match="slots"):
        value(type("Bad", (), {"__annotations__": {}, "__slots__": ()}))
