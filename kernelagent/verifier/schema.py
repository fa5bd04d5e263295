"""JSON Schema of the verifier's Report, generated from the dataclasses in report.py.

Outside agents read `verify --json` and the MCP server's results against docs/report.schema.json.
Regenerate it after any change to report.py (a test fails until then):

    python -m kernelagent.verifier.schema            # writes docs/report.schema.json
    python -m kernelagent.verifier.schema --check    # exit 1 when the file is stale
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

from kernelagent.verifier import report as R

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "report.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

# values that report.py states in words (docstrings, comments), given here as enumerations
ENUMS: dict[tuple[str, str], list[str]] = {
    ("Report", "verdict"): list(R.VERDICTS),
    ("Report", "category"): list(R.CATEGORIES),
    ("Report", "blame"): ["candidate", "problem", "verifier"],
    ("Stage", "status"): ["passed", "failed", "skipped", "warning"],
}
DOCS: dict[tuple[str, str], str] = {
    ("Report", "verdict"): "accepted only when every stage passed (category `ok`); unverified when a kernel "
                           "compiled but could not be run without a GPU (category `compile_only`): not an "
                           "acceptance; rejected otherwise. See x-verdicts",
    ("Report", "category"): "why: one of the categories below (`ok` for accepted, `compile_only` for unverified); "
                            "see x-categories",
    ("Report", "message"): "one line saying what decided the verdict",
    ("Report", "feedback"): "text written for an LLM: trimmed error, where and how much outputs differ, timings",
    ("Report", "problem"): "path, name and sha256 of the problem file",
    ("Report", "candidate"): "path, sha256 and backend (triton | cute) of the candidate file",
    ("Report", "stages"): "every stage that ran, in order",
    ("Report", "metrics"): "numbers: verify_seconds, trials, trials_passed, rel_l2, max_abs_err, candidate_ms, "
                           "eager_ms, compile_ms, speedup_eager, speedup_compile, roofline_pct, cost_seconds, ...",
    ("Report", "environment"): "device, gpu, driver, python, torch, triton, cutlass versions",
    ("Report", "blame"): "whose fault a rejection is: the candidate's, the problem's (exit 2) or the verifier's "
                         "(meaningful for verdict `rejected` only)",
    ("Report", "schema"): "version of this schema; bumped when a field changes meaning or goes away",
    ("Report", "created"): "ISO 8601 time (UTC) the report was made",
    ("Stage", "name"): "load, policy, reference, import, correctness, probes, compile, integrity, timing, ...",
    ("Stage", "details"): "stage-specific facts (policy findings, compile registers and spills, ...)",
}


def _type_schema(tp: Any) -> dict[str, Any]:
    """JSON Schema of one annotation (the few kinds report.py uses)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return {}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_type_schema(a) for a in typing.get_args(tp)]}
    if tp is type(None):
        return {"type": "null"}
    if dataclasses.is_dataclass(tp):
        return {"$ref": f"#/$defs/{tp.__name__}"}
    if origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        return {"type": "array", "items": _type_schema(item)}
    if origin is dict or tp is dict:
        return {"type": "object"}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if tp in simple:
        return {"type": simple[tp]}
    raise TypeError(f"no JSON Schema mapping for {tp!r}: extend kernelagent/verifier/schema.py")


def _object(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        prop = _type_schema(hints[f.name])
        if prop.get("type") == "number":
            prop = {"type": ["number", "integer"]}
        enum = ENUMS.get((cls.__name__, f.name))
        if enum:
            prop["enum"] = enum
        doc = DOCS.get((cls.__name__, f.name))
        if doc:
            prop["description"] = doc
        props[f.name] = prop
    doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else cls.__name__
    return {"type": "object", "description": doc, "properties": props,
            "required": [f.name for f in dataclasses.fields(cls)], "additionalProperties": False}


def source_digest() -> str:
    return hashlib.sha256(Path(R.__file__).read_bytes()).hexdigest()


def report_schema() -> dict[str, Any]:
    """The schema document, versioned by report.SCHEMA_VERSION."""
    root = _object(R.Report)
    root["properties"]["schema"]["const"] = R.SCHEMA_VERSION
    return {
        "$schema": DIALECT,
        "$id": f"urn:kernelagent:report:v{R.SCHEMA_VERSION}",
        "title": "kernelagent verification report",
        "description": "The output of `kernelagent verify --json` and of the MCP `verify` tool.",
        "x-schema-version": R.SCHEMA_VERSION,
        "x-generated-from": {"module": "kernelagent/verifier/report.py", "sha256": source_digest()},
        "x-verdicts": dict(R.VERDICTS),
        "x-categories": dict(R.CATEGORIES),
        **{k: v for k, v in root.items() if k != "description"},
        "$defs": {"Stage": _object(R.Stage)},
    }


def render() -> str:
    return json.dumps(report_schema(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in args:
        current = SCHEMA_FILE.read_text() if SCHEMA_FILE.exists() else ""
        if current != text:
            print(f"{SCHEMA_FILE} is stale: run python -m kernelagent.verifier.schema", file=sys.stderr)
            return 1
        return 0
    SCHEMA_FILE.parent.mkdir(parents=True, exist_ok=True)
    SCHEMA_FILE.write_text(text)
    print(f"wrote {SCHEMA_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
