"""Benchmark (not a test): what DeviceTaintRules cost the index, from none to thousands.

    python benchmarks/taint_rules_bench.py                 # 1,000, 4,000 and 8,000 rules
    python benchmarks/taint_rules_bench.py --rules 500 --slices 1000

For each count of rules (each naming another node's pool, as a health controller's per-device
rules do), it prints the seconds to put them in the index, and to read ``--slices``
ResourceSlices of 32 EFA devices that no rule matches, beside the same read with no rule at all
in the same run: the ratio is what the rules cost a slice. The review of DeviceTaintRules
(stop 62, F5) measured 12.4 s to put 8,000 rules and 7x the read before the rules were indexed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from fabriccap.core.facts import FactsExtractor
from fabriccap.core.index import TAINT_RULE_FACTS, FactIndex
from fabriccap.kube.kinds import RESOURCE_SLICE
from fabriccap_devtools.world import device_taint_rule, resource_slice

# The config builder is the tests' (tests/support): run from a checkout, no PYTHONPATH needed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.configs import default_config


def read_seconds(index: FactIndex, extractor: FactsExtractor, bodies: list[dict[str, object]]) -> float:
    started = time.perf_counter()
    for body in bodies:
        RESOURCE_SLICE.upsert(index, extractor, body)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", type=int, nargs="*", default=[1000, 4000, 8000], help="counts of rules")
    parser.add_argument("--slices", type=int, default=500, help="slices read with the rules and without")
    args = parser.parse_args()
    config = default_config()
    extractor = FactsExtractor(config)
    bodies = [resource_slice(f"other-{number}", efa=32, name=f"slice-{number}") for number in range(args.slices)]
    for count in args.rules:
        bare = FactIndex()
        bare.configure(config)
        without = read_seconds(bare, extractor, bodies)
        index = FactIndex()
        index.configure(config)
        started = time.perf_counter()
        for number in range(count):
            facts = extractor.device_taint_rule(device_taint_rule(f"drain-{number:05d}", pool=f"node-{number}"))
            if facts is not None:
                index.put(TAINT_RULE_FACTS, facts)
        put = time.perf_counter() - started
        with_rules = read_seconds(index, extractor, bodies)
        print(
            f"rules={count}: put {put:.2f} s; {args.slices} slices read {with_rules:.3f} s"
            f" against {without:.3f} s without rules = {with_rules / without:.2f}x"
        )


if __name__ == "__main__":
    main()
