"""The long-running daemon (`memsync run`): triggers, workers, control socket, metrics."""
