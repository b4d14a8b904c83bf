"""What an agent's report may name (its batch's changes and phases), from the engine's check.

`pairbot batch report` refuses a change or phase its batch does not have, which means
validating the batch's manifest: pydantic and the models of the manifest and the settings are
most of what a report costs to start. The engine has just validated that manifest when it
starts an agent's step, so it hands the result on in the agent's environment
(`PAIR_MANIFEST_KEYS`, built by `memo_for`): pairbot's version, the SHA-256 of the manifest's
bytes it validated, and the names. The report reads its manifest's bytes again and takes the
names from there only when they hash the same under the same pairbot version
(`keys_from_memo`); anything else (the manifest edited since, as a decomposition step does,
another batch's file, another version, a malformed or missing variable) validates the manifest
as before. A manifest's validation depends on its bytes and pairbot's code alone, so the names
and every refusal are the ones validating would give (tests/cycle/test_report_keys.py).

    memo_for(path, data) -> str | None          the variable's value for the manifest `path`
                                                whose bytes are `data`; None when it is invalid
                                                (or its names too many for an environment)
    keys_from_memo(path, memo) -> list | None   the names, when `memo` is for `path`'s bytes

Only `memo_for` needs the manifest's models; this module imports them inside it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from app import __version__
from app.errors import UserError

ENV = "PAIR_MANIFEST_KEYS"
# Linux caps one environment string at 128 KiB (MAX_ARG_STRLEN), and the environment shares
# ARG_MAX with the agent's command line: a batch whose names would pass this gets no memo, and
# its reports validate the manifest as before.
MAX_LENGTH = 16 * 1024


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def memo_for(path: Path, data: bytes) -> str | None:
    """`version sha256 name…` for the manifest `path` whose bytes are `data`, every change
    then every phase, as the report lists them; None when those bytes do not validate."""
    from app.engine.manifest import validate_manifest  # noqa: PLC0415  # see the docstring
    from app.engine.project_files import parse_yaml  # noqa: PLC0415

    try:
        manifest = validate_manifest(path, parse_yaml(path, data))
    except UserError:
        return None  # the report validates for itself and says what is wrong
    names = [*manifest.change_names, *(phase.name for phase in manifest.phases)]
    memo = " ".join([__version__, _digest(data), *names])
    return memo if len(memo) <= MAX_LENGTH else None


def keys_from_memo(path: Path, memo: str) -> list[str] | None:
    """The names `memo` carries when it was made by this pairbot version for exactly the bytes
    `path` holds now; None otherwise (the caller validates the manifest)."""
    parts = memo.split(" ")
    if len(parts) < 3 or parts[0] != __version__ or len(parts[1]) != 64:
        return None
    digest, names = parts[1], parts[2:]
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return names if _digest(data) == digest else None
