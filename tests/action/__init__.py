"""Tests of the composite Action: environment, event classification, workflow I/O, action.yml."""
