"""Scripted agents the tests drive through the real runtime."""
