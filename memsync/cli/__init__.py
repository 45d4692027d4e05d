"""The command line: one module per command (`init`, `validate`, `sync`, `status`, `config`,
`doctor`, `views` with `keys`, `hub`, `run`, `pause` with `resume`, `provenance`, `cycle`),
each parsing its arguments, making one call into the layer that owns the work and rendering
the result; beside them what they share: `group` (the click group, its lazy commands and
`render_error`, the one wording of errors), `kit` (click's parts), `app` (the click-free app
context, exit codes, logging, output), `text` (how reports read on a terminal), `plain`
with `statusrun` and `syncrun` (`status` and `sync-now` without click) and `helpmemo`.

Imports nothing: `__main__` loads `helpmemo` and `plain` through this package, and a
process that prints help from the memo or runs a plain form pays for nothing more.
"""
