"""Reading the config file: the one file read the pure core leaves to its callers.

The core validates a config's text (``fabriccap.core.config.parse_config``) but reads no file.
This module sits beside ``fabriccap.kube``, below ``controller``, ``offline`` and ``cli``, so
``fabriccap run`` and ``fabriccap evaluate | explain`` read ``--config`` the same way, with the
same one-line errors; it imports the core only.
"""

from __future__ import annotations

from pathlib import Path

from fabriccap.catalogfile import load_catalogs
from fabriccap.core.config import Config, ConfigError, default_config, parse_config


def load_config(path: str | Path | None) -> Config:
    """Load and validate a config file (None: the built-in defaults), with the shipped instance
    catalogs attached; a missing or corrupt catalog is a ConfigError too (``CatalogFileError``)."""
    catalogs = load_catalogs()
    if path is None:
        return default_config(catalogs)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise ConfigError(f"{path}: cannot read config: {reason}") from None
    return parse_config(text, str(path), catalogs)
