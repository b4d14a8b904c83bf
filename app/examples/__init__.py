"""Bundled example projects (data files, read by `pairbot demo`)."""
