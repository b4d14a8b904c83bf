"""The Azure DevOps adapter: `AzureDevOpsHost` over the azure-devops SDK, one module per job.

    host.py        AzureDevOpsHost: the `Host` operations (its docstring is the mapping)
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
