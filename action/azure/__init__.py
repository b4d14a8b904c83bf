"""The Azure Pipelines entry (`python -m action.azure`): one step per pipeline run.

The sibling of the GitHub Action (`python -m action`) for a project on Azure DevOps, run as one
script step of a pipeline (docs/azure-pipelines.md):

    action/azure/settings.py    PipelineSettings.from_env(env): the job's predefined variables
                                (SYSTEM_COLLECTIONURI, SYSTEM_TEAMPROJECT, BUILD_REPOSITORY_NAME,
                                BUILD_REASON, SYSTEM_ACCESSTOKEN, BUILD_SOURCESDIRECTORY), read
                                and validated once
    action/azure/vso.py         the agent's logging commands: mask, the one-line error, the
                                Markdown summary, groups; agent output that cannot issue them
    action/azure/hook.py        a ResourceTrigger run's service-hook notification → the shared
                                reading (app/domain/intake/azure_hooks.py, the App's too)
    action/azure/pipelines.py   AzurePipelines: Azure's side of a run (what it is for, the
                                job's token for git, the summary file, a comment read back)
    action/azure/__main__.py    the entry: AzurePipelines handed to the run driver both entries
                                share (action/run/: mask, the `pair-state` lock, act, push,
                                summarize; the notifications already handled, action/deliveries.py)

Nothing here decides policy the App decides too: the reading of a notification, the command
grammar, who may act and the replies come from `app/domain/`.
"""
