"""Frozen values: the classes `@dataclass(frozen=True)` makes, made without `dataclasses`.

`dataclasses` writes each class's `__init__`, `__repr__`, `__eq__`, `__hash__` and
`__setattr__` as Python source and compiles it when the module loads: about half a
millisecond a class, whatever its fields, and `dataclasses` itself loads `inspect` (with
`ast`, `dis` and `tokenize`). A cold `memsync sync-now` defined forty of them, most before
its first git process could start (issue 18). `@value` makes the same class from
functions written once here, shared by every class: defining one costs a few
microseconds and loads nothing.

What the class does is what `@dataclass` with the same arguments makes (`frozen`, `eq`,
`order`, `repr`; `field(default=, default_factory=, repr=, compare=)`), and
tests/unit/test_values.py holds the two to it: the same `__init__` (positional and
keyword, defaults, factories called per instance, a `__post_init__`), the same `repr`,
equality and hash (the tuple of the compared fields, only with an instance of the very
class), the same order, `dataclasses.FrozenInstanceError` on assignment. The
`dataclasses` functions work on these classes too (`replace`, `fields`, `asdict`,
`is_dataclass`): the class's `__dataclass_fields__` is made, with `dataclasses`, the first
time one of them asks; `replace` here does the same without it. Type checkers see a
dataclass (`dataclass_transform`). Not offered (refused when a class asks for it): fields
declared by a base class, `ClassVar`/`InitVar` annotations, `init=False` fields, slots.
"""

from __future__ import annotations

import operator
from operator import attrgetter

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from collections.abc import Callable

    # Typed as `dataclasses`' own (re-exported): mypy checks a `replace`'s changes by name.
    from dataclasses import field as field  # noqa: PLC0414
    from dataclasses import replace as replace  # noqa: PLC0414
    from typing import Any, TypeVar, dataclass_transform, overload

    _T = TypeVar("_T")
else:

    def dataclass_transform(**_: object) -> object:
        return lambda decorated: decorated


class _Missing:
    """No default (the `dataclasses.MISSING` of this module)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()


class Field:
    """What `field(...)` declares for one field (the class keeps only what it needs)."""

    __slots__ = ("compare", "default", "default_factory", "repr")

    def __init__(
        self,
        default: object = MISSING,
        default_factory: object = MISSING,
        repr: bool = True,
        compare: bool = True,
    ) -> None:
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare


if not TYPE_CHECKING:

    def field(
        *,
        default: object = MISSING,
        default_factory: object = MISSING,
        repr: bool = True,
        compare: bool = True,
    ) -> Field:
        """A field's default, or the factory that makes it for each instance; whether it is
        shown by `repr` and compared (and hashed)."""
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        return Field(default, default_factory, repr, compare)

    def replace(obj: object, /, **changes: object) -> object:
        """`dataclasses.replace`: a copy of `obj` with `changes` (a frozen value or any
        dataclass; `dataclasses` is loaded only for the latter)."""
        spec = getattr(type(obj), "__value__", None)
        if spec is None:
            import dataclasses  # noqa: PLC0415 - a class made by `@dataclass`

            return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
        state = obj.__dict__
        return type(obj)(**{**{name: state[name] for name in spec.names}, **changes})


def names(cls: type) -> tuple[str, ...]:
    """A value class's field names, in order (`dataclasses.fields`' names)."""
    spec: _Spec = cls.__value__  # type: ignore[attr-defined]
    return spec.names


def as_dict(obj: object) -> dict[str, Any]:
    """A value's fields and their values, in order: `dataclasses.asdict` for a value whose
    fields hold plain data (it copies nothing, and converts no value nested in a field)."""
    state = obj.__dict__
    return {name: state[name] for name in names(type(obj))}


class _Spec:
    """One class's fields, as the shared methods read them."""

    __slots__ = (
        "annotations",
        "declared",
        "defaults",
        "factories",
        "frozen",
        "names",
        "params",
        "twin",
    )

    def __init__(self) -> None:
        self.names: tuple[str, ...] = ()
        self.defaults: dict[str, object] = {}
        self.factories: dict[str, Callable[[], object]] = {}
        self.annotations: dict[str, str] = {}
        self.declared: dict[str, Field] = {}  # the fields given by `field(...)`
        self.frozen = True
        self.params: dict[str, bool] = {}
        self.twin: Any = None  # the dataclass of the same declarations, once asked for


def _twin(owner: type) -> Any:
    """The class `@dataclass` makes of `owner`'s declarations (made once, when first asked
    for by `dataclasses` or `inspect`)."""
    spec: _Spec = owner.__dict__["__value__"]
    if spec.twin is None:
        import dataclasses  # noqa: PLC0415 - only code that asks `dataclasses` pays for it

        space: dict[str, object] = {
            "__annotations__": dict(spec.annotations),
            "__module__": owner.__module__,
            "__qualname__": owner.__qualname__,
        }
        for name in spec.names:
            declared = spec.declared.get(name)
            if declared is not None:
                space[name] = dataclasses.field(  # type: ignore[call-overload]
                    default=_dc(declared.default, dataclasses.MISSING),
                    default_factory=_dc(declared.default_factory, dataclasses.MISSING),
                    repr=declared.repr,
                    compare=declared.compare,
                )
            elif name in spec.defaults:
                space[name] = spec.defaults[name]
        made = type(owner.__name__, (), space)
        spec.twin = dataclasses.dataclass(**spec.params)(made)
    return spec.twin


def _dc(found: object, missing: object) -> object:
    return missing if found is MISSING else found


class _DataclassFields:
    """`__dataclass_fields__`: the fields `dataclasses` makes of the same declarations, when
    first asked for (`dataclasses.fields`, `replace`, `asdict`, `is_dataclass`)."""

    def __get__(self, instance: object, owner: type) -> dict[str, Any]:
        made: dict[str, Any] = _twin(owner).__dataclass_fields__
        type.__setattr__(owner, "__dataclass_fields__", made)
        return made


class _Signature:
    """`__signature__`: the parameters `inspect.signature` reports for the class."""

    def __get__(self, instance: object, owner: type) -> object:
        import inspect  # noqa: PLC0415

        return inspect.signature(_twin(owner))


def _frozen_error(name: str) -> AttributeError:
    from dataclasses import FrozenInstanceError  # noqa: PLC0415 - only when code assigns

    return FrozenInstanceError(f"cannot assign to field {name!r}")


_ANNOTATION_REFUSED = ("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar")


def _read(cls: type, frozen: bool, params: dict[str, bool]) -> _Spec:
    for base in cls.__mro__[1:]:
        if "__value__" in base.__dict__ or "__dataclass_fields__" in base.__dict__:
            raise TypeError(f"{cls.__qualname__}: a value's fields are its own (no base class's)")
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__qualname__}: a value has no slots")
    spec = _Spec()
    spec.frozen = frozen
    spec.params = params
    spec.annotations = dict(cls.__dict__.get("__annotations__", {}))  # noqa: RUF063 - strings, as written
    names: list[str] = []
    for name, note in spec.annotations.items():
        if not isinstance(note, str) or note.startswith(_ANNOTATION_REFUSED):
            raise TypeError(f"{cls.__qualname__}.{name}: not a plain field annotation")
        names.append(name)
        found = cls.__dict__.get(name, MISSING)
        if isinstance(found, Field):
            spec.declared[name] = found
            if found.default_factory is not MISSING:
                spec.factories[name] = found.default_factory  # type: ignore[assignment]
                delattr(cls, name)
            elif found.default is not MISSING:
                spec.defaults[name] = found.default
                setattr(cls, name, found.default)
            else:
                delattr(cls, name)
            found = spec.defaults.get(name, MISSING)
        elif found is not MISSING:
            spec.defaults[name] = found
        if found is not MISSING and type(found).__hash__ is None:
            raise ValueError(
                f"mutable default {type(found)} for field {name} is not allowed: "
                "use default_factory"
            )
    seen_default = False
    for name in names:
        has = name in spec.defaults or name in spec.factories
        if seen_default and not has:
            raise TypeError(f"non-default argument {name!r} follows default argument")
        seen_default = seen_default or has
    spec.names = tuple(names)
    return spec


def _key(names: tuple[str, ...]) -> Callable[[object], tuple[object, ...]]:
    """The tuple of these attributes of an instance (what `dataclasses` compares)."""
    if len(names) >= 2:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _make(cls: type, frozen: bool, eq: bool, order: bool, show: bool) -> type:
    spec = _read(cls, frozen, {"frozen": frozen, "eq": eq, "order": order, "repr": show})
    names = spec.names
    compared = tuple(n for n in names if n not in spec.declared or spec.declared[n].compare)
    key = _key(compared)
    made: dict[str, object] = {
        "__value__": spec,
        "__dataclass_fields__": _DataclassFields(),
        "__signature__": _Signature(),
    }
    if "__init__" not in cls.__dict__:
        made["__init__"] = _init(cls, spec)
    if "__match_args__" not in cls.__dict__:
        made["__match_args__"] = names
    if show and "__repr__" not in cls.__dict__:
        made["__repr__"] = _repr(
            tuple(n for n in names if n not in spec.declared or spec.declared[n].repr)
        )
    if eq and "__eq__" not in cls.__dict__:
        made["__eq__"] = _compare(key, operator.eq)
    own_hash = cls.__dict__.get("__hash__", MISSING)
    explicit_hash = not (own_hash is MISSING or (own_hash is None and "__eq__" in cls.__dict__))
    if eq and not explicit_hash:  # what `dataclass` does without `unsafe_hash`
        made["__hash__"] = _hash(key) if frozen else None
    if order:
        for name, test in ORDER.items():
            if name in cls.__dict__:
                raise TypeError(f"{cls.__qualname__}: cannot overwrite {name}")
            made[name] = _compare(key, test)
    if frozen:
        if "__setattr__" in cls.__dict__ or "__delattr__" in cls.__dict__:
            raise TypeError(f"{cls.__qualname__}: cannot overwrite __setattr__/__delattr__")
        made.update(_frozen(cls, frozenset(names)))
    for name, method in made.items():
        setattr(cls, name, method)
    return cls


ORDER = {"__lt__": operator.lt, "__le__": operator.le, "__gt__": operator.gt, "__ge__": operator.ge}


def _init(cls: type, spec: _Spec) -> Callable[..., None]:
    names, defaults, factories = spec.names, spec.defaults, spec.factories
    fieldset = frozenset(names)
    count = len(names)
    qualname = cls.__qualname__
    post_init = getattr(cls, "__post_init__", None) is not None

    def bind(args: tuple[object, ...], kwargs: dict[str, object]) -> dict[str, object]:
        """The fields' values, in field order, for any other call (Python's errors)."""
        if len(args) > count:
            raise TypeError(
                f"{qualname}.__init__() takes {count + 1} positional arguments "
                f"but {len(args) + 1} were given"
            )
        values = dict(zip(names, args, strict=False))
        for name, given in kwargs.items():
            if name not in fieldset:
                raise TypeError(
                    f"{qualname}.__init__() got an unexpected keyword argument {name!r}"
                )
            if name in values:
                raise TypeError(f"{qualname}.__init__() got multiple values for argument {name!r}")
            values[name] = given
        ordered: dict[str, object] = {}
        missing: list[str] = []
        for name in names:
            if name in values:
                ordered[name] = values[name]
            elif name in defaults:
                ordered[name] = defaults[name]
            elif name in factories:
                ordered[name] = factories[name]()
            else:
                missing.append(repr(name))
        if missing:
            raise TypeError(
                f"{qualname}.__init__() missing {len(missing)} required positional "
                f"argument{'s' if len(missing) > 1 else ''}: {', '.join(missing)}"
            )
        return ordered

    def __init__(self: Any, *args: object, **kwargs: object) -> None:
        if not kwargs and len(args) == count:  # every field, in order
            self.__dict__.update(zip(names, args, strict=True))
        else:
            self.__dict__.update(bind(args, kwargs))
        if post_init:
            self.__post_init__()

    return __init__


def _repr(shown: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        state = self.__dict__
        inner = ", ".join(f"{name}={state[name]!r}" for name in shown)
        return f"{self.__class__.__qualname__}({inner})"

    return __repr__


def _compare(
    key: Callable[[object], tuple[object, ...]], test: Callable[[Any, Any], object]
) -> Callable[[Any, object], object]:
    def compare(self: Any, other: object) -> object:
        if other.__class__ is self.__class__:
            return test(key(self), key(other))
        return NotImplemented

    return compare


def _hash(key: Callable[[object], tuple[object, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(key(self))

    return __hash__


def _frozen(cls: type, fieldset: frozenset[str]) -> dict[str, object]:
    def __setattr__(self: Any, name: str, given: object) -> None:
        if type(self) is cls or name in fieldset:
            raise _frozen_error(name)
        object.__setattr__(self, name, given)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in fieldset:
            raise _frozen_error(name)
        object.__delattr__(self, name)

    return {"__setattr__": __setattr__, "__delattr__": __delattr__}


if TYPE_CHECKING:

    @overload
    @dataclass_transform(frozen_default=True, field_specifiers=(field,))
    def value(cls: type[_T], /) -> type[_T]: ...
    @overload
    @dataclass_transform(frozen_default=True, field_specifiers=(field,))
    def value(
        *, frozen: bool = True, eq: bool = True, order: bool = False, repr: bool = True
    ) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def value(
    cls: type[_T] | None = None,
    /,
    *,
    frozen: bool = True,
    eq: bool = True,
    order: bool = False,
    repr: bool = True,
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """`@value` is `@dataclass(frozen=True)`; `@value(frozen=False)`, `order=True`,
    `repr=False` and `eq=False` as `dataclass` takes them."""

    def make(cls: type[_T]) -> type[_T]:
        if order and not eq:
            raise ValueError("eq must be true if order is true")
        return _make(cls, frozen, eq, order, repr)

    return make if cls is None else make(cls)
