"""A dataclass as a command line. Each field that a flag (or only an environment variable)
sets says so once, in its metadata (:func:`flag`): its names, help, type, default, argparse
group, and the environment variable that gives its default. The rest follows from the fields:

- :func:`add_flags`: the flags on an argparse parser, their defaults from the environment;
- :func:`values`: the fields' values from what argparse parsed (and the environment), by
  field name, for the dataclass's constructor;
- :func:`to_argv`: an instance as the command line that parses back to it;
- :func:`nested`: a field that is a dataclass of flags itself, made of them (a group of
  settings passed on whole); its flags take their place among the others (``--help``'s
  order is the fields'), and a class declared elsewhere gets its flags, and their defaults,
  from the declarations.

    @dataclass(frozen=True, kw_only=True)
    class Settings:
        workers: int = flag("--workers", type=positive_int, default=4, help="...")

    add_flags(parser, Settings, os.environ)
    settings = Settings(**values(Settings, parser.parse_args(argv), os.environ, parser))

Standard library only, like the rest of podprogram.
"""

from __future__ import annotations

import argparse
import builtins
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass
from typing import Any

KEY = "podprogram.flag"  # the metadata key of a field's Flag
NESTED = "podprogram.flag.nested"  # ... of a field that is a dataclass of flags itself


@dataclass(frozen=True)
class Flag:
    """How one field is set: ``names`` (none: by ``env`` alone) and argparse's arguments.
    ``env``: the variable whose value, when set and not empty, is the default (as text,
    through ``type``; ``read_env`` reads it instead, for a switch or a variable alone).
    ``convert``: argparse's value to the field's (not called on None; a ValueError is a
    usage error naming the flag). ``skip_default``: :func:`to_argv` leaves the flag out at
    its default."""

    names: tuple[str, ...]
    help: str | None = None
    type: Callable[[str], Any] | None = None
    choices: Sequence[str] | None = None
    action: str | builtins.type[argparse.Action] | None = None
    nargs: str | None = None
    metavar: str | None = None
    required: bool = False
    group: str | None = None
    env: str | None = None
    read_env: Callable[[str], Any] | None = None
    convert: Callable[[Any], Any] | None = None
    skip_default: bool = False  # to_argv writes nothing when the value is the default

    @property
    def name(self) -> str:
        """The name errors say: the first long one."""
        return next((n for n in self.names if n.startswith("--")), self.names[0])

    @property
    def dest(self) -> str:
        """argparse's own name for the value (``--num-servers``: ``num_servers``): a nested
        field's, whose own name may be another group's too."""
        return self.name.lstrip("-").replace("-", "_")


def declare(*names: str, **how: Any) -> Flag:
    """The Flag of a field declared apart from its dataclass (``declared`` below)."""
    return Flag(tuple(names), **how)


def flag(
    *names: str,
    default: Any = MISSING,
    default_factory: Callable[[], Any] | Any = MISSING,
    **how: Any,
) -> Any:
    """A dataclass field set by the flag ``names`` (see :class:`Flag` for ``how``); without
    names, by its environment variable alone."""
    meta = {KEY: Flag(tuple(names), **how)}
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


# field name -> its Flag, for a dataclass declared elsewhere; or the field as :func:`flag`
# makes it, whose default (when it has one) is the value's default instead of the class's;
# or a group of them, as :func:`nested` makes it
Declared = Mapping[str, "Flag | dataclasses.Field[Any]"]


def nested(cls: type, declared: Declared | None = None) -> Any:
    """A field whose value is the dataclass ``cls``, made of its own flags (``declared``: its
    Flags by field name, when its fields carry none): they join the parser where the field
    is, and :func:`values` makes the value of them; its default is made of their defaults
    (converted, as parsing no flag would)."""

    def made() -> Any:
        out = {}
        for f, fl, _ in _in_order(cls, declared):
            value = _default(f, declared)
            if fl is not None and fl.convert is not None and value is not None:
                value = fl.convert(value)
            out[f.name] = value
        return cls(**out)

    return dataclasses.field(default_factory=made, metadata={NESTED: (cls, declared)})


def _flag(declaration: Flag | dataclasses.Field[Any]) -> Flag:
    return declaration if isinstance(declaration, Flag) else declaration.metadata[KEY]


def _nested(
    cls: type, declared: Declared | None = None
) -> list[tuple[dataclasses.Field[Any], type, Declared | None]]:
    return [(f, *sub) for f, _, sub in _in_order(cls, declared) if sub is not None]


def every_flag(cls: type, declared: Declared | None = None) -> list[tuple[tuple[str, ...], Flag]]:
    """Every Flag of ``cls`` and of its nested fields, with the path of field names to it."""
    out: list[tuple[tuple[str, ...], Flag]] = [((f.name,), fl) for f, fl in flags(cls, declared)]
    for f, sub, subdeclared in _nested(cls, declared):
        out += [((f.name, *path), fl) for path, fl in every_flag(sub, subdeclared)]
    return out


def flags(cls: type, declared: Declared | None = None) -> list[tuple[dataclasses.Field[Any], Flag]]:
    """``cls``'s fields that declare a Flag, in order (``declared``: the Flags of a class
    whose fields carry none, by field name, in the declarations' order)."""
    return [(f, fl) for f, fl, _ in _in_order(cls, declared) if fl is not None]


def _default(f: dataclasses.Field[Any], declared: Declared | None = None) -> Any:
    """The field's default: its declaration's, when it has one, else the class's."""
    for source in (declared.get(f.name) if declared else None, f):
        if isinstance(source, dataclasses.Field):
            if source.default is not MISSING:
                return source.default
            if source.default_factory is not MISSING:
                return source.default_factory()
    return None


_Slot = tuple[dataclasses.Field[Any], Flag | None, tuple[type, Declared | None] | None]


def _in_order(cls: type, declared: Declared | None) -> list[_Slot]:
    """``cls``'s flags and nested fields, in the order of their declarations (its fields',
    or ``declared``'s): a field with its Flag, or with the class (and declarations) it
    nests."""
    found: list[tuple[dataclasses.Field[Any], Flag | dataclasses.Field[Any]]]
    if declared is None:
        found = [
            (f, f) for f in dataclasses.fields(cls) if KEY in f.metadata or NESTED in f.metadata
        ]
    else:
        by_name = {f.name: f for f in dataclasses.fields(cls)}
        found = [(by_name[name], d) for name, d in declared.items()]
    return [
        (f, None, d.metadata[NESTED])
        if isinstance(d, dataclasses.Field) and NESTED in d.metadata
        else (f, _flag(d), None)
        for f, d in found
    ]


def add_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    env: Mapping[str, str] | None = None,
    declared: Declared | None = None,
) -> None:
    """Every flag of ``cls`` on ``parser``, a nested group's where its field is (each in its
    argparse group, the groups in the order of their first flag); a flag's default is its
    variable's value in ``env`` when set."""
    _add_flags(parser, cls, env or {}, declared, {None: parser}, inner=False)


def _add_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    env: Mapping[str, str],
    declared: Declared | None,
    groups: dict[str | None, Any],
    inner: bool,
) -> None:
    for f, fl, sub in _in_order(cls, declared):
        if sub is not None:
            _add_flags(parser, sub[0], env, sub[1], groups, inner=True)
            continue
        assert fl is not None
        if not fl.names:
            continue
        if fl.group not in groups:
            groups[fl.group] = parser.add_argument_group(fl.group)
        default = _default(f, declared)
        given = env.get(fl.env) if fl.env else None
        if given:
            default = fl.read_env(given) if fl.read_env else given
        dest = fl.dest if inner else f.name
        if any(action.dest == dest for action in parser._actions):
            raise ValueError(f"{fl.name}: another flag sets {dest!r} too")
        kw: dict[str, Any] = {"dest": dest, "default": default, "help": fl.help}
        if fl.required:
            kw["required"] = True
        for key in ("type", "choices", "action", "nargs", "metavar"):
            if getattr(fl, key) is not None:
                kw[key] = getattr(fl, key)
        groups[fl.group].add_argument(*fl.names, **kw)


def values(
    cls: type,
    namespace: argparse.Namespace,
    env: Mapping[str, str] | None = None,
    parser: argparse.ArgumentParser | None = None,
    declared: Declared | None = None,
) -> dict[str, Any]:
    """The value of every field of ``cls`` that declares a Flag: the flag's (converted), or
    for a variable alone, ``read_env`` of its value in ``env`` (else the field's default). A
    ValueError is ``parser.error`` naming the flag or the variable (raised without a
    parser)."""
    return _values(cls, namespace, env or {}, parser, declared, inner=False)


def _values(
    cls: type,
    namespace: argparse.Namespace,
    env: Mapping[str, str],
    parser: argparse.ArgumentParser | None,
    declared: Declared | None,
    inner: bool,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f, fl in flags(cls, declared):
        if fl.names:
            value = getattr(namespace, fl.dest if inner else f.name)
        else:
            given = env.get(fl.env) if fl.env else None
            try:
                value = (fl.read_env or str)(given) if given else _default(f, declared)
            except ValueError as e:
                if parser is None:
                    raise
                parser.error(f"${fl.env}={given!r}: {e}")
        if fl.convert is not None and value is not None:
            try:
                value = fl.convert(value)
            except ValueError as e:
                if parser is None:
                    raise
                parser.error(f"{fl.name}: {e}")
        out[f.name] = value
    for f, sub, subdeclared in _nested(cls, declared):
        out[f.name] = sub(**_values(sub, namespace, env, parser, subdeclared, inner=True))
    return out


def to_argv(obj: Any, declared: Declared | None = None) -> list[str]:
    """The flags that give ``obj`` its values: a switch when on, a list as its items after
    the flag (nothing when empty), None as nothing, anything else as ``str``."""
    argv: list[str] = []
    for f, fl in flags(type(obj), declared):
        if not fl.names:
            continue
        value = getattr(obj, f.name)
        if fl.skip_default and value == _default(f, declared):
            continue
        if fl.action == "store_true":
            argv += [fl.name] if value else []
        elif fl.nargs is not None:
            argv += [fl.name, *map(str, value)] if value else []
        elif value is not None:
            argv += [fl.name, str(value)]
    for f, _, subdeclared in _nested(type(obj), declared):
        argv += to_argv(getattr(obj, f.name), subdeclared)
    return argv
