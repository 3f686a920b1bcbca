"""Reading the config file: the one file read the pure core leaves to its callers.

The core validates a config's text (``fabriccap.core.config.parse_config``) but reads no file.
This module sits beside ``fabriccap.kube``, below ``controller``, ``offline`` and ``cli``, so
``fabriccap run`` and ``fabriccap evaluate | explain`` read ``--config`` the same way, with the
same one-line errors. The file is read as every input file is (``fabriccap.inputfile``): a
device, a directory or a socket is refused before it is opened, a FIFO without a writer is not
waited for, and no more than ``MAX_CONFIG_BYTES`` is read.
"""

from __future__ import annotations

from pathlib import Path

from fabriccap.catalogfile import load_catalogs
from fabriccap.core.config import Config, ConfigError, default_config, parse_config
from fabriccap.inputfile import CANNOT_READ, InputFileError, read_input_file, shown_path

# A config is a few kilobytes (the largest example is under 4 KB); a megabyte is no config.
MAX_CONFIG_BYTES = 1024 * 1024


def load_config(path: str | Path | None) -> Config:
    """Load and validate a config file (None: the built-in defaults), with the shipped instance
    catalogs attached; a missing or corrupt catalog is a ConfigError too (``CatalogFileError``)."""
    catalogs = load_catalogs()
    if path is None:
        return default_config(catalogs)
    name = str(path)
    try:
        raw = read_input_file(name, MAX_CONFIG_BYTES)
        text = raw.decode("utf-8")
    except InputFileError as error:
        raise ConfigError(f"{error.source}: cannot read config: {error.problem.removeprefix(CANNOT_READ)}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{shown_path(name)}: cannot read config: not a text file (not UTF-8)") from None
    return parse_config(text, shown_path(name), catalogs)
