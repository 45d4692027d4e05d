"""The hub: a separate deployable serving signed view revisions, tokens and change events.

`app.py` is the aiohttp application (routes, auth, answers; `errors.py` its one error),
`upload.py` reads an upload under its byte cap, `state.py` holds stored revisions,
publication rules and event streams, `tokens.py` the token store and audit log (SQLite),
and `serve.py` runs it all (`memsync hub serve`). An upload is checked with the consumers'
own check (`memsync.views.consumer`).
"""
