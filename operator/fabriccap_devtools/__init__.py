"""fabriccap's test bench, beside the product and never in it: the local control plane and its
real nodes (``controlplane``), the node images' Go sources (``images/``), the test world
(``world``, ``seeding``, ``efaplugin``, ``workload_crds``), the demo, the Go tool builder
(``gotools``), the user reference's generators (``reference``) and ``make generate``
(``generate``); ``cli`` is the ``fabriccap-dev`` command.

The wheel and the operator image leave this package out (build_backend.py); the checkout's
editable install (scripts/bootstrap.sh) provides it and the ``fabriccap-dev`` command. It imports
``fabriccap``; ``fabriccap`` never imports it (import-linter's contract in pyproject.toml). Its
own dependencies (``cryptography``, for the control plane's PKI) are in requirements-dev.txt.
"""
