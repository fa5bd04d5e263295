"""docs/report.schema.json: generated from report.py, current, and valid for real reports from CPU verifies."""

from __future__ import annotations

import copy
import json

import pytest

from kernelagent.verifier import schema
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.options import VerifyOptions
from kernelagent.verifier.report import CATEGORIES, SCHEMA_VERSION, Report, Stage
from tests.paths import SOFTMAX_PROBLEM, softmax_case

jsonschema = pytest.importorskip("jsonschema")  # a dev requirement; the GPU image lacks it


@pytest.fixture(scope="module")
def committed() -> dict:
    return json.loads(schema.SCHEMA_FILE.read_text())


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    with Verifier(VerifyOptions(device="cpu", seeds=1, timeout=120)) as v:
        return {name: v.verify(SOFTMAX_PROBLEM, softmax_case(name)).to_dict() for name in ("good", "mismatch_mask")}


def test_committed_schema_is_regenerated_from_report_py(committed):
    assert committed == schema.report_schema(), "report.py changed: run python -m kernelagent.verifier.schema"
    assert committed["x-generated-from"]["sha256"] == schema.source_digest()
    assert schema.main(["--check"]) == 0


def test_schema_follows_the_dataclasses(committed):
    assert set(committed["properties"]) == set(Report.__dataclass_fields__)
    assert set(committed["$defs"]["Stage"]["properties"]) == set(Stage.__dataclass_fields__)
    assert committed["properties"]["category"]["enum"] == list(CATEGORIES)
    assert committed["properties"]["schema"]["const"] == SCHEMA_VERSION
    jsonschema.Draft202012Validator.check_schema(committed)


def test_real_reports_validate(committed, reports):
    assert reports["good"]["verdict"] == "accepted" and reports["mismatch_mask"]["category"] == "mismatch"
    validator = jsonschema.Draft202012Validator(committed)
    for name, doc in reports.items():
        errors = [e.message for e in validator.iter_errors(json.loads(json.dumps(doc, default=str)))]
        assert errors == [], (name, errors)


def test_schema_rejects_what_a_report_never_holds(committed, reports):
    validator = jsonschema.Draft202012Validator(committed)
    for change in ({"category": "made_up"}, {"verdict": "maybe"}, {"surprise": 1}, {"schema": SCHEMA_VERSION + 1}):
        doc = {**copy.deepcopy(reports["good"]), **change}
        assert not validator.is_valid(doc), change
    doc = copy.deepcopy(reports["good"])
    doc["stages"][0]["status"] = "fine"
    assert not validator.is_valid(doc)
