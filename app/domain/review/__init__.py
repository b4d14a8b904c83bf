"""Judging an agent's iteration and a reviewed head. Pure.

The converge gate's rules (`guarded`: paths an iteration may not touch; `testsets`: whether its
tests let it advance; `testgate`: the note when no test command is set), the verifier's findings
and verdict (`verdict`), a panel of reviewers (`panel`), the regression-risk ledger
(`regression`), what the checks on a head mean (`evidence`), and the review comment with its
status text (`review_comment`).
"""
