"""PAIR_WORKER_CONCURRENCY: how many jobs the App's worker runs at once (1-64, default 4), read
with the other settings and handed to the worker the service builds; anything else refused at
start, naming the variable and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import ConfigError
from app.web.app import create_app
from app.web.settings import AppSettings
from tests.web.conftest import SECRET


def settings(tmp_path: Path, value: str | None) -> AppSettings:
    env = {"PAIR_WEBHOOK_SECRET": SECRET}
    if value is not None:
        env["PAIR_WORKER_CONCURRENCY"] = value
    return AppSettings.from_env(env, root=tmp_path)


def test_the_worker_runs_as_many_jobs_at_once_as_the_setting_says(tmp_path: Path) -> None:
    assert settings(tmp_path, None).worker_concurrency == 4
    assert settings(tmp_path, "  ").worker_concurrency == 4  # empty counts as unset
    assert settings(tmp_path, " 8 ").worker_concurrency == 8  # trimmed, as every setting is
    for value, expected in (("1", 1), ("16", 16), ("64", 64)):
        chosen = settings(tmp_path, value)
        assert chosen.worker_concurrency == expected
        worker = create_app(chosen).state.service.worker
        assert worker._concurrency == expected  # what it was built with


@pytest.mark.parametrize("value", ["0", "65", "four", "-1", "2.5", "1e1"])
def test_a_concurrency_out_of_range_is_refused_at_start(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings(tmp_path, value)
    assert f"PAIR_WORKER_CONCURRENCY={value!r} is not allowed" in str(refused.value)
    assert "a whole number from 1 to 64" in str(refused.value)
