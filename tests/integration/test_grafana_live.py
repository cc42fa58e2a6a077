"""twin.telemetry.grafana against a real Grafana: set GRAFANA_URL, and GRAFANA_TOKEN (a
service account token, Admin role) or GRAFANA_USER and GRAFANA_PASSWORD. Without them
every test here skips. What a test makes (data source, folder, dashboard, annotations)
it names after this session's own lab name, and removes."""

import os
import time

import pytest

from tests.doubles.fake_grafana import frontend_problems
from tests.integration.conftest import lab_name
from twin.errors import GrafanaError
from twin.lab import compile_spec
from twin.telemetry import dashboards as D
from twin.telemetry import grafana as G
from twin.telemetry import provision as P

URL = os.environ.get("GRAFANA_URL", "")
TOKEN = os.environ.get("GRAFANA_TOKEN") or None
USER = os.environ.get("GRAFANA_USER") or None
PASSWORD = os.environ.get("GRAFANA_PASSWORD") or None

pytestmark = pytest.mark.skipif(
    not URL or not (TOKEN or (USER and PASSWORD)),
    reason="no Grafana to test against: set GRAFANA_URL and GRAFANA_TOKEN (or GRAFANA_USER "
           "and GRAFANA_PASSWORD); see docs/grafana.md")

LAB = lab_name("grafana")
FOLDER = f"mrc-twin-test-{LAB}"
LINK = "t0-p0-r0:eth3--t1-p0-0:eth1"


def creds() -> dict:
    return {"token": TOKEN} if TOKEN else {"user": USER, "password": PASSWORD}


def events(start: float) -> list[dict]:
    def ev(event, t, **more):
        return {"t_wall": start + t, "t_mono_ns": 0, "event": event, "kind": "link-down",
                "target": LINK, "ends": ["t0-p0-r0:eth3"], **more}

    return [ev("apply", 0), ev("revert", 3),
            {**ev("apply", 5), "kind": "blackhole", "target": "t1-p0-1", "hidden": True}]


@pytest.fixture(scope="module")
def grafana():
    g = G.connect(URL, **creds())
    yield g
    cleanup(g)


def cleanup(g: G.Grafana) -> None:
    """Remove what this module made; each step bounded by the client's timeout."""
    api = g.api
    for step in (
        lambda: api.dashboard.delete_dashboard(D.overview_uid(LAB)),
        lambda: api.datasource.delete_datasource_by_uid(P.datasource_uid(LAB)),
    ):
        try:
            step()
        except Exception:  # noqa: BLE001 - already gone, or never made
            pass
    try:
        made = g.find_annotations([G.MRC_TAG, LAB], 1, int(time.time() * 1000) + 60_000, 500)
        for a in made[:500]:
            api.annotations.delete_annotations_by_id(a["id"])
        folder = next((f for f in api.folder.get_all_folders() if f["title"] == FOLDER), None)
        if folder:
            api.folder.delete_folder(folder["uid"])
    except Exception:  # noqa: BLE001
        pass


def test_health_and_version(grafana):
    assert grafana.version and grafana.health()["database"] == "ok"


def test_push_then_push_again(grafana):
    start = time.time() - 60
    fabric = compile_spec("mrc-4p").fabric
    first = G.push(URL, **creds(), fabric=fabric, lab=LAB, events=events(start), folder=FOLDER)
    assert first.annotations["regions"] == 2
    stored = grafana.api.dashboard.get_dashboard(D.overview_uid(LAB))
    assert stored["meta"]["folderUid"] == first.folder["uid"]
    assert frontend_problems(stored["dashboard"], {P.datasource_uid(LAB)}) == []
    assert grafana.api.datasource.get_datasource_by_uid(P.datasource_uid(LAB))["type"] \
        == "prometheus"
    second = G.push(URL, **creds(), fabric=fabric, lab=LAB, events=events(start),
                    folder=FOLDER)
    assert second.datasource["action"] == "unchanged"
    assert second.dashboards[0]["version"] > first.dashboards[0]["version"]
    assert second.annotations["created"] == 0 and second.annotations["unchanged"] == 2
    found = grafana.find_annotations([G.MRC_TAG, LAB], int(start * 1000) - 1,
                                     int(start * 1000) + 10_000, 100)
    assert len(found) == 2
    hidden = next(a for a in found if "hidden" in a["tags"])
    assert "t1-p0-1" not in hidden["text"] and "blackhole" not in " ".join(hidden["tags"])


def test_live_annotator_patches_a_region(grafana):
    start = time.time() - 30
    with G.LiveAnnotator(grafana, LAB, tags=["live"]) as annotator:
        annotator.fault_applied("link-down", LINK, start)
        annotator.fault_reverted("link-down", LINK, start + 2)
    assert annotator.error is None and annotator.patched == 1
    found = grafana.find_annotations([G.MRC_TAG, LAB, "live"], int(start * 1000) - 1,
                                     int(start * 1000) + 5_000, 10)
    (ann,) = found
    assert ann["timeEnd"] - ann["time"] == 2000
    assert "link-down" in ann["tags"]


def test_a_wrong_token_is_one_line_with_401():
    with pytest.raises(GrafanaError) as e:
        G.connect(URL, token="glsa_not_a_real_token_0000000000000000")
    assert "\n" not in str(e.value)
    assert str(e.value).startswith(f"grafana {URL.rstrip('/')}: 401 ")
