"""The Azure DevOps adapter: `AzureDevOpsHost` over the azure-devops SDK, one module per job.

    host.py        AzureDevOpsHost: the `Host` operations (its docstring is the mapping), the
                   parts below put together
    project.py     what every part stands on: the SDK connection, identity, the repository
    work_items.py  cards (work items) and their tags
    comments.py    work-item comments, PR threads, reactions
    pulls.py       open, read, label, complete (merge) and abandon pull requests
    statuses.py    the `pair-review` status and the other checks on a head
    permissions.py a user's permission from the Git security ACLs
    connection.py  the SDK connection: worker threads, the transport policy, the rate window
    sdk.py         the SDK stack, imported on first use, and its clients
    translate.py   SDK failures → `hosts.errors` (`classify`: type_key, TF code, HTTP status)
    convert.py     SDK objects → host-neutral models; permission bits; tags
    push.py        `git push` with the PAT in environment config (through `hosts.git`)

Importing this package never loads the SDK (nor msrest, requests or urllib3), and never
imports the GitHub adapter: the SDK is imported by the first call a host makes.
"""

from hosts.azure_devops.convert import permission_from_bits, split_tags
from hosts.azure_devops.host import AzureDevOpsHost
from hosts.azure_devops.push import push_command
from hosts.azure_devops.translate import classify
from hosts.calls import retry_after_seconds

__all__ = [
    "AzureDevOpsHost",
    "classify",
    "permission_from_bits",
    "push_command",
    "retry_after_seconds",
    "split_tags",
]
