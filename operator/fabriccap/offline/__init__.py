"""``fabriccap evaluate`` and ``explain`` without an operator: snapshots or one live read."""
