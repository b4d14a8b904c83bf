"""Untrusted text made safe. Pure.

What a reader of a comment or card sees and nothing else (`sanitize`; the characters nobody
sees in `invisible`, the styles that hide text in `css_hide`), and quoting such text into
pairbot's Markdown (`mdtext`).
"""
