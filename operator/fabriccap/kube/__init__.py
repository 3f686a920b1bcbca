"""The only code that speaks HTTP to the API server: credentials, client, paths, errors.

Importing the package is cheap (no aiohttp): ``fabriccap evaluate -f`` never pays for the
client, only live mode and the operator import ``fabriccap.kube.client``.
"""
