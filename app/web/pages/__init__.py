"""The status pages and their JSON API: a pure view-model, an HTML renderer, thin routes.

model.py    run-state and store rows -> dataclasses (pure; pages and API share it)
read.py     the blocking reads of the run-state on this machine (root and checkouts)
html.py     the view-model -> escaped HTML (pure)
routes.py   the Starlette routes: pages, `/api/v1/…`, the live card fragment, retry
"""
