"""Pure policy shared by the engine, the cycle and the surfaces: values in, values out, no I/O.

Six groups, each imported by its full module path (no re-exports):

    intake/    what comes in: an event's intent, the comment commands, the request a command
               travels in, who may act or look, and the answer a comment gets when nothing runs
    review/    judging an iteration and a head: the test gate, findings and the verdict, the
               panel, the regression-risk ledger, outside evidence, the review comment
    scope/     the maintainer's scope decision and the acceptance criteria it rewrites
    card/      a card's course: its host binding and base branch, its plan's progress, its
               gates and budgets, agent failover, and what ends its cycle
    reports/   what happened, reduced and rendered: metrics, dispatch figures, the cohort, a
               lesson, the synthesis, the `/pair status` explanation, the tracking comment
    text/      untrusted text made safe: what a reader sees, and quoting it into Markdown
"""
