"""Chaos runs and failure drills.

    drill     a drill file (lab/drills/*.yml): parsed and validated like a spec
    metrics   per-fault figures from the endpoints' event logs (pure)
    runner    runs a drill on a lab: steady state, timeline, expectations, rollback
    results   a run's results as types (DrillRun, Judged, FaultFigures, LinkLoad); JSON
              at the edge only
    report    report.html / report.json / junit.xml from a run's results
    blind     trainee drills: one hidden fault, an answer, a score
    record    the CLI's hook: each twin command run during a blind drill, in its state
"""
