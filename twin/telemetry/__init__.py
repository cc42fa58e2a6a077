"""Telemetry: what a lab is doing, as Prometheus metrics, Grafana dashboards and `twin top`.

    names       every metric's name, kind, help and labels (the interface; docs/metrics.md)
    collect     one pass over a lab: endpoints, interface counters, faults -> Sample
    exporter    /metrics on 127.0.0.1 for one lab, from collect
    prometheus  a real Prometheus scraping the exporter: config, install, start, stop
    dashboards  Grafana dashboards generated from the fabric (pure)
    provision   Grafana provisioning files under lab/build/<lab>/grafana/
    grafana     grafana-client: datasource, dashboards and fault annotations to a Grafana
    top         `twin top`: a live terminal view from collect
"""
