"""Secret references (`{env: NAME}`, `{file: PATH}`, `{credential: NAME}`, `{value: "..."}`).

A secret is parsed into a `SecretRef` when the configuration is validated and only read by
`resolve` at the moment it is needed, so a changed token file is picked up on the next use.
Neither errors nor `repr`/`str` of a reference ever contain the secret itself.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from memsync.errors import SecretError
from memsync.regularfile import NotRegularFile, read_regular

if TYPE_CHECKING:  # pydantic is imported by the schema, not by a reader of these references
    from pydantic import GetCoreSchemaHandler, ValidationInfo
    from pydantic_core import core_schema

SecretKind = Literal["env", "file", "credential", "value"]
SECRET_KINDS: tuple[SecretKind, ...] = ("env", "file", "credential", "value")
REFERENCE_FORMS = '{env: NAME}, {file: PATH}, {credential: NAME} or {value: "..."}'

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CREDENTIAL_NAME = re.compile(r"[A-Za-z0-9_.@:-]+")
_REDACTED = "********"
MAX_HEADER_SECRET = 4096
# What a token sent in an HTTP header may hold: visible ASCII, no spaces, bounded.
_HEADER_SECRET = re.compile(rf"[\x21-\x7e]{{1,{MAX_HEADER_SECRET}}}")
MAX_SECRET_BYTES = 64 * 1024  # a token or a key is well under 1 KiB


@dataclass(frozen=True, repr=False)
class SecretRef:
    """Where a secret lives. `ref` is a variable name, a file path, a credential name, or,
    for `value`, the secret itself (which is why `repr` and `str` hide it)."""

    kind: SecretKind
    ref: str

    def describe(self) -> str:
        """Name the reference for a person, without the secret."""
        if self.kind == "env":
            return f"environment variable {self.ref}"
        if self.kind == "file":
            return f"secret file {self.ref}"
        if self.kind == "credential":
            return f"systemd credential {self.ref}"
        return "inline secret value"

    def __repr__(self) -> str:
        shown = _REDACTED if self.kind == "value" else repr(self.ref)
        return f"SecretRef({self.kind}={shown})"

    def __str__(self) -> str:
        shown = _REDACTED if self.kind == "value" else self.ref
        return f"{{{self.kind}: {shown}}}"

    @classmethod
    def parse(cls, data: object, base_dir: Path | None = None) -> SecretRef:
        """Build a reference from its YAML mapping; raise ValueError (never echoing it)."""
        if isinstance(data, SecretRef):
            return data
        if isinstance(data, str):
            raise ValueError(f"a secret cannot be a plain string; use {REFERENCE_FORMS}")
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a secret reference: {REFERENCE_FORMS}")
        keys = [key for key in data if key in SECRET_KINDS]
        unknown = sorted(str(key) for key in data if key not in SECRET_KINDS)
        if unknown:
            raise ValueError(
                f"unknown key(s) {', '.join(unknown)} in secret reference; use {REFERENCE_FORMS}"
            )
        if len(keys) != 1:
            raise ValueError(f"a secret reference has exactly one key: {REFERENCE_FORMS}")
        kind: SecretKind = keys[0]
        ref = data[kind]
        if not isinstance(ref, str) or not ref:
            raise ValueError(f"secret reference '{kind}' needs a non-empty string")
        if kind == "env" and not _ENV_NAME.fullmatch(ref):
            raise ValueError(
                "invalid environment variable name (letters, digits and '_', "
                "not starting with a digit)"
            )
        if kind == "credential" and (not _CREDENTIAL_NAME.fullmatch(ref) or ref in {".", ".."}):
            raise ValueError("invalid credential name (a file name: letters, digits, '_.@:-')")
        if kind == "file":
            if "\x00" in ref:
                raise ValueError("a secret file path cannot contain a NUL character")
            try:
                path = Path(ref).expanduser()
            except RuntimeError:
                raise ValueError(
                    "cannot expand the home directory in the secret file path"
                ) from None
            if not path.is_absolute():
                path = (base_dir or Path.cwd()) / path
            ref = str(path)
        return cls(kind, ref)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        from pydantic_core import core_schema  # noqa: PLC0415 - only while the schema builds

        def validate(data: object, info: ValidationInfo) -> SecretRef:
            context = info.context if isinstance(info.context, Mapping) else {}
            base_dir = context.get("base_dir")
            return cls.parse(data, base_dir if isinstance(base_dir, Path) else None)

        def serialize(ref: SecretRef) -> dict[str, str]:
            return {ref.kind: _REDACTED if ref.kind == "value" else ref.ref}

        return core_schema.with_info_plain_validator_function(
            validate,
            json_schema_input_schema=core_schema.dict_schema(
                core_schema.literal_schema(list(SECRET_KINDS)),
                core_schema.str_schema(min_length=1),
                min_length=1,
                max_length=1,
            ),
            serialization=core_schema.plain_serializer_function_ser_schema(serialize),
        )


def resolve(ref: SecretRef, *, environ: Mapping[str, str] | None = None) -> str:
    """Read the secret now. Raise SecretError naming the reference, never the secret."""
    env = os.environ if environ is None else environ
    if ref.kind == "value":
        return ref.ref
    if ref.kind == "env":
        secret = env.get(ref.ref)
        if secret is None:
            raise SecretError(
                f"environment variable {ref.ref} is not set",
                hint=f"export {ref.ref} in the environment memsync runs in",
            )
        if not secret:
            raise SecretError(f"environment variable {ref.ref} is empty")
        return secret
    if ref.kind == "credential":
        directory = env.get("CREDENTIALS_DIRECTORY")
        if not directory:
            raise SecretError(
                f"systemd credential {ref.ref}: $CREDENTIALS_DIRECTORY is not set",
                hint=f"add LoadCredential={ref.ref}:PATH to the unit, or use {{file: PATH}}",
            )
        return _read_file(Path(directory) / ref.ref, ref.describe())
    return _read_file(Path(ref.ref), ref.describe())


def resolve_header(
    ref: SecretRef, *, where: str | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """Read a secret that goes into an HTTP header (a hub, view server or API token).

    As `resolve` (a file loses one trailing line break), and then it must be printable
    ASCII without spaces, at most `MAX_HEADER_SECRET` characters: a line break or control
    character left inside (a file ending in two newlines, say) is a SecretError naming
    `where` (the config key) and the reference, never the value.
    """
    secret = resolve(ref, environ=environ)
    if not _HEADER_SECRET.fullmatch(secret):
        prefix = f"{where}: " if where else ""
        raise SecretError(
            f"{prefix}{ref.describe()} is not usable as a token: it holds a line break, a "
            f"space, a control or non-ASCII character, or is over {MAX_HEADER_SECRET} "
            "characters",
            hint="a token is one line of printable ASCII; rewrite the secret without the "
            "extra characters",
        )
    return secret


def _read_file(path: Path, what: str) -> str:
    """A secret file's text: a regular file only (a FIFO never blocks the read), bounded."""
    try:
        raw = read_regular(path, MAX_SECRET_BYTES)
    except FileNotFoundError:
        raise SecretError(f"{what}: {path} does not exist") from None
    except NotRegularFile as exc:
        raise SecretError(f"{what}: {path} is {exc.kind}, not a regular file") from None
    except OSError as exc:
        raise SecretError(f"{what}: cannot read {path}: {exc.strerror}") from exc
    if len(raw) > MAX_SECRET_BYTES:
        raise SecretError(
            f"{what}: {path} is larger than {MAX_SECRET_BYTES // 1024} KiB; "
            "a secret file holds one token or key"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SecretError(f"{what}: {path} is not UTF-8 text") from None
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if not text:
        raise SecretError(f"{what}: {path} is empty")
    return text
