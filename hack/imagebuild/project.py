"""This checkout, what the app layers install from it: setup.cfg's packages and version."""

from __future__ import annotations

import configparser
from pathlib import Path

import packages

REPO = Path(__file__).resolve().parents[2]

# The product's top-level packages (setup.cfg's, read by hack/packages.py): what the images copy
PACKAGES = packages.product(REPO)
PROJECT_FILES = ("setup.cfg", "pyproject.toml", "README.md")


def version() -> str:
    """setup.cfg's version: the images' default tag."""
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    return parser.get("metadata", "version")
