"""Shared views: manifests and signing, packages, safe extraction, import store, the hub."""
