"""fabriccap: does every node of a pool really advertise the fabric resource, uniformly?"""

__version__ = "0.1.0"
