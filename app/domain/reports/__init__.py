"""What happened, reduced from the journal and rendered for people. Pure.

A card's metrics (`metrics`) and per-step dispatch figures (`dispatch_stats`), the cohort over
every card (`cohort`), a finished card's lesson (`lesson`), the synthesis comment (`synthesis`),
the `/pair status` explanation (`explain`) and the tracking comment (`tracking`).
"""
