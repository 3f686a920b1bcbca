"""Developer tooling: the local control plane, cluster seeding, the demo, launch helpers.

Never imported by the operator. Its extra dependencies (``cryptography``, for the local
control plane's PKI) come with the ``dev`` extra, which the operator image does not install.
"""
