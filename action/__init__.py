"""The GitHub Action's entry (`python -m action`): one step per invocation.

`action.yml` installs this repository and runs `python -I -m action` in the workspace; the
modules here are the Action's thin shell around the engine (docs/action.md):

    action/context.py    ActionContext.from_env(env): the Actions variables and the inputs, read
                         and validated once (secrets as Secret); read_event() for the payload
    action/event.py      classify(event_name, payload, policy_of(ctx)) -> the intent, an adapter
                         over the intake the App calls too (app/domain/intake/intent.py, pure)
    action/early.py      a comment's first requests, before the lock and the engine: the
                         author's permission, then 👀 for a command that runs (bare httpx)
    action/comments.py   a comment's command: who may act (one permission lookup), its one
                         reply (app/domain/intake/answers.py: the App's text and marker), or the run
    action/workflow.py   the runner's side channels: set_outputs, append_summary, mask, group,
                         stop_commands / agent_log (agent output that cannot issue commands);
                         WorkflowCommands, the log as the run driver speaks to it
    action/github_actions.py  GitHubActions: GitHub's side of a run (the event, the early 👀,
                         the agent's inputs, git's token, the outputs and the summary)
    action/run/          the CI run driver both entries share (`python -m action.azure` too):
                         mask, the work, the `pair-state` lock, the card cycle's step, the
                         answer to a command that could not run, the outcome
    action/__main__.py   the entry: GitHubActions handed to the driver

Nothing here reads `os.environ` except through `ActionContext.from_env`, and nothing decides
policy that the App decides too: the intake, commands, who may act, replies and the dispatch
payload come from `app/domain/`, so the App and the Action cannot disagree.
"""
