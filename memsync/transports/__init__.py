"""I/O adapters: git (the git box). Later: the HTTP client for views."""
