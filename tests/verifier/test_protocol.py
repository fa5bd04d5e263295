"""The typed protocol between parent and worker: requests and deliveries survive the trip, the fresh-draw
seeds are reproducible on both sides and unrelated to each other, the check positions stay in range."""

from __future__ import annotations

import dataclasses

from kernelagent.verifier import protocol as P


def test_requests_round_trip_through_one_json_line():
    plan, checks = P.TimingPlan.new(), P.CheckPlan.new(32, 224)
    reqs = [P.ReferenceRequest(problem="/x/problem.py", device="cuda", secret=5, seeds=3, out_dir="/o", timing=True,
                               plan=plan, checks=checks),
            P.CandidateRequest(candidate="/w/c.py", device="cpu", in_dir="/w-in", out_dir="/w-out", backend="triton",
                               deny_read=["/secret"]),
            P.CandidateRequest(candidate="/w/c.py", device="cuda", in_dir="/i", out_dir="/o", role=P.Role.SINGLE),
            P.AotRequest(candidate="/w/c.py", requests=[{"kernel": "k"}], out_dir="/o"),
            P.MatchRequest(problem="/p.py", entries=[{"name": "softmax", "reference": "/r.py"}], device="cpu",
                           out_dir="/o", seed=3)]
    for req in reqs:
        back = P.decode_request(P.encode(req))
        assert type(back) is type(req) and dataclasses.asdict(back) == dataclasses.asdict(req)


def test_the_timing_plan_is_reproducible_and_its_seeds_differ():
    plan = P.TimingPlan.new()
    again = P.decode_delivery(P.encode(P.Delivery(plan=plan, trial_ids=[0, 1]))).plan
    seeds = [plan.seed(i) for i in range(200)]
    assert seeds == [again.seed(i) for i in range(200)]
    assert len(set(seeds)) == 200 and all(0 <= s < 2**63 for s in seeds)
    assert P.TimingPlan.new().seed(0) != plan.seed(0)  # a new key per plan
    assert plan.mask_seed not in seeds


def test_check_positions_are_secret_draws_within_the_guaranteed_calls():
    plans = [P.CheckPlan.new(P.GUARANTEED_CALLS, P.CHECKED_SPAN - P.GUARANTEED_CALLS) for _ in range(20)]
    for c in plans:
        first = [p for p in c.positions if p < P.GUARANTEED_CALLS]
        assert len(first) == 12 and all(0 <= p < P.CHECKED_SPAN for p in c.positions)
    assert len({c.positions for c in plans}) > 1


def test_candidate_facts_round_trip():
    facts = P.CandidateFacts(trials={3: P.CallFacts(launches=2, ops={"aten.empty": 1},
                                                    transfers=P.Transfers(d2h_bytes=8, scalar_reads=1))},
                             timing=P.TimingFacts(candidate={"median_ms": 1.0}, mode="forward", draws="fresh",
                                                  calls=40, transfers=P.Transfers(d2h_bytes=4)))
    back = P.CandidateFacts.from_dict(dataclasses.asdict(facts))
    assert back == facts


def test_plain_json_bounds_what_a_worker_sends():
    """The parent forwards a worker's compile requests only when they are plain, shallow, bounded JSON (red
    team, 2026-12-03: a 600-deep list from the candidate's process crashed the parent's encoder)."""
    from kernelagent.verifier.protocol import plain_json

    ok = [{"kind": "const", "value": [1, 2.0, "x", None, True]}, {"kind": "tuple", "items": [{"kind": "none"}]}]
    assert plain_json(ok, 16, 1000)
    deep: list = []
    for _ in range(600):
        deep = [deep]
    assert not plain_json([{"value": deep}], 16, 100_000)
    assert not plain_json([{"value": list(range(2000))}], 16, 1000)
    assert not plain_json([{"value": ({1, 2})}], 16, 1000)  # not JSON
    assert not plain_json([{1: "key not a string"}], 16, 1000)

    class Sub(int):
        pass
    assert not plain_json([{"value": Sub(3)}], 16, 1000)
