"""This checkout, what the app layers install from it: setup.cfg's packages and version."""

from __future__ import annotations

import configparser
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def setup_packages(setup_cfg: Path = REPO / "setup.cfg") -> tuple[str, ...]:
    """Top-level packages setup.cfg installs: the one list the images copy."""
    parser = configparser.ConfigParser()
    parser.read(setup_cfg)
    names = parser["options.packages.find"]["include"].split()
    return tuple(n for n in names if n and "." not in n and "*" not in n)


PACKAGES = setup_packages()
PROJECT_FILES = ("setup.cfg", "pyproject.toml", "README.md")


def version() -> str:
    """setup.cfg's version: the images' default tag."""
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    return parser.get("metadata", "version")
