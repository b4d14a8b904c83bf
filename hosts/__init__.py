"""Host adapters (GitHub, Azure DevOps, local forge) behind one protocol; never imports `app`.

    base.py, models.py, errors.py        the `Host` protocol, host-neutral models, the error tree
    markers.py, labels.py, cardhash.py,  pure logic every adapter shares
      decisions.py
    calls.py                             the call discipline of the remote adapters
    git.py                               the product's one git runner
    secrets.py                           secrets that never print, and scrubbing
    github/, azure_devops/, local/       the adapters, one package each

Importing `hosts` loads no adapter library; each adapter package loads its own on first use.
"""
