"""podprogram.flagfields: a dataclass's fields as a command line, declared once per field."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from chunkedgraph.job import PartitionJob, add_arguments
from podprogram.argtypes import positive_int
from podprogram.flagfields import (
    add_flags,
    declare,
    every_flag,
    flag,
    flags,
    nested,
    to_argv,
    values,
)


def _path(value: str) -> Path:
    if not value:
        raise ValueError("must not be empty")
    return Path(value)


@dataclass(frozen=True, kw_only=True)
class Settings:
    name: str = flag("--name", required=True, group="what")
    count: int = flag("--count", type=positive_int, default=1, env="COUNT", group="what")
    verbose: bool = flag("--verbose", action="store_true", default=False, env="VERBOSE",
                         read_env=lambda v: v == "yes")  # fmt: skip
    tags: tuple[str, ...] = flag("--tags", nargs="+", default=(), convert=tuple)
    where: Path = flag("--where", default=Path("/w"), convert=_path)
    home: str = flag(env="HOME_DIR", default="/home", read_env=str)
    made: int = 0  # (no flag: the program makes it)


def _parse(argv: list[str], env: dict[str, str] | None = None) -> Settings:
    p = argparse.ArgumentParser(prog="prog")
    add_flags(p, Settings, env)
    return Settings(**values(Settings, p.parse_args(argv), env, p))


def test_the_fields_make_the_parser_and_the_values() -> None:
    s = _parse(["--name", "n", "--tags", "a", "b", "--where", "/x"])
    assert s == Settings(name="n", tags=("a", "b"), where=Path("/x"))
    assert [f.name for f, _ in flags(Settings)] == [
        "name", "count", "verbose", "tags", "where", "home",
    ]  # fmt: skip


def test_a_variable_is_the_default_and_a_flag_wins() -> None:
    env = {"COUNT": "3", "VERBOSE": "yes", "HOME_DIR": "/h"}
    s = _parse(["--name", "n"], env)
    assert (s.count, s.verbose, s.home) == (3, True, "/h")
    assert _parse(["--name", "n", "--count", "5"], env).count == 5
    assert _parse(["--name", "n"], {"COUNT": ""}).count == 1  # (empty: unset)


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--name", "n", "--count", "0"], {}, "argument --count: must be at least 1"),
        (["--name", "n"], {"COUNT": "x"}, "argument --count: 'x' is not an integer"),
        (["--name", "n", "--where", ""], {}, "--where: must not be empty"),
        ([], {}, "the following arguments are required: --name"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_flag(
    argv: list[str], env: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        _parse(argv, env)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_a_bad_variable_alone_names_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    @dataclass(frozen=True)
    class Alone:
        n: int = flag(env="N", default=1, read_env=int)

    p = argparse.ArgumentParser(prog="prog")
    with pytest.raises(SystemExit):
        values(Alone, p.parse_args([]), {"N": "x"}, p)
    assert "$N='x'" in capsys.readouterr().err
    with pytest.raises(ValueError):  # (no parser: the error itself)
        values(Alone, argparse.Namespace(), {"N": "x"})


def test_to_argv_parses_back_to_the_same_value() -> None:
    s = Settings(name="n", count=2, verbose=True, tags=("a",), where=Path("/y"), made=9)
    argv = to_argv(s)
    assert argv == ["--name", "n", "--count", "2", "--verbose", "--tags", "a", "--where", "/y"]
    assert _parse(argv) == Settings(name="n", count=2, verbose=True, tags=("a",), where=Path("/y"))


def test_a_class_declared_elsewhere_by_field_name() -> None:
    @dataclass(frozen=True)
    class Other:
        image: str = "img:1"
        on: bool = False
        made: list[str] = field(default_factory=list)

    declared = {"image": declare("--image"), "on": declare("--on", action="store_true")}
    p = argparse.ArgumentParser()
    add_flags(p, Other, declared=declared)
    assert Other(**values(Other, p.parse_args([]), declared=declared)) == Other()
    got = Other(**values(Other, p.parse_args(["--image", "x", "--on"]), declared=declared))
    assert got == Other(image="x", on=True)


@dataclass(frozen=True)
class Target:
    name: str = ""
    port: int = 80


@dataclass(frozen=True, kw_only=True)
class Outer:
    verbose: bool = flag("--verbose", action="store_true", default=False)
    target: Target = nested(
        Target, {"name": declare(env="TARGET"), "port": declare("--port", type=int)}
    )


def test_a_nested_group_is_made_of_its_flags_and_passed_whole() -> None:
    assert [path for path, _ in every_flag(Outer)] == [
        ("verbose",), ("target", "name"), ("target", "port"),
    ]  # fmt: skip
    p = argparse.ArgumentParser()
    add_flags(p, Outer)
    got = Outer(**values(Outer, p.parse_args(["--port", "8080"]), {"TARGET": "t"}))
    assert got == Outer(target=Target("t", 8080))
    assert Outer(**values(Outer, p.parse_args([]))) == Outer()
    assert to_argv(got) == ["--port", "8080"]  # (a variable alone is no flag)


def test_the_ranks_command_line_reads_back_as_the_job_dglrun_wrote() -> None:
    """chunkedgraph's PartitionJob: argv() and the ranks' parser from the same fields."""
    job = PartitionJob(
        "g", 4, "/c", "PerWorker", ("/a", "/b"), balance_edges=True, feature_files=True,
        seed=3, counts=(2, 8),
    )  # fmt: skip
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert PartitionJob.from_args(p.parse_args(job.argv())) == job


@dataclass(frozen=True, kw_only=True)
class Counts:
    servers: int
    trainers: int


@dataclass(frozen=True, kw_only=True)
class Job:
    name: str = flag("--name", default="j", group="what")
    # declared as the options of a class declared elsewhere: flags, help and defaults, in
    # their own order (not the class's)
    counts: Counts = nested(
        Counts,
        {
            "trainers": flag("--num-trainers", type=positive_int, default=2, group="how"),
            "servers": flag("--num-servers", type=positive_int, default=1, group="how"),
        },
    )
    verbose: bool = flag("--verbose", action="store_true", default=False, group="what")
    # the same class again, other flags: its field names are the first group's too
    other: Counts = nested(
        Counts,
        {
            "servers": declare("--other-servers", type=int),
            "trainers": declare("--other-trainers", type=int),
        },
    )


def test_a_nested_groups_flags_are_where_its_field_is_with_their_declared_defaults() -> None:
    p = argparse.ArgumentParser(prog="prog")
    add_flags(p, Job)
    usage = p.format_usage()
    order = ["--name", "--num-trainers", "--num-servers", "--verbose", "--other-servers"]
    assert [usage.index(f) for f in order] == sorted(usage.index(f) for f in order)
    assert [g.title for g in p._action_groups[2:]] == ["what", "how"]
    # the declarations' defaults make the value, and the nested field's default
    assert Job(**values(Job, p.parse_args(["--other-servers", "3", "--other-trainers", "4"]))) == (
        Job(counts=Counts(servers=1, trainers=2), other=Counts(servers=3, trainers=4))
    )
    assert Job(other=Counts(servers=0, trainers=0)).counts == Counts(servers=1, trainers=2)
    # each flag's value is its own, though the fields' names are the same
    got = values(Job, p.parse_args(["--num-servers", "5", "--other-servers", "6",
                                    "--other-trainers", "7"]))  # fmt: skip
    assert (got["counts"], got["other"]) == (
        Counts(servers=5, trainers=2),
        Counts(servers=6, trainers=7),
    )


def test_a_nested_flag_may_not_set_what_another_sets() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Clash:
        num_servers: int = flag("--servers", type=int, default=1)
        counts: Counts = nested(Counts, {"servers": declare("--num-servers", type=int)})

    with pytest.raises(ValueError, match="--num-servers: another flag sets 'num_servers' too"):
        add_flags(argparse.ArgumentParser(), Clash)


@dataclass(frozen=True, kw_only=True)
class Words:
    words: tuple[str, ...]


def _split(text: str) -> tuple[str, ...]:
    return tuple(text.split())


@dataclass(frozen=True, kw_only=True)
class WithWords:
    w: Words = nested(Words, {"words": flag("--words", default="a b", convert=_split)})


def test_a_nested_default_is_converted_as_parsing_no_flag_would() -> None:
    p = argparse.ArgumentParser()
    add_flags(p, WithWords)
    parsed = WithWords(**values(WithWords, p.parse_args([])))
    assert WithWords() == parsed == WithWords(w=Words(words=("a", "b")))
