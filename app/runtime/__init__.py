"""Agent runtimes and adapters: turn a spawn request into one running agent (docs/runtime.md).

The engine reaches this package only through `launcher.Launcher`, which implements the
engine's agent seam (app/engine/agent.py); modules here may import that seam, never the
other way round.
"""
