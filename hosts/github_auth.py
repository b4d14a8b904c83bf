"""Deprecated import path, kept only for `tests/support/github_server.py`: use
`hosts.github.auth` (and `hosts.secrets` for `Secrets`). Remove once nothing imports it."""

from hosts.github.auth import basic_credential

__all__ = ["basic_credential"]
