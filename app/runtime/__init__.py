"""Agent runtimes and adapters: turn a spawn request into one running agent (seed 000)."""
