"""JUnit XML, the one shape every CI reads: suites of cases, a case failed or not (pure).

    <testsuites name=TITLE>
      <testsuite name=SUITE tests=N failures=F [time=S]>
        [<properties><property name= value=/>...</properties>]
        <testcase classname=SUITE name=CASE>
          [<failure message=FIRST LINE>WHOLE TEXT</failure>]

`twin verify`, `twin routes check`, drill reports and `twin ci` write it; `document`
also takes other documents, whose suites it puts under the same root (`twin ci`'s
junit.xml).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.etree import ElementTree as ET


@dataclass
class Case:
    """A case with more than a name and a failure: skipped (with why), or timed."""

    name: str
    failure: str = ""
    skipped: str = ""
    time: str | None = None


@dataclass
class Suite:
    name: str
    cases: list[tuple[str, str | None] | Case]  # (name, failure text; "" or None: passed)
    time: str | None = None
    properties: dict[str, str] = field(default_factory=dict)


def _case(c: tuple[str, str | None] | Case) -> Case:
    return c if isinstance(c, Case) else Case(c[0], c[1] or "")


def document(title: str, suites: list[Suite], documents: list[str] = ()) -> str:
    """Suites under one root, then every suite of `documents` (other JUnit texts)."""
    root = ET.Element("testsuites", name=title)
    for s in suites:
        cases = [_case(c) for c in s.cases]
        attrs = {"name": s.name, "tests": str(len(cases)),
                 "failures": str(sum(1 for c in cases if c.failure))}
        if any(c.skipped for c in cases):
            attrs["skipped"] = str(sum(1 for c in cases if c.skipped))
        if s.time is not None:
            attrs["time"] = s.time
        suite = ET.SubElement(root, "testsuite", attrs)
        if s.properties:
            props = ET.SubElement(suite, "properties")
            for key, value in s.properties.items():
                ET.SubElement(props, "property", name=key, value=value)
        for c in cases:
            case = ET.SubElement(suite, "testcase", classname=s.name, name=c.name,
                                 **({"time": c.time} if c.time is not None else {}))
            if c.skipped:
                ET.SubElement(case, "skipped", message=c.skipped)
            elif c.failure:
                ET.SubElement(case, "failure", message=c.failure.splitlines()[0]).text = \
                    c.failure
    for text in documents:
        parsed = ET.fromstring(text)
        root.extend(parsed.iter("testsuite") if parsed.tag == "testsuites" else [parsed])
    if documents:
        for key in ("tests", "failures"):
            root.set(key, str(sum(int(suite.get(key, 0)) for suite in root)))
    return _text(root)


def _text(root: ET.Element) -> str:
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
