"""Benchmark (not a test): what selecting devices with a DeviceClass costs next to decoding the slices.

    python benchmarks/dra_cel_share.py --slices 3000

In one process: N DRANET slices of 32 EFA + 2 ENA devices (fabriccap_devtools.world) as one JSON
LIST; the time to decode it; the time to turn every slice into facts with the aws-dranet chart's
class (every device through ``core.selection``'s cache and, once per distinct key, cel-expr-python);
and the time of a re-list whose slices did not change (the per-slice memo). Issue 24's target is
that CEL adds at most 10 % to a start; the decode stands in for the client side of a bare LIST.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from fabriccap.core.config import default_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.selection import DeviceClassView
from fabriccap_devtools import world


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slices", type=int, default=3000, help="slices, one per node (default 3000)")
    args = parser.parse_args()
    items = []
    for index in range(args.slices):
        body = world.resource_slice(f"node-{index:05d}", efa=32, ena=2)
        body["metadata"]["resourceVersion"] = str(index + 1)
        items.append(body)
    text = json.dumps({"items": items})
    del items
    started = time.perf_counter()
    listing = json.loads(text)["items"]
    decode = time.perf_counter() - started

    extractor = FactsExtractor(default_config())
    device_class = extractor.device_class(world.efa_device_class())
    assert device_class is not None
    view = DeviceClassView(1, {device_class.name: device_class})
    started = time.perf_counter()
    facts = [extractor.resource_slice(body, view) for body in listing]
    read = time.perf_counter() - started
    started = time.perf_counter()
    again = [extractor.resource_slice(body, view, known) for body, known in zip(listing, facts, strict=True)]
    memo = time.perf_counter() - started
    assert again == facts
    counted = sum(slice_facts.devices_of("efa") for slice_facts in facts if slice_facts is not None)
    print(
        json.dumps(
            {
                "slices": args.slices,
                "devices": args.slices * 34,
                "efa_counted": counted,
                "cel_evaluations": extractor.selector.evaluations,
                "decode_s": round(decode, 3),
                "facts_s": round(read, 3),
                "facts_over_decode": round(read / decode, 3),
                "unchanged_relist_s": round(memo, 4),
                "unchanged_relist_over_decode": round(memo / decode, 4),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
