"""What several test subsystems share, imported as ``support.*`` (pytest's ``pythonpath`` and
mypy's ``mypy_path`` hold ``tests/``): cluster bodies evaluated in memory (``builders``), a fake
API server (``fakeapi``), running the command line in-process (``cli``), random clusters for
property tests (``scenarios``) and the kustomize and Helm renderings (``rendering``).
Test modules import from here, never from one another."""
