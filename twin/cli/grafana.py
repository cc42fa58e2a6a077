"""`twin grafana`: a lab's Grafana dashboards, generated from its fabric.

    grafana dashboards   the provisioning files, for a Grafana started on them (pure)
    grafana push         data source, folder, dashboard and fault annotations, through
                         a running Grafana's HTTP API
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from twin import faults as F
from twin import lab as L
from twin.cli.base import emit_json, lab_option, main, out
from twin.errors import UsageError
from twin.state import known_labs
from twin.telemetry import dashboards as D
from twin.telemetry import grafana as G
from twin.telemetry import provision as P


@main.group()
def grafana():
    """Grafana dashboards for a lab, generated from its fabric: nobody edits them.

    \b
      twin grafana dashboards                write the provisioning files for a Grafana
                                             you start (lab/build/<lab>/grafana/)
      twin grafana push --url URL --token T  put them into a running Grafana, with
                                             the lab's faults drawn as regions
    `twin telemetry up --grafana` starts a Grafana on them for you. See docs/grafana.md.
    """


def _prometheus_url(att, given: str | None) -> str:
    if given:
        return given
    recorded = G.recorded_prometheus_url(att.state.dir) if att else None
    return recorded or P.DEFAULT_PROMETHEUS_URL


@grafana.command("push")
@click.option("--url", envvar="GRAFANA_URL", required=True, metavar="URL",
              help="The Grafana, e.g. http://127.0.0.1:3000 (or $GRAFANA_URL).")
@click.option("--token", envvar="GRAFANA_TOKEN", default=None, metavar="T",
              help="A service account token, Admin role (or $GRAFANA_TOKEN; keeps it out "
                   "of the shell's history).")
@click.option("--user", default=None, metavar="U", help="Basic auth user, with --password.")
@click.option("--password", envvar="GRAFANA_PASSWORD", default=None, metavar="P",
              help="Basic auth password (or $GRAFANA_PASSWORD).")
@click.option("--folder", default=P.FOLDER, show_default=True,
              help="The Grafana folder for the dashboard (made if missing).")
@lab_option()
@click.option("--prometheus-url", default=None, metavar="URL",
              help="The lab's Prometheus as Grafana reaches it (default: what `twin "
                   f"telemetry up` recorded, else {P.DEFAULT_PROMETHEUS_URL}).")
@click.option("--json", "as_json", is_flag=True, help="What was done, as JSON.")
def grafana_push(url, token, user, password, folder, lab, prometheus_url, as_json):
    """Push a lab's dashboard and its faults to a running Grafana.

    \b
    In order, each safe to repeat:
      data source  the lab's Prometheus, "mrc-twin-<lab>": created, or updated
      folder       --folder, created if missing
      dashboard    "<lab>: fabric overview", replacing the last push (uid twin-<lab>)
      annotations  every fault in the lab's log as a region, apply to revert
                   (one in force: a point, given its end by the next push); one
                   already there is updated, never posted twice
    A blind drill's hidden fault is drawn as "hidden", its kind and target untold.
    Credentials: --token, or --user and --password; the data source needs the
    Admin role. A refusal is one line with Grafana's URL and HTTP status, exit 1.
    """
    if token and (user or password):
        raise UsageError("give --token (or $GRAFANA_TOKEN), or --user and --password, not both")
    if bool(user) != bool(password):
        raise UsageError("--user and --password go together")
    att = L.attach(lab)
    result = G.push(url, token=token, user=user, password=password, fabric=att.fabric,
                    lab=att.lab, events=F.events(att), folder=folder,
                    prometheus_url=_prometheus_url(att, prometheus_url))
    if as_json:
        emit_json(result.to_dict())
        return
    ds, ann = result.datasource, result.annotations
    out.print(f"grafana {result.url} ({result.grafana_version}): lab [bold]{result.lab}"
              "[/bold]")
    out.print(f"  data source  {ds['name']} (uid {ds['uid']}) -> {ds['url']}: {ds['action']}")
    out.print(f"  folder       {result.folder['title']} (uid {result.folder['uid']})")
    for board in result.dashboards:
        out.print(f"  dashboard    {board['title']}: {board['url']} (version {board['version']})")
    out.print(f"  annotations  {ann['regions']} fault regions ({ann['in_force']} in force): "
              f"{ann['created']} created, {ann['updated']} updated, {ann['unchanged']} "
              "already there")


@grafana.command("dashboards")
@lab_option(positional=True, help="A lab that is up (default: the one that is), or a spec "
                                  "(mrc-4p) for a lab that is not.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Where to write (default: lab/build/<lab>/grafana/).")
@click.option("--prometheus-url", default=None, metavar="URL",
              help="The data source's URL (default: what `twin telemetry up` recorded, "
                   f"else {P.DEFAULT_PROMETHEUS_URL}).")
@click.option("--json", "as_json", is_flag=True,
              help="The files written and the dashboards themselves, as JSON.")
def grafana_dashboards(lab, out_dir, prometheus_url, as_json):
    """Write a lab's Grafana provisioning: its Prometheus as the data source, and the
    overview dashboard (no root, no Grafana needed).

    \b
    LAB is a lab that is up (default: the one that is), or a spec (mrc-4p) for a
    lab that is not. Files, under lab/build/<lab>/grafana/:
      provisioning/datasources/mrc-twin.yaml
      provisioning/dashboards/mrc-twin.yaml   JSON files of /var/lib/grafana/dashboards
      dashboards/twin-<lab>.json
    Mount provisioning/ on /etc/grafana/provisioning and dashboards/ on
    /var/lib/grafana/dashboards; the output prints the `docker run` line.
    """
    if not lab and not known_labs():
        raise UsageError("no lab is up: name a spec for its dashboards before `twin up` "
                         "(`twin grafana dashboards mrc-4p`)")
    if lab and lab not in known_labs():
        att, compiled = None, L.compile_spec(lab)  # a spec: its dashboards, before `up`
        fabric, name, default_dir = compiled.fabric, compiled.spec.name, compiled.build_dir()
    else:
        att = L.attach(lab)
        fabric, name, default_dir = att.fabric, att.lab, Path(att.state.build_dir)
    where = out_dir or default_dir / "grafana"
    url = _prometheus_url(att, prometheus_url)
    files = P.write(fabric, name, where, url)
    docker = P.docker_run_argv(where, name)
    if as_json:
        emit_json({"lab": name, "dir": str(where), "prometheus_url": url,
                   "datasource_uid": P.datasource_uid(name),
                   "files": [str(f) for f in files], "docker_run": docker,
                   "dashboards": [D.overview(fabric, name, P.datasource_uid(name))]})
        return
    out.print(f"wrote {len(files)} files for {name} under {where} (data source {url}):")
    for f in files:
        out.print(f"  {f.relative_to(where)}")
    out.print("run a Grafana on them (http://127.0.0.1:3000, admin/admin):")
    out.print(f"  {shlex.join(docker)}", markup=False)
