"""Configs as the operator builds them: validated, with the shipped instance catalogs attached.

``fabriccap.core.config.build_config`` reads no file, so a config built there knows no instance
type; the operator and the offline commands attach the catalogs ``fabriccap.catalogfile`` reads
(through ``fabriccap.configfile``). Tests that evaluate pools build their configs here, the same way.
"""

from __future__ import annotations

from typing import Any

from fabriccap.catalogfile import load_catalogs
from fabriccap.core import config as core_config
from fabriccap.core.catalog import InstanceCatalog
from fabriccap.core.config import Config

CATALOGS: tuple[InstanceCatalog, ...] = load_catalogs()
(EFA_CATALOG,) = (catalog for catalog in CATALOGS if catalog.resource == "vpc.amazonaws.com/efa")


def build_config(raw: Any, source: str = "config") -> Config:
    return core_config.build_config(raw, source, CATALOGS)


def default_config() -> Config:
    return core_config.default_config(CATALOGS)
