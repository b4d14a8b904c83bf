"""gemini's rules for a bounded posture (app/runtime/rules/__init__.py): none yet."""

from __future__ import annotations

from app.runtime.rules import AgentRules, RuleContext


def rules(context: RuleContext) -> AgentRules:
    """The rules gemini needs to edit and report under `context.policy.posture`."""
    del context
    return AgentRules()
