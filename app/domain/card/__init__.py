"""A card's course through its cycle (most of it holds for a plain batch's steps too). Pure.

Where it runs (`binding`: which adapter holds the cards and which the PRs; `base_branch`: the
base a CI names), how far its change got (`plan`), what stops it or hands it over (`autonomy`:
the prepare and merge gates; `budget`; `agent_failures`: the failover table), and what it does
at the end of its cycle (`cycle_end`).
"""
