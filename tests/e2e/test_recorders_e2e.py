"""A torchcomms job end to end on the local cluster: the webhook's TORCHCOMM_FR_DUMP_TEMP_FILE reaches the
ranks, each writes its torchcomms-named file there, the agent collects it, the analyzer names the hung rank.
The ranks are real (gloo rendezvous and all_reduces); the dump is **fabricated** from torchcomms' source
(``frwatch_dev.demo.torchcomms_hang``): torchcomms cannot be installed here and there is no GPU."""

from __future__ import annotations

import pytest
from e2e_helpers import Target

from frwatch_operator import constants as c

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TORCHCOMMS_HANG = ["python", "-m", "frwatch_dev.demo.torchcomms_hang"]


def test_a_torchcomms_gpu_hang_is_collected_from_its_own_file_and_named(target: Target) -> None:
    if target.local is None:
        pytest.skip("needs the stand-ins: the torchcomms dump is fabricated by the workload")
    name = target.submit(TORCHCOMMS_HANG, prefix="tc")
    ann = target.wait_verdict(name)
    assert ann[c.ANN_CATEGORY] == "gpu_hang", ann
    assert ann[c.ANN_SUSPECT_RANKS] == "1"
    assert ann[c.ANN_SUSPECT_NODES] == target.culprit_node(name)
