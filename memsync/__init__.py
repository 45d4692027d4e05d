"""memsync: a sync daemon for Git-backed coding-agent memory (RightMemory format)."""

__version__ = "0.1.0"
