"""A drill beside the world MRC replaces: `twin drill run t1-blackhole --compare bgp` on
a netns mrc-4p. The main run is MRC on the static SRv6 lab and is judged; the same
faults then hit the same fabric on BGP/ECMP (lab <lab>-bgp, brought up for the
baselines and taken down after): RoCE with 8 QPs a flow, and MRC over ECMP, reported
beside it with the figures measured there, and a "BGP reconverged" row after the
rollback."""

import json

import pytest

from tests import helpers
from tests.integration.conftest import lab_name, namespaces_of
from twin.state import known_labs

pytestmark = pytest.mark.netns
LAB = lab_name("bgpdrill-4p-")


def _failed_rows(stdout: str) -> str:
    """The rows a failed drill did not meet, per run, for the assertion's message."""
    try:
        drills = json.loads(stdout)["drills"]
    except (ValueError, KeyError):
        return stdout[-3000:]
    return "\n".join(f"{d.get('variant')}: {d.get('verdict')}: {e['what']}: want {e['want']}, "
                     f"got {e['got']}" for d in drills for e in d.get("expectations", [])
                     if not e.get("ok"))


def test_a_silent_blackhole_beside_bgp(lab):
    r = helpers.twin("drill", "run", "t1-blackhole", "--lab", LAB, "--compare", "bgp",
                     "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:] + _failed_rows(r.stdout)
    runs = {d["variant"]: d for d in json.loads(r.stdout)["drills"]}
    assert set(runs) == {"mrc", "single-path x16 QPs over bgp", "mrc over bgp"}
    assert runs["mrc"]["verdict"] == "pass" and runs["mrc"]["lab"] == LAB
    for label in ("single-path x16 QPs over bgp", "mrc over bgp"):
        base = runs[label]
        assert base["lab"] == f"{LAB}-bgp" and base["verdict"] == "reported", base["outcome"]
        assert base["targets"] == runs["mrc"]["targets"]  # the same faults, the same seed
        rows = {e["what"]: e for e in base["expectations"]}
        assert rows["rollback: BGP reconverged"]["ok"], rows["rollback: BGP reconverged"]
        assert rows["rollback: verify"]["ok"]
        met = base["faults"][0]
        assert met["crossed_from"] == "link counters"
    assert runs["mrc over bgp"]["exact"]  # MRC over ECMP retires what hashes into it
    assert f"{LAB}-bgp" not in known_labs() and namespaces_of(f"{LAB}-bgp") == []
