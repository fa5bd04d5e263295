"""Library tools: list and show entries, verify them (and spot drift), find entries computing the same
function as a problem, and promote a verified kernel onto the user's shelf. Used by the CLI, the agent
and outside agents.

Entries are added to `$KERNELAGENT_HOME/library/<name>/` only: the installed package is never written
to. A shipped card's `verified` list can be filled (`record`) only in a source checkout.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelagent.kernels import LIBRARY_ROOT, LibraryEntry, LibraryError, get_entry, list_entries, user_root
from kernelagent.problem import inspect_problem
from kernelagent.verifier.api import Verifier
from kernelagent.verifier.report import Report

NAME_RE = r"[a-z][a-z0-9_]{1,40}"
ENV_KEYS = ("device", "gpu", "capability", "torch", "triton", "cutlass", "cuda", "python")
TIMING_KEYS = ("candidate_ms", "eager_ms", "compile_ms", "speedup_eager", "speedup_compile", "speedup_eager_ci",
               "speedup_compile_ci", "roofline_pct", "roofline_bound")
SLOWER = 1.15  # a re-verification this much slower than the card's figure on the same GPU is drift


def normalize_ops(ops: list[str]) -> set[str]:
    """'aten::_softmax' and 'aten._softmax.default' both become 'aten._softmax'."""
    out = set()
    for op in ops:
        op = op.replace("::", ".")
        parts = op.split(".")
        out.add(".".join(parts[:2]))
    return out


def entry_summary(e: LibraryEntry) -> dict[str, Any]:
    card = e.card
    return {"name": e.name, "family": e.family, "origin": e.origin, "backends": sorted(e.backends),
            "summary": card.get("summary", ""), "dtypes": card.get("dtypes", []),
            "verified": card.get("verified", []), "path": str(e.path)}


def match_problem(problem: str | Path, verifier: Verifier, entries: list[LibraryEntry] | None = None
                  ) -> list[dict[str, Any]]:
    """Library entries (both shelves) whose reference computes the same function as `problem` (in a worker)."""
    entries = entries if entries is not None else list_entries()
    if not entries:
        return []
    try:
        results = verifier.match(problem, {e.name: e.reference_path for e in entries})
    except ValueError as e:
        raise LibraryError(f"could not compare {problem} with the library: {e}") from e
    origin = {e.name: e.origin for e in entries}
    return [{**r, "origin": origin.get(r.get("name"), "")} for r in results]


def verify_entry(entry: LibraryEntry, backend: str, verifier: Verifier, problem: str | Path | None = None) -> Report:
    if backend not in entry.backends:
        raise LibraryError(f"{entry.name} has no {backend} kernel (it has: {', '.join(sorted(entry.backends))})")
    return verifier.verify(problem or entry.reference_path, entry.backends[backend])


# -- where a kernel to add comes from -----------------------------------------------------------------


@dataclass
class KernelSource:
    """A kernel to add: its source, the problem it solves, and where it came from (for the card)."""

    source: str
    reference: Path
    origin: dict[str, Any]


def resolve_kernel(what: str, ref: Path | None, store: Any = None) -> KernelSource:
    """A kernel FILE (with `ref`), or an ATTEMPT_ID or RUN_ID (or a unique prefix) from the memory store.

    For ids the problem comes from the store unless `ref` is given. Raises LibraryError.
    """
    path = Path(what)
    if path.is_file():
        if ref is None:
            raise LibraryError(f"give the problem the kernel solves: --ref OP.py (for {what})")
        return KernelSource(path.read_text(encoding="utf-8"), ref, {"from": "file", "path": str(path.resolve())})
    if store is None:
        from kernelagent.memory import open_store
        store = open_store()
    attempt, origin = store.attempt(what), None
    if attempt is not None:
        origin = {"from": "attempt", "attempt_id": attempt["id"], "run_id": attempt["run_id"]}
    else:
        run = store.run(what)
        if run is None:
            raise LibraryError(f"{what!r} is neither a file nor an attempt or run id in the memory store")
        attempt = _best_attempt(store, run)
        origin = {"from": "run", "run_id": run["id"], "attempt_id": attempt["id"]}
    if attempt["verdict"] != "accepted":
        raise LibraryError(f"attempt {attempt['id']} was {attempt['category']}, not accepted: nothing to add")
    return KernelSource(attempt["source"], ref or _stored_problem(store, attempt["problem_id"]), origin)


def _best_attempt(store: Any, run: dict[str, Any]) -> dict[str, Any]:
    if run.get("best_attempt_id"):
        return store.attempt(run["best_attempt_id"])
    rows = [a for a in store.attempts_for_run(run["id"]) if a["verdict"] == "accepted"]
    if not rows:
        raise LibraryError(f"run {run['id']} has no accepted attempt")
    return max(rows, key=lambda a: a["speedup_eager"] or 0.0)


def _stored_problem(store: Any, problem_id: str) -> Path:
    """The problem's source as the store kept it, written to a temporary file named after the problem."""
    row = store.query("select name, source from problems where id = ?", (problem_id,))
    if not row:
        raise LibraryError(f"problem {problem_id[:12]} is not in the memory store; give --ref OP.py")
    folder = Path(tempfile.mkdtemp(prefix="kernelagent-ref-"))
    path = folder / f"{re.sub(r'[^A-Za-z0-9_]', '_', row[0]['name'] or 'problem')}.py"
    path.write_text(row[0]["source"], encoding="utf-8")
    return path


# -- add, remove ----------------------------------------------------------------------------------------


def check_name(name: str) -> None:
    if not re.fullmatch(NAME_RE, name):
        raise LibraryError(f"{name!r}: a library name is lowercase letters, digits and underscores, 2-41 "
                           "characters, starting with a letter")
    taken = [e for e in list_entries() if name in (e.name, e.path.name)]
    if taken:
        raise LibraryError(f"library entry {name!r} already exists ({taken[0].origin}, {taken[0].path})")


def add_entry(kernel: KernelSource, name: str, verifier: Verifier, summary: str = "",
              root: Path | None = None) -> tuple[Report, Path | None]:
    """Re-verify `kernel` on its problem's shapes; if accepted, write it with a complete card under `root`
    (default: the user's shelf). Returns the report and the new folder (None when rejected)."""
    check_name(name)
    with tempfile.TemporaryDirectory(prefix="kernelagent-add-") as tmp:
        candidate = Path(tmp) / "kernel.py"
        candidate.write_text(kernel.source, encoding="utf-8")
        report = verifier.verify(kernel.reference, candidate)
    if not report.accepted:
        return report, None
    spec = inspect_problem(kernel.reference)
    meta = verifier.reference(spec).meta
    backend = report.candidate.get("backend") or "triton"
    folder = (root or user_root()) / name
    folder.mkdir(parents=True)
    (folder / "reference.py").write_text(spec.source, encoding="utf-8")
    (folder / f"{'cute' if backend == 'cute' else 'triton'}.py").write_text(kernel.source, encoding="utf-8")
    card = make_card(name, summary, backend, spec, meta, report, kernel.origin)
    write_card(folder, card)
    (folder / "report.json").write_text(json.dumps(report.to_dict(), indent=1, default=str) + "\n")
    return report, folder


def make_card(name: str, summary: str, backend: str, spec: Any, meta: dict[str, Any], report: Report,
              origin: dict[str, Any]) -> dict[str, Any]:
    """Everything a reader of the card needs: what it computes, on what, how verified, how fast, where from."""
    work = meta.get("work") or {}
    shapes = list(dict.fromkeys(t.get("input_desc", "") for t in meta.get("trials", []) if t.get("input_desc")))
    return {"name": name, "family": name, "summary": summary or f"{spec.name}, promoted from a verified kernel",
            "backends": [backend], "signature": meta.get("op_signature", []), "dtypes": work.get("dtypes", []),
            "shapes_verified": shapes, "tolerance": spec.tolerance or "per-dtype defaults",
            "backward": bool(spec.backward), "source_problem": spec.name, "origin": origin,
            "verified": [verified_row(report, backend)], "added": _today(),
            "notes": "added with `kernelagent library add`; report.json holds the full verification report"}


def write_card(folder: Path, card: dict[str, Any]) -> None:
    (folder / "card.json").write_text(json.dumps(card, indent=2, default=str) + "\n", encoding="utf-8")
    (folder / "card.md").write_text(card_markdown(card), encoding="utf-8")


def card_markdown(card: dict[str, Any]) -> str:
    """The card as a short markdown page; every field is optional."""
    lines = [f"# {card.get('name', '?')}", "", card.get("summary", ""), ""]
    for label, key in (("Signature", "signature"), ("Dtypes", "dtypes"), ("Shapes verified", "shapes_verified")):
        if card.get(key):
            lines.append(f"- {label}: {', '.join(map(str, card[key]))}")
    if card.get("tolerance"):
        lines.append(f"- Tolerance: {card['tolerance']}")
    if card.get("origin"):
        lines.append(f"- Origin: {', '.join(f'{k} {v}' for k, v in card['origin'].items())}")
    rows = card.get("verified") or []
    if rows:
        lines += ["", "| date | backend | device | torch | triton | ms | vs eager | vs compile |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r.get('date', '')} | {r.get('backend', '')} | {r.get('gpu') or r.get('device', '')} | "
                         f"{r.get('torch', '')} | {r.get('triton', '')} | {_fmt(r.get('candidate_ms'))} | "
                         f"{_fmt(r.get('speedup_eager'), 'x')} | {_fmt(r.get('speedup_compile'), 'x')} |")
    return "\n".join(lines) + "\n"


def _fmt(value: Any, unit: str = "") -> str:
    return "not measured" if value is None else f"{value:.3g}{unit}"


def _today() -> str:
    return _dt.date.today().isoformat()


def verified_row(report: Report, backend: str) -> dict[str, Any]:
    """One line of a card's `verified` list: when, where, with what, how fast (None: not measured)."""
    env, m = report.environment, report.metrics
    row = {"date": (report.created or _today())[:10], "backend": backend,
           **{k: env.get(k) for k in ENV_KEYS if env.get(k)}, "trials": m.get("trials"),
           **{k: m.get(k) for k in TIMING_KEYS if m.get(k) is not None}}
    row.setdefault("device", env.get("gpu") and "cuda" or "cpu")
    return row


def remove_entry(name: str) -> Path:
    """Delete one of the user's entries; shipped entries are never removed. Returns the folder removed."""
    entries = [e for e in list_entries() if name in (e.name, e.path.name)]
    user = [e for e in entries if e.origin == "user"]
    if not user:
        if entries:
            raise LibraryError(f"{name!r} ships with kernelagent and is not removed; only entries in "
                               f"{user_root()} are yours to remove")
        raise LibraryError(f"no library entry named {name!r} in {user_root()}")
    shutil.rmtree(user[0].path)
    return user[0].path


# -- re-verification and drift ------------------------------------------------------------------------


def drift(card: dict[str, Any], backend: str, report: Report) -> list[str]:
    """What changed since the card's last figure for this backend: a lost verdict, or a slower kernel on
    the same GPU (with the versions that changed). Empty when nothing did, or nothing was recorded."""
    rows = [r for r in card.get("verified") or [] if r.get("backend", backend) == backend]
    if not rows:
        return []
    where = report.environment.get("gpu") or "cpu"
    same = [r for r in rows if (r.get("gpu") or "cpu") == where]
    prev = (same or rows)[-1]
    when = f"{prev.get('date', '?')} on {prev.get('gpu') or prev.get('device', '?')}"
    if report.unverified:  # compiled, never run (no GPU): neither a lost verdict nor a time to compare
        return []
    if not report.accepted:
        return [f"was accepted {when}; now {report.category}: {report.message[:160]}"]
    old, new = prev.get("candidate_ms"), report.metrics.get("candidate_ms")
    if not same or not old or not new or new <= old * SLOWER:
        return []
    changed = [f"{k} {prev.get(k)} -> {report.environment.get(k)}" for k in ("torch", "triton", "cutlass")
               if prev.get(k) and report.environment.get(k) and prev.get(k) != report.environment.get(k)]
    tail = f" after {', '.join(changed)}" if changed else ""
    return [f"{new / old:.2f}x slower than {when}: {old:.4g} -> {new:.4g} ms{tail}"]


def reverify(entries: list[LibraryEntry], verifier: Verifier, progress: Any = None) -> list[dict[str, Any]]:
    """Verify every backend of `entries`; one row each with the verdict, the card row it would add and drift."""
    out = []
    for entry in entries:
        for backend in sorted(entry.backends):
            if progress is not None:
                progress(f"verifying {entry.name} ({backend}) ...")
            out.append(verify_result(entry, backend, verify_entry(entry, backend, verifier)))
    return out


def verify_result(entry: LibraryEntry, backend: str, report: Report) -> dict[str, Any]:
    """One row of `library verify --json` for `entry`'s `backend` kernel verified as `report` (also from a
    batch's stored report: `--from` records it like a re-verification)."""
    return {"name": entry.name, "origin": entry.origin, "backend": backend, "verdict": report.verdict,
            "category": report.category, "message": report.message, "metrics": report.metrics,
            "environment": report.environment, "row": verified_row(report, backend) if report.accepted else None,
            "drift": drift(entry.card, backend, report)}


def writable(entry: LibraryEntry) -> bool:
    """User entries always; shipped ones only in a source checkout, never in an installed package."""
    if entry.origin == "user":
        return True
    installed = any(part in ("site-packages", "dist-packages") for part in LIBRARY_ROOT.parts)
    return not installed and entry.path.is_relative_to(LIBRARY_ROOT)


def recordable(r: dict[str, Any]) -> bool:
    """A `library verify` row that may go into a card: one with a card row and no verdict other than accepted.
    Never a compile-only run (verdict `unverified`; outputs older than that verdict said `accepted` with
    metrics.compile_only), which ran nothing."""
    compile_only = bool((r.get("metrics") or {}).get("compile_only"))
    return bool(r.get("row")) and r.get("verdict", "accepted") == "accepted" and not compile_only


def record(rows: list[dict[str, Any]]) -> list[str]:
    """Put each accepted row into its entry's card (replacing one for the same backend, device and versions).

    Returns the names of the cards written; raises LibraryError for a card that may not be written.
    """
    written = []
    for r in rows:
        if not recordable(r):
            continue
        entry = get_entry(r["name"])
        if not writable(entry):
            raise LibraryError(f"{entry.name} is part of the installed package, which is never written to")
        card = dict(entry.card)
        key = _row_key(r["row"])
        card["verified"] = [v for v in card.get("verified") or [] if _row_key(v) != key] + [r["row"]]
        path = entry.path / "card.json"
        path.write_text(json.dumps(card, indent=2, default=str) + "\n", encoding="utf-8")
        if entry.origin == "user":
            (entry.path / "card.md").write_text(card_markdown(card), encoding="utf-8")
        written += [] if entry.name in written else [entry.name]
    return written


def _row_key(row: dict[str, Any]) -> tuple:
    return tuple(row.get(k) for k in ("backend", "gpu", "device", "torch", "triton"))


def examples_for(op_signature: list[str], backend: str, limit: int = 2) -> list[dict[str, Any]]:
    """Library kernels (both shelves) whose card signature overlaps the problem's ops, as prompt examples."""
    want = normalize_ops(op_signature)
    scored = []
    for e in list_entries():
        if backend not in e.backends:
            continue
        have = normalize_ops(e.card.get("signature", []))
        overlap = len(want & have) / len(want | have) if want | have else 0.0
        if overlap > 0:
            scored.append((overlap, e.origin == "user", e))
    scored.sort(key=lambda t: (-t[0], -t[1]))
    return [{"problem": f"library:{e.name}", "backend": backend, "speedup": None, "overlap": ov,
             "source": e.backends[backend].read_text()} for ov, _, e in scored[:limit]]


__all__ = ["KernelSource", "LibraryError", "add_entry", "drift", "entry_summary", "examples_for", "get_entry",
           "list_entries", "match_problem", "record", "recordable", "remove_entry", "resolve_kernel", "reverify",
           "verified_row", "verify_entry", "writable"]
