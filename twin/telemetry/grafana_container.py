"""`twin telemetry up --grafana`: Grafana in a container, provisioned from the lab.

The container runs the `grafana/grafana` image with the provisioning files of
twin.telemetry.provision mounted (lab/build/<lab>/grafana/), so it opens with the
lab's Prometheus as its datasource and the generated dashboards loaded.

Network: lab nodes run with network mode `none`. Grafana has to reach the lab's
Prometheus on 127.0.0.1 and be reached by a browser, so it is the one container
twin runs in the host's network namespace, told to listen on 127.0.0.1 only
(GF_SERVER_HTTP_ADDR). It carries the lab's owner labels (twin.owner), and `twin
telemetry down`, `twin down` and `twin down --all` remove it.

Where the engine cannot get the image (no registry reachable, as on machines with
no network), `start` says so in one line and twin carries on without Grafana.
"""

from __future__ import annotations

from pathlib import Path

from twin import dockerd
from twin.telemetry import provision

IMAGE = "grafana/grafana"
PORT = 3000
ROLE_LABEL = "mrc-twin.role"
MARKER = "grafana.container"  # in the lab's run directory while its container may exist


def _name(lab: str) -> str:
    return f"mrc-twin-grafana-{lab}"


def start(att, prometheus_url: str) -> str:
    """Start Grafana for the lab; returns one line: its URL, or why it does not run."""
    client = dockerd.client(timeout=30)
    if client is None:
        return "not started: no Docker engine answers (`twin engine start`); carrying on"
    out_dir = Path(att.state.build_dir) / "grafana"
    provision.write(att.fabric, att.lab, out_dir, prometheus_url)
    try:
        client.images.get(IMAGE)
    except Exception:
        try:
            client.images.pull(IMAGE, tag="latest")
        except Exception as e:
            first = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
            return (f"not started: the engine cannot get image {IMAGE} ({first}); "
                    "carrying on without Grafana (provisioning files are in "
                    f"{out_dir}, see docs/grafana.md)")
    stop(att.lab, att.state.id, att.state.dir)
    (att.state.dir / MARKER).write_text(_name(att.lab) + "\n")  # before it exists
    labels = {**att.state.owner.labels(), ROLE_LABEL: "grafana"}
    client.containers.run(
        IMAGE, name=_name(att.lab), detach=True, network_mode="host", labels=labels,
        environment={"GF_SERVER_HTTP_ADDR": "127.0.0.1", "GF_SERVER_HTTP_PORT": str(PORT),
                     "GF_AUTH_ANONYMOUS_ENABLED": "true",
                     "GF_AUTH_ANONYMOUS_ORG_ROLE": "Viewer"},
        volumes={str(out_dir / "provisioning"): {"bind": "/etc/grafana/provisioning",
                                                 "mode": "ro"},
                 str(out_dir / "dashboards"): {"bind": "/var/lib/grafana/dashboards",
                                               "mode": "ro"}})
    return f"http://127.0.0.1:{PORT} (container {_name(att.lab)})"


def stop(lab: str, lab_id: str, lab_dir: Path) -> list[str]:
    """Remove the lab's Grafana container, if `start` made one (and an engine answers)."""
    marker = lab_dir / MARKER
    if not marker.exists():
        return []
    client = dockerd.client(timeout=10)
    if client is None:
        return []
    done = []
    for c in client.containers.list(all=True, filters={"label": f"{ROLE_LABEL}=grafana"}):
        if c.labels.get("mrc-twin.lab-id") == lab_id and c.name == _name(lab):
            c.remove(force=True)
            done.append(f"removed container {c.name}")
    marker.unlink(missing_ok=True)
    return done
