"""pairbot: drive an AI coding agent through a reviewed delivery cycle, one step per call."""

__version__ = "0.1.0"
