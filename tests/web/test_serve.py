"""`pairbot serve`, the installed console script: --dev on embedded defaults, and its refusals."""

from __future__ import annotations

import json
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import httpx

from tests.support.project import PAIRBOT, agent_env, cli
from tests.web.conftest import github_headers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_dev_starts_on_loopback_with_a_generated_secret_and_the_status_page(
    tmp_path: Path,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(PAIRBOT), "--root", str(tmp_path), "serve", "--dev", "--port", str(port)],
        cwd=tmp_path,
        env=agent_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # Healthy once the worker's own process runs (app.web.worker_process): /healthz is
        # 503 ("starting") until then.
        deadline = time.monotonic() + 60
        health = None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                health = httpx.get(url + "/healthz", timeout=5).json()
                if health["status"] == "ok":
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        assert health is not None and health["status"] == "ok", process.communicate(timeout=10)
        assert health["worker"] == "running" and health["restarts"] == 0
        page = httpx.get(url + "/", timeout=5)
        assert page.status_code == 200 and "<h1>Cards</h1>" in page.text
        secret_file = tmp_path / ".pair" / "app" / "webhook-secret"
        assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
        secret = secret_file.read_text().strip()
        assert len(secret) == 64
        body = json.dumps({"zen": "Design for failure.", "hook_id": 1}).encode()
        signed = httpx.post(
            url + "/webhooks/github",
            content=body,
            headers=github_headers("ping", body, secret=secret),
            timeout=10,
        )
        assert signed.status_code == 200
        unsigned = httpx.post(
            url + "/webhooks/github",
            content=body,
            headers={"Content-Type": "application/json", "X-GitHub-Event": "ping"},
            timeout=10,
        )
        assert unsigned.status_code == 401
    finally:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    output = stdout.decode() + stderr.decode()
    assert process.returncode == 130, output  # Ctrl-C, after a graceful shutdown
    assert "Application shutdown complete" in output
    assert str(secret_file) in output and secret not in output
    assert f"serving on {url}/" in output
    assert (tmp_path / ".pair" / "app" / "pairbot.sqlite3").is_file()
    # A second start reuses the secret.
    assert secret_file.read_text().strip() == secret


def test_serve_refuses_to_start_without_a_webhook_secret(tmp_path: Path) -> None:
    result = cli("--root", str(tmp_path), "serve", "--port", str(free_port()), cwd=tmp_path)
    assert result.returncode == 2
    assert "PAIR_WEBHOOK_SECRET is not set" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_dev_binds_loopback_only(tmp_path: Path) -> None:
    result = cli("--root", str(tmp_path), "serve", "--dev", "--host", "0.0.0.0", cwd=tmp_path)  # noqa: S104
    assert result.returncode == 2
    assert "bind a loopback address" in result.stderr


def test_serve_refuses_a_port_out_of_range_as_a_usage_error(tmp_path: Path) -> None:
    for port in ("99999", "0", "-1", "http"):
        result = cli("--root", str(tmp_path), "serve", "--dev", "--port", port, cwd=tmp_path)
        assert result.returncode == 2, (port, result.stderr)
        first = result.stderr.splitlines()[0]
        assert first.startswith("pairbot: argument --port: ") and "1 to 65535" in first
        assert "serving on" not in result.stderr and "Traceback" not in result.stderr


def test_serve_on_a_port_in_use_says_so_in_one_line_and_exits_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("--root", str(tmp_path), "serve", "--dev", "--port", str(port), cwd=tmp_path)
    assert result.returncode == 1, result.stderr  # 3 means "lock held" (docs/cli.md)
    # --dev first names its generated secret's file; the failure is the one line after it.
    *before, line = result.stderr.strip().splitlines()
    assert all("webhook secret" in earlier for earlier in before), result.stderr
    assert "Traceback" not in result.stderr
    assert line == (
        f"pairbot: port {port} on 127.0.0.1 is already in use by another process; stop it, or "
        "choose another port with --port"
    )
    assert not (tmp_path / ".pair" / "app" / "pairbot.sqlite3").exists()
