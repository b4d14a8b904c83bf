"""Pure policy shared by the engine and the surfaces: plans, findings, verdicts, statuses."""
