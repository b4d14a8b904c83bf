"""Run the Azure Pipelines entry (`python -m action.azure`) as a pipeline job runs it.

`Pipeline.run` makes each run's checkout as `checkout: self` does on a hosted agent
(tests/support/checkouts.py: a detached HEAD at BUILD_SOURCEVERSION), sets the job's predefined
variables and its token, and runs the entry in it against the loopback fake Azure DevOps,
optionally as another OS user (a posture of tests/support/postures.py);
`workitem_commented` is the notification a `resources: webhooks` run hands the entry.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.cycle.azure_harness import TOKEN, AzureCardProject, _remote
from tests.support.checkouts import azure_checkout_self, is_detached
from tests.support.fake_azure import PROJECT, REPO, FakeAzureDevOps
from tests.support.git import git
from tests.support.postures import Posture
from tests.support.project import agent_env


class Pipeline:
    """Runs of one pipeline: each on a fresh `checkout: self`, as a hosted agent starts."""

    def __init__(
        self,
        tmp: Path,
        fake: FakeAzureDevOps,
        project: AzureCardProject,
        *,
        fetch_depth: int = 1,
        persist_credentials: bool = False,
        as_user: Posture | None = None,
    ) -> None:
        """`as_user`: the agent's user runs the job (tests/support/postures.py); None: this
        test's own user."""
        self.tmp, self.fake, self.project = tmp, fake, project
        self.fetch_depth, self.persist_credentials = fetch_depth, persist_credentials
        self.as_user = as_user
        self.runs = 0
        self.logs: list[str] = []

    def run(
        self,
        reason: str,
        payload: dict[str, Any] | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        self.runs += 1
        # The job's `checkout: self` of the branch it builds (a schedule's or a service hook's
        # run builds the default branch), at the commit the run was queued for. The fake takes
        # Basic only; Azure Repos' own header is `bearer <System.AccessToken>`.
        made = azure_checkout_self(
            _remote(self.fake),
            self.tmp / f"s{self.runs}",
            branch="main",
            authorization="Basic " + base64.b64encode(f":{self.fake.token}".encode()).decode(),
            fetch_depth=self.fetch_depth,
            persist_credentials=self.persist_credentials,
            source_version=git(self.fake.repo, "rev-parse", "main"),
        )
        checkout = made.path
        assert is_detached(checkout), "checkout: self leaves a detached HEAD"
        temp = self.tmp / f"t{self.runs}"
        temp.mkdir()
        env = agent_env(
            {
                "TF_BUILD": "True",
                "SYSTEM_COLLECTIONURI": f"{self.fake.base_url}/",
                "SYSTEM_TEAMPROJECT": PROJECT,
                "BUILD_REPOSITORY_NAME": REPO,
                "BUILD_REASON": reason,
                **made.env,  # BUILD_SOURCEVERSION, BUILD_SOURCEBRANCH, BUILD_SOURCESDIRECTORY…
                "BUILD_BUILDID": str(100 + self.runs),
                "AGENT_TEMPDIRECTORY": str(temp),
                "SYSTEM_ACCESSTOKEN": TOKEN,
                "AZURE_DEVOPS_CACHE_DIR": str(self.project.cache),
                "PAIR_TEST_AGENT_DIR": str(self.project.scratch),
                **(extra_env or {}),
            }
        )
        if payload is not None:
            path = temp / "webhook.json"
            path.write_text(json.dumps(payload))
            env["PAIR_WEBHOOK_PAYLOAD_PATH"] = str(path)
        argv = [sys.executable, "-m", "action.azure"]
        if self.as_user is not None:
            # The agent's user owns the job's checkout and temp directory, as the agent's
            # checkout leaves them; the environment is built from nothing but the job's
            # (tests/support/postures.py: no coverage hook).
            self.as_user.own(checkout, temp)
            argv, env = self.as_user.job(argv, env)
        done = subprocess.run(
            argv,
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        log = done.stdout + done.stderr
        self.logs.append(log)
        assert "Traceback" not in log, log
        local = git(checkout, "-c", "safe.directory=*", "config", "--local", "--list")
        assert "extraheader" not in local, "persisted"
        assert is_detached(checkout), "pairbot moved the pipeline's checkout"
        return done.returncode, done.stdout

    @staticmethod
    def status(stdout: str) -> str:
        last = [line for line in stdout.splitlines() if line.startswith("pairbot: ")][-1]
        return last.split()[1]


def workitem_commented(
    fake: FakeAzureDevOps, card: int, html: str, notification: str
) -> dict[str, Any]:
    """The `workitem.commented` notification of a comment the maintainer just posted."""
    who = fake.human
    return {
        "id": notification,
        "eventType": "workitem.commented",
        "publisherId": "tfs",
        "resource": {
            "id": card,
            "rev": 3,
            "fields": {
                "System.TeamProject": PROJECT,
                "System.WorkItemType": "User Story",
                "System.ChangedBy": {
                    "displayName": who.display_name,
                    "uniqueName": who.author.login,
                    "id": who.author.id,
                },
                "System.History": html,
            },
            "url": f"{fake.base_url}/_apis/wit/workItems/{card}",
        },
    }
