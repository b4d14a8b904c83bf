"""pairbot test suite."""
