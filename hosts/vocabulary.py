"""What each host calls the things pairbot's messages name: one table, no per-message branches.

A message a user reads (a refusal, a tracking comment, a log line of the pipeline) names what
that user's host shows: GitHub has issues, labels, 👀 and commit statuses; Azure DevOps has
work items, tags, likes, pull request statuses and iterations. Every adapter carries its
`Vocabulary` (`HostAdapter.vocabulary`); code that has no adapter at hand picks one with
`vocabulary_for(host name)` or, for an acknowledgement, `ack_word(reaction)`.

The closing reference a pull request's description opens with is a host's word too: GitHub
closes the issue named by `Closes #7.`; Azure Repos links the work item through the API (the
pull request's Work Items panel) and shows a `#7` mention in a description as a link to work
item 7, so its sentence names the item that way and never writes GitHub's keyword; the local
forge links nothing.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "AZURE_DEVOPS",
    "GITHUB",
    "LOCAL",
    "Vocabulary",
    "ack_word",
    "vocabulary_for",
]


@dataclass(frozen=True)
class Vocabulary:
    """The nouns of one host, lower case, singular unless named otherwise.

    `card`: what a card is (issue, work item); `pull`: a pull request; `label`/`labels`: what
    carries `pr-state:*`; `ack`: the acknowledgement a command's comment gets, as a noun
    (`its 👀`, `its like`); `review_status`: what `pair-review` is; `head_update`: what a new
    head of a pull request is called; `who_may_act`: who may run commands without the
    allowlist; `allowlist_entries`: what `PAIR_ALLOWLIST` holds; `user_ids`: whether a refusal
    names the author by a user id too (GitHub's numeric ids; Azure DevOps names the account);
    `allowlist_hint`: how an operator admits someone (`{login}` stands for the author);
    `transition`: what merging does to the card (`closing_reference`'s second sentence)."""

    host: str
    card: str
    pull: str
    label: str
    labels: str
    ack: str
    review_status: str
    head_update: str
    who_may_act: str
    allowlist_entries: str
    closing: str  # "{card}" stands for the card's number; "" where nothing links them
    transition: str = ""
    user_ids: bool = False
    allowlist_hint: str = ""

    def card_ref(self, number: int) -> str:
        """`issue #7`, `work item #7`, `card #7`."""
        return f"{self.card} #{number}"

    def closing_reference(self, card: int, *, transitions: bool = True) -> str:
        """The sentence a card's pull request description opens with ("" for none).

        `transitions`: whether completing the pull request moves the card to its done state
        (Azure DevOps' `transitionWorkItems`, a setting); GitHub's keyword always does."""
        text = self.closing.format(card=card)
        if transitions and self.transition:
            text = f"{text} {self.transition.format(card=card)}"
        return text


GITHUB: Final = Vocabulary(
    host="GitHub",
    card="issue",
    pull="pull request",
    label="label",
    labels="labels",
    ack="👀",
    review_status="commit status",
    head_update="push",
    who_may_act="people with write, maintain or admin permission",
    allowlist_entries="user ids",
    closing="Closes #{card}.",
    user_ids=True,
)

AZURE_DEVOPS: Final = Vocabulary(
    host="Azure DevOps",
    card="work item",
    pull="pull request",
    label="tag",
    labels="tags",
    ack="like",
    review_status="pull request status",
    head_update="iteration",
    who_may_act="project members with Contribute permission on its default branch",
    allowlist_entries="accounts or identity ids",
    closing="Work item #{card} is linked to this pull request.",
    transition="Completing the pull request moves #{card} to its resolved or done state.",
    allowlist_hint=(
        " An operator can admit {login} by adding that account (or its identity id) to "
        "PAIR_ALLOWLIST."
    ),
)

LOCAL: Final = Vocabulary(
    host="the local forge",
    card="card",
    pull="pull request",
    label="label",
    labels="labels",
    ack="reaction",
    review_status="review status",
    head_update="push",
    who_may_act="people with write permission",
    allowlist_entries="user ids",
    closing="Implements card #{card}.",
)

_BY_NAME: Final = {"github": GITHUB, "azure-devops": AZURE_DEVOPS, "local": LOCAL}
# A comment's acknowledgement by the reaction owed for it (action.acks): `+1` is Azure
# DevOps' like, `eyes` GitHub's 👀.
_ACKS: Final = {"eyes": GITHUB.ack, "+1": AZURE_DEVOPS.ack}


def vocabulary_for(host: str) -> Vocabulary:
    """The vocabulary of the host adapter named `host` (`github`, `azure-devops`, `local`);
    GitHub's for a name this table does not hold."""
    return _BY_NAME.get(host, GITHUB)


def ack_word(reaction: str) -> str:
    """The acknowledgement noun for the reaction owed to a comment (`eyes` → 👀, `+1` → like)."""
    return _ACKS.get(reaction, "reaction")
