"""The graph's state: plain JSON-like data only, so the SQLite checkpointer can store every step.

Each beam member (a `Branch`) carries its own conversation; a `Candidate` is one proposal of a turn,
later holding its verifier report. `history` is the only accumulating field (one row per proposal).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict


class Anchor(TypedDict, total=False):
    """The best verified candidate of a branch's lineage: the file its next candidates build on."""

    key: str
    turn: int
    attempt_id: str | None
    score: list[float]
    verdict: str
    category: str
    speedup: float | None
    source: str


class Branch(TypedDict, total=False):
    key: str                       # "root", or the key of the candidate it grew from ("t2c1")
    messages: list[dict[str, str]]  # the whole conversation so far, ending with the feedback on `key`
    attempt_id: str | None         # the anchor's attempt (parent of this branch's next candidates)
    anchor: Anchor | None          # the file to build on; may be older than `key` when `key` did worse
    turn: int
    score: list[float]             # the anchor's scoring.score(), as a list (JSON); ranks branches
    own: list[float]               # scoring.score() of `key` itself (breaks ties between branches)
    repairs: int                   # failed candidates in a row on this branch
    label: str                     # category of `key` ("ok", "compile_error", "no_candidate", ...)


class Candidate(TypedDict, total=False):
    key: str                       # "t{turn}c{index}"
    turn: int
    index: int
    branch: str                    # key of the branch that proposed it
    parent_id: str | None
    messages: list[dict[str, str]]  # the branch's conversation at proposal time
    reply: str
    source: str | None             # the candidate file, None when the reply held none
    truncated: bool
    tokens: dict[str, int]
    cost_usd: float
    path: str | None
    report: dict[str, Any] | None
    attempt_id: str | None
    reused_from: str | None        # key of an identical earlier candidate whose verdict was reused
    error: str | None              # why there is no report: "no_candidate" | "provider_error: ..." | "budget"
    hit_limit: bool                # the reply reached max_tokens (reported even when a file was found)
    blocks: int                    # complete python blocks defining ModelNew in the reply
    chosen: int                    # which of them was verified (1-based)
    marked: bool                   # chosen because it was marked final
    stop_reason: str | None        # the provider's stop reason


class AgentState(TypedDict, total=False):
    run_id: str
    config: dict[str, Any]         # OptimizeConfig at the start, so a resumed run keeps its settings
    problem_id: str | None
    problem_path: str
    problem: dict[str, Any]        # name, sha256, source, backward, has_test_inputs
    backend: str
    prepared: dict[str, Any]       # prepare_fn's answer: baseline, roofline, audit, text, op_signature
    examples: list[dict[str, Any]]
    lessons: list[str]
    root: list[dict[str, str]]     # the first user message, shared by every branch
    beam: list[Branch]
    candidates: list[Candidate]
    history: Annotated[list[dict[str, Any]], operator.add]
    best: dict[str, Any] | None    # the best accepted candidate so far (key, turn, source, report, ...)
    turn: int
    stale_turns: int
    tokens: dict[str, int]         # input, output, cache_read, cache_write
    cost_usd: float
    verify_seconds: float
    stop: str | None               # why the loop stopped (see select.STOP_REASONS)
    out_path: str | None
    report_path: str | None
