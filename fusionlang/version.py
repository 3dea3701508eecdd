"""The one version of fusionlang: the installed distribution's (pyproject.toml's
``version``), read from the package metadata so no second copy can drift."""

from __future__ import annotations

from importlib import metadata


def _installed_version() -> str:
    try:
        return metadata.version("fusionlang")
    except metadata.PackageNotFoundError:  # a bare checkout on sys.path, never installed
        return "0+unknown"


VERSION = _installed_version()
