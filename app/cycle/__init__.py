"""The card delivery cycle (docs/cycle.md) on top of the batch engine and the hosts.

Imports flow one way: `app.cycle` uses `app.engine`, `app.domain` and `hosts/`; nothing in the
engine imports the cycle. The surfaces (the App's worker and ticker, the Action, the CLI)
drive a card through `app.cycle.card_cycle.CardCycle`, built from their typed settings (the
steps are `app.cycle.driver`'s). Kept import-free so importing the package costs nothing.
"""
