"""The rule for batch and change names, apart from the manifest's models.

A name becomes a directory (`.pair/batches/<batch>/`, `.pair/changes/<change>/`), so it is
never a path. Kept in its own module because the Action's inputs and its state branch check
names long before (or without) any manifest being read: importing the manifest's models would
load pydantic and yaml for a check that is one regular expression.
"""

from __future__ import annotations

import re

__all__ = ["NAME_PATTERN", "NAME_RULE"]

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
NAME_RULE = "lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"
