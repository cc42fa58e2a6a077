"""JUnit XML, the one shape every CI reads: suites of cases, a case failed or not (pure).

    <testsuites name=TITLE>
      <testsuite name=SUITE tests=N failures=F [time=S]>
        [<properties><property name= value=/>...</properties>]
        <testcase classname=SUITE name=CASE>
          [<failure message=FIRST LINE>WHOLE TEXT</failure>]

`twin verify`, `twin routes check`, drill reports and `twin ci` write it; `merge` puts
several documents' suites under one root (`twin ci`'s junit.xml).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.etree import ElementTree as ET


@dataclass
class Suite:
    name: str
    cases: list[tuple[str, str | None]]  # (case name, failure text; "" or None: passed)
    time: str | None = None
    properties: dict[str, str] = field(default_factory=dict)


def document(title: str, suites: list[Suite]) -> str:
    root = ET.Element("testsuites", name=title)
    for s in suites:
        attrs = {"name": s.name, "tests": str(len(s.cases)),
                 "failures": str(sum(1 for _, f in s.cases if f))}
        if s.time is not None:
            attrs["time"] = s.time
        suite = ET.SubElement(root, "testsuite", attrs)
        if s.properties:
            props = ET.SubElement(suite, "properties")
            for key, value in s.properties.items():
                ET.SubElement(props, "property", name=key, value=value)
        for case_name, failure in s.cases:
            case = ET.SubElement(suite, "testcase", classname=s.name, name=case_name)
            if failure:
                ET.SubElement(case, "failure", message=failure.splitlines()[0]).text = failure
    return _text(root)


def merge(title: str, documents: list[str]) -> str:
    """Every suite of several JUnit documents under one root."""
    root = ET.Element("testsuites", name=title)
    for text in documents:
        parsed = ET.fromstring(text)
        root.extend(parsed.iter("testsuite") if parsed.tag == "testsuites" else [parsed])
    return _text(root)


def _text(root: ET.Element) -> str:
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
