"""A real Prometheus (Debian's package) scraping one lab's exporter.

    config(lab, exporter_url)   prometheus.yml text (pure): scrape every second
    argv(...)                   how it is started: bound to loopback, TSDB in the lab's
                                run directory
    install()                   apt-get install prometheus, when the binary is missing
    Api(url)                    the few HTTP API calls twin needs: targets, query

Debian's package would start its own service on 0.0.0.0:9090 (and its recommended
node exporter on :9100) where the machine runs init scripts. twin installs it
without recommends and with starts denied for the install (a policy-rc.d that lives
only as long as the apt call), and runs its own Prometheus per lab instead.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from twin import apt
from twin.errors import LabError

DEFAULT_PORT = 9478  # beside the exporter's 9477; 9090 is a system Prometheus's
SCRAPE_INTERVAL = "1s"


def config(lab: str, exporter_address: str) -> str:
    """prometheus.yml for one lab: the exporter scraped every second (pure)."""
    return "\n".join([
        f"# written by `twin telemetry up {lab}`; rewritten on every start",
        "global:",
        f"  scrape_interval: {SCRAPE_INTERVAL}",
        f"  evaluation_interval: {SCRAPE_INTERVAL}",
        "scrape_configs:",
        "  - job_name: mrc-twin",
        "    honor_labels: true  # the exporter's own lab label",
        f"    scrape_timeout: {SCRAPE_INTERVAL}",
        "    static_configs:",
        f"      - targets: ['{exporter_address}']",
        "",
    ])


def argv(binary: str, config_file: Path, data_dir: Path, address: str) -> list[str]:
    return [binary, f"--config.file={config_file}", f"--storage.tsdb.path={data_dir}",
            f"--web.listen-address={address}", "--storage.tsdb.retention.time=7d",
            "--web.enable-lifecycle"]


def binary() -> str | None:
    return shutil.which("prometheus")


def install(note=None) -> str:
    """Debian's prometheus, without recommends and without starting its service."""
    return apt.install("prometheus", binary, "twin telemetry's Prometheus", note)


class Api:
    """Prometheus's HTTP API, the calls twin makes (stdlib only)."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _get(self, path: str, **params) -> dict:
        q = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}{path}{q}", timeout=self.timeout) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:300]
            raise LabError(f"prometheus {self.url}{path}: HTTP {e.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise LabError(f"prometheus {self.url}: unreachable: {reason}") from None
        if body.get("status") != "success":
            raise LabError(f"prometheus {self.url}{path}: {body.get('error', body)}")
        return body["data"]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=self.timeout) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def targets(self) -> list[dict]:
        return self._get("/api/v1/targets", state="active")["activeTargets"]

    def query(self, expr: str) -> list[dict]:
        """An instant query: its series, each {"metric": {...}, "value": [t, "v"]}."""
        return self._get("/api/v1/query", query=expr)["result"]
