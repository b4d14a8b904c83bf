"""Where a project's `.pair/` files live, and how their YAML is read, apart from their models.

The paths, the "not a project" / "no such batch" errors and the YAML dialect; the models that
validate what is read are `app.engine.manifest`'s, which re-exports everything here.

YAML is read with YAML 1.2 booleans (only `true`/`false`), so `prGrouping: off` stays the
string "off" instead of turning into `False` as YAML 1.1 would have it. PyYAML loads with the
first file read, not with this module: an agent's report finds its manifest here and may not
need to parse it (app.engine.known_keys).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from app.engine.names import NAME_PATTERN, NAME_RULE
from app.errors import ConfigError, NotInitialisedError, UnknownBatchError

__all__ = [
    "PAIR_DIR",
    "batches_dir",
    "existing_manifest_path",
    "list_batches",
    "manifest_path",
    "pair_dir",
    "parse_yaml",
    "read_yaml",
]

PAIR_DIR = ".pair"


@functools.cache
def _yaml12_loader() -> Any:
    """SafeLoader with YAML 1.2 booleans: only true/false, never on/off/yes/no (built once, on
    the first read)."""
    import yaml  # noqa: PLC0415  # with the first file read (see the module docstring)

    # libyaml's parser when PyYAML was built with it (a 1,000-change manifest parses several
    # times faster); the resolver override works on either, since both resolve in Python.
    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader: Any = type("_Yaml12Loader", (base,), {"__doc__": _yaml12_loader.__doc__})
    loader.yaml_implicit_resolvers = {
        key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()
    }
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool",
        re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
        list("tTfF"),
    )
    return loader


def read_yaml(path: Path) -> Any:
    """The file's YAML document; `ConfigError` naming the file and the place when it is not."""
    return parse_yaml(path, path.read_bytes())


def parse_yaml(path: Path, data: bytes) -> Any:
    """The YAML document `data` (the bytes of the file `path`, which the errors name)."""
    import yaml  # noqa: PLC0415  # see the module docstring

    try:
        # Line ends as a text-mode read gives them (universal newlines), byte for byte.
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err
    try:
        return yaml.load(text, Loader=_yaml12_loader())  # noqa: S506  # a SafeLoader subclass
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
