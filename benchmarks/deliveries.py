"""The signed `issue_comment` deliveries the command-path and edge benchmarks send.

    made = Deliveries(forge_port, secret)
    requests, ids = made.build(count, command=True, port=app_port)

Each is the corpus's ~16 KB delivery as a raw HTTP/1.1 request with a new delivery id and
comment id, on one of the answering forge's issues, built before any clock starts. A command's
comment (`/pair status`) is stored on the forge first, as on GitHub: the App's job reads it and
reacts to it; a non-command's id is one the App never calls about.
"""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

from benchmarks.answering_forge import COMMENTER, INSTALLATION, ISSUES, NAME, OWNER, add_comments

PAYLOAD = (
    Path(__file__).resolve().parents[1]
    / "tests"
    / "fixtures"
    / "github-webhooks"
    / "issue_comment"
    / "created.with-installation.json"
)


class Deliveries:
    """Distinct signed deliveries, numbered on from the last `build`."""

    def __init__(self, forge_port: int, secret: str) -> None:
        self.template: dict[str, Any] = json.loads(PAYLOAD.read_text())
        self.forge_port = forge_port
        self.secret = secret.encode()
        self.made = 0
        self.next_comment = 90_000_000  # a non-command's id: the App never calls about it

    def build(
        self, count: int, *, command: bool, port: int | None = None
    ) -> tuple[list[bytes], list[int]]:
        """The raw requests (`Host` naming `port` when given), and the comment ids they carry."""
        from app.web.signature import sign  # noqa: PLC0415 - the project, after sys.path

        text = "/pair status" if command else "Thanks, looks good."
        numbers = [1 + (self.made + n) % ISSUES for n in range(count)]
        self.made += count
        if command:
            ids = add_comments(self.forge_port, [(number, text) for number in numbers])
        else:
            ids = list(range(self.next_comment, self.next_comment + count))
            self.next_comment += count
        host = "127.0.0.1" if port is None else f"127.0.0.1:{port}"
        built: list[bytes] = []
        for number, comment in zip(numbers, ids, strict=True):
            payload = copy.deepcopy(self.template)
            payload["repository"]["full_name"] = f"{OWNER}/{NAME}"
            payload["installation"]["id"] = INSTALLATION
            payload["issue"]["number"] = number
            payload["comment"]["id"] = comment
            payload["comment"]["user"]["login"] = COMMENTER
            payload["comment"]["body"] = text
            body = json.dumps(payload).encode()
            head = (
                "POST /webhooks/github HTTP/1.1\r\n"
                f"Host: {host}\r\n"
                "User-Agent: GitHub-Hookshot/benchmark\r\n"
                "Content-Type: application/json\r\n"
                "X-GitHub-Event: issue_comment\r\n"
                f"X-GitHub-Delivery: {uuid.uuid4()}\r\n"
                f"X-Hub-Signature-256: {sign(self.secret, body)}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            built.append(head.encode() + body)
        return built, ids
