"""`python -m action.azure.try_local DIRECTORY`: the webhook path of the pipeline, without Azure.

It feeds the sample `workitem.commented` notification (`SAMPLE`, the one docs/azure-pipelines.md
shows) to the real pipeline entry, `python -m action.azure`, with a pipeline job's variables,
against the local forge standing in for Azure DevOps:

    DIRECTORY           a git repository (made when missing) whose `.pair/config.yaml` binds
                        both hosts to `local` (its forge in `.pair/forge`), with a bare
                        `origin` beside it for the `pair-state` branch
    the work item       a card on the local forge, and the sample's comment on it written by the
                        sample's commenter (`System.ChangedBy`: `Jamal Hartnett
                        <fabrikamfiber4@hotmail.com>`), who is given write access
    the notification    the sample with the card's number, in `DIRECTORY.notification.json`
    the run             BUILD_REASON=ResourceTrigger, SYSTEM_TEAMPROJECT the sample's project,
                        PAIR_WEBHOOK_PAYLOAD_PATH the file above: `action.azure.__main__.main`

The entry then does what it does in a pipeline: it reads the notification, reads the comment
back from the (local) host, authorizes its author (the account's permission), answers the
sample's `/pair help` under the comment, records the notification on `pair-state` and prints
its logging commands. Run it again on the same directory: the same notification is a
duplicate, so nothing runs twice; `--comment TEXT` writes another comment (and a notification
of its own) first, e.g. `--comment '<div>/pair status</div>'`.

Nothing here is used by a pipeline run; it is a way to watch one.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from action.azure.__main__ import main as run_entry
from app.domain.intake.azure_identities import commenter
from hosts.local.forge import LocalForge
from hosts.models import Target

__all__ = ["SAMPLE", "main", "notification", "pipeline_env", "prepare"]

# A `workitem.commented` notification as a service hook sends it ("Resource details to send:
# All"), in the shape of Microsoft's sample for the event
# (https://learn.microsoft.com/azure/devops/service-hooks/events#work-item-commented-on), with a
# command as the comment. `System.ChangedBy` is `Name <account>` text; `resource.id` the item.
SAMPLE: Final[Mapping[str, Any]] = {
    "subscriptionId": "00000000-0000-0000-0000-000000000000",
    "notificationId": 4,
    "id": "fb2617ed-60df-4518-81fa-749faa6c5cd6",
    "eventType": "workitem.commented",
    "publisherId": "tfs",
    "message": {
        "text": "User Story #5 (Add an export button) commented on by Jamal Hartnett.",
    },
    "resource": {
        "id": 5,
        "rev": 4,
        "fields": {
            "System.AreaPath": "FabrikamCloud",
            "System.TeamProject": "FabrikamCloud",
            "System.IterationPath": "FabrikamCloud",
            "System.WorkItemType": "User Story",
            "System.State": "New",
            "System.CreatedBy": "Jamal Hartnett <fabrikamfiber4@hotmail.com>",
            "System.ChangedBy": "Jamal Hartnett <fabrikamfiber4@hotmail.com>",
            "System.Title": "Add an export button",
            "System.History": "<div>/pair help</div>",
        },
        "url": "https://dev.azure.com/fabrikam/_apis/wit/workItems/5",
    },
    "resourceVersion": "1.0",
    "resourceContainers": {
        "collection": {"id": "c12d0eb8-e382-443b-9f9c-c52cba5014c2"},
        "account": {"id": "f844ec47-a9db-4511-8281-8b63f4eaf94e"},
        "project": {"id": "be9b3917-87e6-42a4-a549-2bc06a7a878f"},
    },
    "createdDate": "2026-01-12T09:30:00.000Z",
}
REPOSITORY: Final = "pairbot-try"
CONFIG: Final = "hosts: {pm: local, code: local}\nmaintainer: maintainer\n"
_GIT_ID: Final = ("-c", "user.name=pairbot try", "-c", "user.email=try@pairbot.invalid")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *_GIT_ID, *args], cwd=cwd, check=True, capture_output=True)


def prepare(directory: Path) -> LocalForge:
    """The repository, its `origin` and its local forge (each made once)."""
    directory.mkdir(parents=True, exist_ok=True)
    origin = directory.with_name(directory.name + ".origin.git")
    if not (directory / ".git").exists():
        _git(directory, "init", "--quiet", "--initial-branch=main")
        (directory / ".pair").mkdir(exist_ok=True)
        (directory / ".pair" / "config.yaml").write_text(CONFIG, encoding="utf-8")
        (directory / "README.md").write_text("# a repository to try pairbot in\n")
        _git(directory, "add", "README.md", ".pair/config.yaml")
        _git(directory, "commit", "--quiet", "-m", "a repository to try pairbot in")
    if not origin.exists():
        subprocess.run(["git", "init", "--quiet", "--bare", str(origin)], check=True)
        _git(directory, "remote", "add", "origin", str(origin))
        _git(directory, "push", "--quiet", "origin", "main")
    return LocalForge(directory / ".pair" / "forge")


def notification(forge: LocalForge, html: str) -> dict[str, Any]:
    """A work item for the sample (once), the comment `html` on it by the sample's commenter,
    and the notification of that comment (an id of its own, as every notification has)."""
    payload = copy.deepcopy(dict(SAMPLE))
    fields = payload["resource"]["fields"]
    who = commenter(fields["System.ChangedBy"])
    cards = sorted(int(p.stem) for p in (forge.root / "cards").glob("*.json"))
    card = cards[0] if cards else forge.seed_card(fields["System.Title"], "", author=who)
    forge.grant(who.login, "write")
    comment = forge.comment_as(who, Target("card", card), html)
    payload["resource"]["id"] = card
    payload["resource"]["commentVersionRef"] = {"commentId": int(comment), "version": 1}
    fields["System.History"] = html
    payload["id"] = f"{SAMPLE['id'][:-4]}{int(comment):04d}"
    return payload


def pipeline_env(directory: Path, payload: Path, base: Mapping[str, str]) -> dict[str, str]:
    """The variables a pipeline job sets for a webhook run, over `base`."""
    project = str(SAMPLE["resource"]["fields"]["System.TeamProject"])
    return {
        **base,
        "SYSTEM_COLLECTIONURI": "https://dev.azure.com/local-try/",
        "SYSTEM_TEAMPROJECT": project,
        "BUILD_REPOSITORY_NAME": REPOSITORY,
        "BUILD_REASON": "ResourceTrigger",
        "BUILD_SOURCESDIRECTORY": str(directory),
        "BUILD_SOURCEBRANCH": "refs/heads/main",
        "BUILD_BUILDID": "1",
        "SYSTEM_ACCESSTOKEN": "local-try-token",  # the local forge asks for none
        "PAIR_WEBHOOK_PAYLOAD_PATH": str(payload),
    }


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Prepare DIRECTORY, write a comment and its notification, run the entry; its exit code."""
    parser = argparse.ArgumentParser(prog="python -m action.azure.try_local", description=__doc__)
    parser.add_argument("directory", type=Path, help="the repository to try in (made if missing)")
    parser.add_argument(
        "--comment",
        help="a new comment's text (HTML, as Azure Boards stores it); default: the sample's, "
        "the first time, and the same notification again afterwards",
    )
    args = parser.parse_args(argv)
    directory = args.directory.resolve()
    forge = prepare(directory)
    payload_path = directory.with_name(directory.name + ".notification.json")
    if args.comment is not None or not payload_path.exists():
        html = args.comment or str(SAMPLE["resource"]["fields"]["System.History"])
        payload = notification(forge, html)
        payload_path.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    print(f"pairbot try: the notification is {payload_path}", file=sys.stderr)
    return run_entry(pipeline_env(directory, payload_path, os.environ if env is None else env))


if __name__ == "__main__":
    sys.exit(main())
