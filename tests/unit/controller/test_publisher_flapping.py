"""A pool flapping at the debounce's own rate does not read steadily Ready (issue 27 item 16;
round 3 L21), with a clock the test moves: the loop's own turns (``Publisher.step``), its
debounce sleeps advancing a simulated timeline on which a 0-EFA node flaps between two pools.

Rounds that only looked at the end of each debounce window locked onto the flapping's phase:
a node flapping every 0.15 s against a 0.2 s window was seen in the same pool by every round,
so the other pool read Ready all along (29 samples in 29 on a real API server).
"""

from __future__ import annotations

from support.builders import node
from support.publishing import Setup, healthy, publishing, start

DEBOUNCE = 0.2
PERIOD = 0.15  # between one and two flaps per window: the phase every round used to lock onto
FLIPS = 400  # a minute


class Flapping:
    """Node ``x`` (0 EFA) moves between pools p5 and p4 every ``PERIOD`` on the setup's clock."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.next_flip = setup.clock.now + PERIOD
        self.flips = 0
        self.in_p5 = False

    def advance(self, seconds: float) -> None:
        until = self.setup.clock.now + seconds
        while self.next_flip <= until and self.flips < FLIPS:
            self.setup.clock.now = self.next_flip
            self.in_p5 = not self.in_p5
            self.setup.remove_node("x")
            self.setup.add([node("x", pool="p5" if self.in_p5 else "p4", efa=0)])
            self.flips += 1
            self.next_flip += PERIOD
        self.setup.clock.now = until

    def wait_for_change(self) -> None:
        """The loop's idle wait: until the next flap (there is nothing else to wait for here)."""
        if not self.setup.store.changed.is_set():
            self.advance(self.next_flip - self.setup.clock.now)


def ready(setup: Setup, pool: str) -> bool:
    conditions = setup.published()[f"efa-{pool}"]["status"]["conditions"]
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def test_a_node_flapping_between_two_pools_at_the_debounce_rate_keeps_neither_steadily_ready() -> None:
    async with publishing(debounceSeconds=DEBOUNCE) as setup:
        flapping = Flapping(setup)

        async def sleep(seconds: float) -> None:
            flapping.advance(seconds)

        setup.publisher.sleep = sleep
        setup.add(healthy("p5", "a", "b") + healthy("p4", "c", "d"))
        await start(setup)
        assert ready(setup, "p5") and ready(setup, "p4")
        shown: dict[str, list[bool]] = {"p5": [], "p4": []}
        while flapping.flips < FLIPS:
            flapping.wait_for_change()
            await setup.publisher.step()
            await setup.publisher.finish_writes()
            for pool, seen in shown.items():
                seen.append(ready(setup, pool))
        share = {pool: sum(seen) / len(seen) for pool, seen in shown.items()}
        print(f"\nRead Ready after each of {len(shown['p5'])} turns: p5 {share['p5']:.0%}, p4 {share['p4']:.0%}")
        # Each pool holds the 0-EFA node half the time: neither may look steadily Ready.
        assert share["p5"] < 0.5 and share["p4"] < 0.5
