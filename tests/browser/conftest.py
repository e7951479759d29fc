"""The browser tests' two lanes: ./test.sh runs those not marked `alone` two at a time
(SPECDEC_BROWSER_LANE=shared), then those marked `alone` one at a time with the machine to themselves
(SPECDEC_BROWSER_LANE=alone). Without the variable every browser test runs, as pytest is asked."""

import os

LANES = ("shared", "alone")


def pytest_collection_modifyitems(config, items):
    lane = os.environ.get("SPECDEC_BROWSER_LANE")
    if lane not in LANES:
        return
    wanted = lane == "alone"
    kept = [item for item in items if (item.get_closest_marker("alone") is not None) == wanted]
    dropped = [item for item in items if item not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
