"""The GitHub Action's entry (`python -m action`): one step per invocation.

It arrives with the delivery-cycle issue; until then the Action surface is the `pairbot` CLI.
"""
