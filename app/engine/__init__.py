"""The batch engine (docs/engine.md): one forced transition per call, recorded and resumable."""
