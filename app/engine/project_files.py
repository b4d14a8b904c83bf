"""Where a project's `.pair/` files live, and how their YAML is read, apart from their models.

The paths, the "not a project" / "no such batch" errors and the YAML dialect; the models that
validate what is read are `app.engine.manifest`'s, which re-exports everything here.

YAML is read with YAML 1.2 booleans (only `true`/`false`), so `prGrouping: off` stays the
string "off" instead of turning into `False` as YAML 1.1 would have it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from app.engine.names import NAME_PATTERN, NAME_RULE
from app.errors import ConfigError, NotInitialisedError, UnknownBatchError

__all__ = [
    "PAIR_DIR",
    "batches_dir",
    "existing_manifest_path",
    "list_batches",
    "manifest_path",
    "pair_dir",
    "read_yaml",
]

PAIR_DIR = ".pair"

# libyaml's parser when PyYAML was built with it (a 1,000-change manifest parses several times
# faster); the resolver override below works on either, since both resolve in Python.
_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Yaml12Loader(_BaseLoader):  # type: ignore[valid-type,misc]
    """SafeLoader with YAML 1.2 booleans: only true/false, never on/off/yes/no."""


_Yaml12Loader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def read_yaml(path: Path) -> Any:
    """The file's YAML document; `ConfigError` naming the file and the place when it is not."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err
    try:
        return yaml.load(text, Loader=_Yaml12Loader)  # noqa: S506  # a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from err


def pair_dir(root: Path) -> Path:
    """`<root>/.pair`, or NotInitialisedError when the project has none."""
    directory = root / PAIR_DIR
    if not directory.is_dir():
        raise NotInitialisedError(
            f"{root} is not a pairbot project: no {PAIR_DIR}/ directory "
            "(run `pairbot init` to create one, or run pairbot from the project root)"
        )
    return directory


def batches_dir(root: Path) -> Path:
    """Where batch manifests live."""
    return root / PAIR_DIR / "batches"


def list_batches(root: Path) -> list[str]:
    """Names of the batches with a manifest, sorted."""
    directory = batches_dir(root)
    if not directory.is_dir():
        return []
    return sorted(p.parent.name for p in directory.glob("*/batch.yaml"))


def manifest_path(root: Path, batch: str) -> Path:
    """The manifest file of `batch` (validating the name first)."""
    if not NAME_PATTERN.match(batch):
        raise UnknownBatchError(f"{batch!r} is not a valid batch name: use {NAME_RULE}")
    return batches_dir(root) / batch / "batch.yaml"


def existing_manifest_path(root: Path, batch: str) -> Path:
    """The manifest of `batch` in a project; the loader's errors when there is none."""
    pair_dir(root)
    path = manifest_path(root, batch)
    if not path.is_file():
        known = list_batches(root)
        raise UnknownBatchError(
            f"no batch named {batch!r} (expected {path}); "
            f"known batches: {', '.join(known) if known else '(none)'}"
        )
    return path
