"""The pure core: configuration, facts, evaluation, names. No I/O and no clock.

Everything here is deterministic in its inputs, so the operator, ``fabriccap evaluate`` and
the tests share one answer for the same facts.
"""
