"""The shape of what `pip install` puts into site-packages (issue 39): one namespace beside the
design card's four packages, and modules short enough to read in one sitting."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = {"strata", "broker_service", "historical_service", "timeline", "cache"}
MAX_MODULE_LINES = 450


def installed_packages() -> list[str]:
    """The packages a wheel holds, found as setuptools finds them from pyproject.toml."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return find_packages(str(ROOT), include=include)


def test_an_install_holds_one_namespace_and_the_cards_four_packages() -> None:
    top_level = {name.split(".")[0] for name in installed_packages()}
    assert top_level == INSTALLED


def test_every_package_directory_is_installed() -> None:
    """A folder of modules under an installed package that the wheel would leave out fails here."""
    packages = set(installed_packages())
    missing = [
        str(init.parent.relative_to(ROOT))
        for top in INSTALLED
        for init in (ROOT / top).rglob("__init__.py")
        if ".".join(init.parent.relative_to(ROOT).parts) not in packages
    ]
    assert not missing


def test_no_module_is_longer_than_one_sitting() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for top in INSTALLED
        for path in sorted((ROOT / top).rglob("*.py"))
        if (lines := path.read_text().count("\n")) > MAX_MODULE_LINES
    }
    assert not long, f"split these where their concepts part (at most {MAX_MODULE_LINES} lines): {long}"
