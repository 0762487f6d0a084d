"""Settings for every `strata` subcommand: command line, then environment, then config file.

Each flag `--some-flag` can also be set as `STRATA_SOME_FLAG` in the environment or as
`some-flag` / `some_flag` in a config file (TOML or JSON) named by `--config` or `STRATA_CONFIG`.
A config file may hold a table per subcommand (`[broker]`, `[historical]`) beside top-level keys
that apply to all of them.
"""

from __future__ import annotations

import argparse
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV_PREFIX = "STRATA_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ConfigError(ValueError):
    """A config file or environment value that cannot be used."""


def env_name(option: str) -> str:
    """`--deep-storage` -> `STRATA_DEEP_STORAGE`."""
    return ENV_PREFIX + option.lstrip("-").replace("-", "_").upper()


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read config file {p}: {e.strerror}") from e
    try:
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(
            f"config file {p} is not valid {'JSON' if p.suffix == '.json' else 'TOML'}: {e}"
        ) from e
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} must hold a table of settings")
    return data


def _long_option(action: argparse.Action) -> str | None:
    longs = [o for o in action.option_strings if o.startswith("--")]
    return longs[0] if longs else None


def _coerce(action: argparse.Action, value: Any, source: str) -> Any:
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ConfigError(f"{source}: expected a boolean, got {value!r}")
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return value if isinstance(value, str) else str(value)


def apply_defaults(
    parser: argparse.ArgumentParser,
    environ: Mapping[str, str],
    config: Mapping[str, Any],
    section: str | None = None,
) -> None:
    """Set the parser's defaults from config (lowest) and environment (higher than config)."""
    merged: dict[str, Any] = {k: v for k, v in config.items() if not isinstance(v, dict)}
    if section and isinstance(config.get(section), dict):
        merged.update(config[section])
    normalized = {k.replace("_", "-").lstrip("-"): v for k, v in merged.items()}
    defaults: dict[str, Any] = {}
    for action in parser._actions:
        option = _long_option(action)
        if option is None or action.dest in ("help", "version", "config"):
            continue
        key = option.lstrip("-")
        if key in normalized:
            defaults[action.dest] = _coerce(action, normalized[key], f"config key {key!r}")
        env = env_name(option)
        if env in environ:
            defaults[action.dest] = _coerce(action, environ[env], f"environment {env}")
    for dest, value in defaults.items():
        action = next(a for a in parser._actions if a.dest == dest)
        if isinstance(value, str) and action.type is not None and callable(action.type):
            try:
                value = action.type(value)
            except (TypeError, ValueError) as e:
                raise ConfigError(f"bad value {value!r} for --{dest.replace('_', '-')}: {e}") from e
        # a default makes a required flag optional
        action.required = False
        action.default = value
