"""The batch engine (seed 001): one forced transition per call, recorded and resumable."""
