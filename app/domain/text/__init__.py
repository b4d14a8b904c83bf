"""Untrusted text made safe. Pure.

What a reader of a comment or card sees and nothing else (`sanitize`), and quoting such text
into pairbot's Markdown (`mdtext`).
"""
