"""memsync's loggers, and its logging configuration, without `logging` until it is used.

A one-shot `status` or `sync-now` usually writes no log record at all, yet importing
`logging` (and `traceback`, `tokenize`, `textwrap`, `string` with it) cost it about a
twentieth of its time (issue 18). So:

- `logger(name)` is a stand-in for `logging.getLogger(name)`: while `logging` is not
  loaded, a record below the level the process logs at (`WARNING`, `logging`'s own default,
  unless a deferred configuration says otherwise) is dropped here, as the real logger would
  drop it; any other call loads `logging` and is the real logger's (the record names the
  caller, not this module).
- `when_loaded(action, level)` runs a logging configuration (`cli.app.setup_logging`) once
  `logging` is loaded, whoever loads it (a stand-in, a library, a module of memsync that
  imports it): at once when it is loaded already, else right after the module has run, before
  its importer goes on. No record can be made before it, so every record goes through it,
  as when it ran at the start. `level`: the lowest level it lets memsync's records through.
  The configuration is `logsetup`'s code: when `logsetup` itself loads `logging`, it runs
  once `logsetup` has loaded (its last line, `run_pending`), not halfway through it.
"""

from __future__ import annotations

import sys
from _thread import RLock

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec
    from logging import Logger
    from types import ModuleType
    from typing import Any

DEBUG = 10  # logging.DEBUG
WARNING = 30  # logging.WARNING: what an unconfigured `logging` lets through

# The lowest level of a record not dropped while `logging` is unloaded (the configuration's).
_level = [WARNING]
_pending: list[Callable[[], None]] = []


class LazyLogger:
    """`logging.getLogger(name)`, loaded when a record may be written (see the module)."""

    __slots__ = ("_real", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._real: Logger | None = None

    def real(self) -> Logger:
        """The logger itself (loads `logging`)."""
        if self._real is None:
            import logging  # noqa: PLC0415 - the point of this module

            self._real = logging.getLogger(self.name)
        return self._real

    def _log(self, level: int, msg: object, args: Sequence[object], kwargs: dict[str, Any]) -> None:
        if self._real is None and level < _level[0] and "logging" not in sys.modules:
            return  # no configuration, nor `logging`, would let it through
        # The record names the caller of `debug` (or `info`...), two frames up from here.
        stacklevel = kwargs.pop("stacklevel", 1) + 2
        self.real().log(level, msg, *args, stacklevel=stacklevel, **kwargs)

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log(10, msg, args, kwargs)

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log(20, msg, args, kwargs)

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log(30, msg, args, kwargs)

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log(40, msg, args, kwargs)

    def exception(self, msg: object, *args: object, **kwargs: Any) -> None:
        kwargs.setdefault("exc_info", True)
        self._log(40, msg, args, kwargs)


def logger(name: str) -> LazyLogger:
    """The stand-in for `logging.getLogger(name)`."""
    return LazyLogger(name)


def when_loaded(action: Callable[[], None], level: int | None = None) -> None:
    """Run `action` (a logging configuration; letting memsync's records of `level` and up
    through, when it says) now if `logging` is loaded, else as soon as it is."""
    with _LOCK:  # (no import of `logging` on another thread between the test and the hook)
        if level is not None:
            _level[0] = level
        deferred = "logging" not in sys.modules
        if deferred:
            _pending.append(action)
            if _HOOK not in sys.meta_path:
                sys.meta_path.insert(0, _HOOK)
    if not deferred:
        action()


def run_pending() -> None:
    """Run the deferred configuration (`logging` is loaded), in the order it was deferred.
    A call made while the configuration runs (`logsetup`'s last line, when the configuration
    is what imports it) returns at once: the call already running goes on down the list."""
    with _LOCK:
        if _running[0]:
            return
        _running[0] = True
    try:
        while True:
            with _LOCK:
                if not _pending:
                    return
                action = _pending.pop(0)
            action()
    finally:
        with _LOCK:
            _running[0] = False


# The module whose code the configuration runs, and which calls `run_pending` as it ends.
_CONFIGURER = "memsync.logsetup"


class _Hook:
    """A finder that finds nothing itself: when `logging` is about to load, it hands out
    the spec the other finders give, with a loader that runs the pending configuration
    right after the module has run. It stays on `sys.meta_path` until then: a mere look for
    `logging` (`importlib.util.find_spec`) loads nothing, and the import that follows must
    still find it."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "logging":
            return None
        spec: ModuleSpec | None = None
        for finder in list(sys.meta_path):
            find = None if finder is self else getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is not None and spec.loader is not None:
            spec.loader = _Then(spec.loader)  # type: ignore[assignment] # a loader by its methods
        return spec


_HOOK = _Hook()
_LOCK = RLock()
_running = [False]


class _Then:
    """A loader: `loader`'s module, then the pending configuration."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        with _LOCK:
            if _HOOK in sys.meta_path:
                sys.meta_path.remove(_HOOK)
        configurer = sys.modules.get(_CONFIGURER)
        if configurer is None or getattr(configurer, "LOADED", False):
            run_pending()  # else `logging` is its import: it runs them as it ends
