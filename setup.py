"""The part of the package's configuration that depends on what is built (build_backend.py).

Everything static is in pyproject.toml. The packages and the console scripts are computed here:
the product alone, unless build_backend.py says this is the checkout's editable install, which
also gets the dev tools and their command.
"""

from __future__ import annotations

import os
from pathlib import Path

from build_backend import WITH_DEVTOOLS
from setuptools import find_packages, setup

# An editable install of a tree without the dev tools (the unpacked sdist, which holds the
# product alone) gets neither them nor a fabriccap-dev command that could not import them.
devtools_present = (Path(__file__).resolve().parent / "operator" / "fabriccap_devtools" / "__init__.py").is_file()
with_devtools = os.environ.get(WITH_DEVTOOLS) == "1" and devtools_present
packages = ["fabriccap", "fabriccap.*"]
# kubectl-fabriccap: kubectl runs it for `kubectl fabriccap ...` (a kubectl plugin, krew's convention).
scripts = ["fabriccap = fabriccap.cli.commands:main", "kubectl-fabriccap = fabriccap.cli.commands:kubectl_main"]
if with_devtools:
    packages += ["fabriccap_devtools", "fabriccap_devtools.*"]
    scripts += ["fabriccap-dev = fabriccap_devtools.cli:main"]

setup(
    package_dir={"": "operator"},
    packages=find_packages("operator", include=packages),
    # The dev tools need no package data: they read their files (the node images' Go module,
    # the CRD, the example cluster) from the checkout an editable install points at.
    # The instance catalogs (fabriccap-dev catalog writes them; fabriccap.catalogfile reads them).
    package_data={"fabriccap": ["py.typed", "data/*.json"]},
    entry_points={"console_scripts": scripts},
)
