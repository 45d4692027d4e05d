"""One memory root's state machine: sync cycle, candidates, the publisher, journal, locks."""
