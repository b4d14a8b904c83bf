"""The CI run driver: one run of either CI entry, written once.

`python -m action` (GitHub Actions) and `python -m action.azure` (Azure Pipelines) each build
their platform (`action.github_actions.GitHubActions`, `action.azure.pipelines.AzurePipelines`)
and hand it to `action.run.driver.drive`; what differs between the two CIs is the small
protocol in `action.run.platform`:

    action/run/platform.py   CiPlatform (the event and settings, the outputs and summary, the
                             acknowledgement of a command) and LogCommands (mask, the one error
                             line, the agent's log group)
    action/run/settings.py   CiSettings: what both entries' settings read the same way
    action/run/outcome.py    Outcome and the pure decisions about it: why an intent is
                             ignored, a step's outcome, the summary, the closing line
    action/run/driver.py     drive(): settings, masks, the work, the step, the outcome
    action/run/locked.py     the step under the `pair-state` lock (loaded once the run has work)
    action/run/act.py        the card cycle acting on the intent (loaded once it has a step)
    action/run/continuation.py  whether a run asks for the next one, and the daily bound: the
                             settings and values both entries read on their start path
    action/run/next_run.py   after a step: whether to ask for the next run (under the lock,
                             counted on the state branch), and asking the CI (after the release)

This package knows neither CI (tests/packaging/test_layering.py holds it to that).
"""
