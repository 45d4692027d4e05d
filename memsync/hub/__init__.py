"""The hub: a separate deployable serving signed view revisions, tokens and change events.

`app.py` is the aiohttp application (routes, auth, answers, reading uploads under their
byte cap), `state.py` holds stored revisions, publication rules and event streams,
`tokens.py` the token store and audit log (SQLite), `serve.py` runs it (`memsync hub serve`).
The hub checks an upload with the consumers' own check (`memsync.views.consumer`).
"""
