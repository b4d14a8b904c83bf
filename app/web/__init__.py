"""pairbot's GitHub App: the webhook service that turns comments into steps (docs/app.md).

settings.py     AppSettings: every PAIR_* variable, read once, secrets as SecretStr
signature.py    X-Hub-Signature-256 and Azure DevOps Basic auth, in constant time (pure)
events.py       a verified delivery → the shared intake (app/domain/intake/intent.py) → its
                jobs (pure)
jobs.py         the job kinds and the dispatch payloads the Action and the worker receive
forge.py        what the service does to a code host (react, comment, permission, dispatch)
handling.py     one queued job: authorize, acknowledge, dispatch or execute
worker.py       the background worker that drains the store's queue; the cycle adapter
dashboard.py    the batches on this machine as the status pages show them
pages/          the status pages and /api/v1: view-model, HTML, routes (static/ their CSS/JS)
viewer.py       who is looking (Viewer), as the sign-in layer decided it for the pages
signin.py       the sign-in middleware that guards every page, and the sign-in routes
sessions.py     the signed session cookie
oauth.py        GitHub sign-in: the OAuth code exchange and the user's readable repositories
app.py          create_app(): the Starlette app, its routes and its lifespan
serve.py        `pairbot serve`: uvicorn on create_app, and the --dev defaults
"""
