"""Tests of the composite Action: its environment, event classification, workflow I/O, action.yml."""
