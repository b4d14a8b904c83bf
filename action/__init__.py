"""The GitHub Action's entry (`python -m action`): one step per invocation.

`action.yml` installs this repository and runs `python -I -m action` in the workspace; the
modules here are the Action's thin shell around the engine (docs/action.md):

    action/context.py    ActionContext.from_env(env): the Actions variables and the inputs, read
                         and validated once (secrets as SecretStr); read_event() for the payload
    action/event.py      classify(event_name, payload, ...) -> Tick | Run | Comment |
                         ScopeDecision | HeadMoved | Ignore, pure; authorize(comment, permission=…)
                         -> Run | Reply | Ignore, pure (the App's rules, app/domain/commands.py)
    action/workflow.py   the runner's side channels: set_outputs, append_summary, mask, group,
                         stop_commands / agent_log (agent output that cannot issue commands)
    action/__main__.py   the glue: mask the secrets, classify, authorize a comment (one permission
                         lookup), run the engine's step, write outputs and the job summary

Nothing here reads `os.environ` except through `ActionContext.from_env`, and nothing decides
policy that the App decides too: commands, who may act and the dispatch payload come from
`app/domain/`, so the App and the Action cannot disagree.
"""
