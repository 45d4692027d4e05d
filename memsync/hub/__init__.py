"""The hub: a separate deployable serving signed view revisions, tokens and change events.

`app.py` is the aiohttp application (routes, auth, answers; `errors.py` its one error),
`fastlane.py` answers matching conditional GETs before aiohttp, `upload.py` reads an upload
under its byte cap, `revisions.py` holds stored revisions and the publication rules,
`events.py` the event streams, `state.py` ties them to the token store and audit log
(`tokens.py`, SQLite), and `serve.py` runs it all (`memsync hub serve`): in one process, or
as several workers on one port supervised by `workers.py`, which share the data dir and
hear of each other's revisions and events through `peers.py`. An upload is checked with
the consumers' own check (`memsync.views.consumer`).
"""
