"""Host adapters (GitHub, Azure DevOps, local forge) behind one protocol; never imports `app`.

The adapters arrive with the host-adapter issue; the engine reaches them only through the
injected seams in `app.engine.runner` (for now, `PrOpener`).
"""
