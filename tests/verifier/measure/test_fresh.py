"""Fresh draws for timed calls: the same on both sides of the process boundary, new values in the same
buffers for every call; fingerprints tell a remembered answer from a computed one."""

from __future__ import annotations

import pytest
import torch

from kernelagent.verifier.measure.fresh import DrawError, DrawMode, Fingerprinter, Refresher, draw_inputs, l2_norms
from kernelagent.verifier.protocol import TimingPlan


def get_inputs():
    return [torch.randn(16, 32), torch.randint(0, 32, (16,))]


def test_a_draw_is_reproducible_from_its_seed_and_leaves_the_rng_elsewhere():
    a = draw_inputs(get_inputs, 1234, "cpu")
    after = torch.initial_seed()
    b = draw_inputs(get_inputs, 1234, "cpu")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert after != 1234


def test_every_call_gets_new_values_in_the_same_buffers():
    plan = TimingPlan.new()
    ref = Refresher(get_inputs, plan, DrawMode("fresh"), "cpu", get_inputs())
    first = [t.clone() for t in ref.fill(0)]
    ptr, version = ref.buffers[0][0].data_ptr(), ref.buffers[0][0]._version
    second = ref.fill(1)
    assert second[0].data_ptr() == ptr and second[0]._version != version
    assert not torch.equal(first[0], second[0])
    assert torch.equal(ref.fill(0)[0], first[0])  # draw 0 again gives draw 0's values


def test_pool_mode_picks_among_few_draws():
    plan = TimingPlan.new()
    mode = DrawMode("pool", pool=3)
    seeds = {mode.seed_of(plan, i) for i in range(100)}
    assert len(seeds) <= 3


def test_in_pool_mode_some_calls_still_get_a_draw_of_their_own():
    """A pool repeats inputs, so a value-keyed memo hits (red-team review 3, 2026-12-02): about one call in
    FRESH_EVERY, picked by the secret seeds, draws anew; the first calls fill the pool."""
    from kernelagent.verifier.measure.fresh import FRESH_EVERY, FRESH_FROM

    plan = TimingPlan.new()
    mode = DrawMode("pool", pool=8, fresh_every=FRESH_EVERY)
    fresh = [i for i in range(256) if mode.is_fresh(plan, i)]
    assert min(fresh) >= FRESH_FROM and 256 / FRESH_EVERY / 2 < len(fresh) < 2 * 256 / FRESH_EVERY
    seeds = [mode.seed_of(plan, i) for i in range(256)]
    assert len({seeds[i] for i in fresh}) == len(fresh)  # each its own draw
    repeats = {s for i, s in enumerate(seeds) if i not in fresh and i >= FRESH_FROM}
    assert 7 <= len(repeats) <= 8  # the whole pool in use (the pool index does not reuse the "not fresh" bit)
    assert not set(fresh) & {i for i in range(256) if DrawMode("pool", pool=8).is_fresh(plan, i)}  # old packs: none
    other = [i for i in range(256) if mode.is_fresh(TimingPlan.new(), i)]
    assert other != fresh  # which calls follows the secret key


def test_pool_draws_are_made_ahead_of_their_call():
    """A pool entry's first draw and a call's own draw happen in `prefetch` (after the previous call), so
    `fill` only copies: the spin before a timed call covers the copy and the launch, not a slow draw."""
    made = []

    def counted():
        made.append(1)
        return get_inputs()

    plan = TimingPlan.new()
    mode = DrawMode("pool", pool=2, fresh_every=2)
    ref = Refresher(counted, plan, mode, "cpu", get_inputs())
    for i in range(40):
        ref.prefetch(i)
        before = len(made)
        got = [t.clone() for t in ref.fill(i)]
        assert len(made) == before, f"call {i} drew in fill"
        again = draw_inputs(get_inputs, mode.seed_of(plan, i), "cpu")
        assert torch.equal(got[0], again[0])  # the values of call i's seed, as the reference side draws them
    fresh = sum(mode.is_fresh(plan, i) for i in range(40))
    assert len(made) == fresh + len({mode.seed_of(plan, i) for i in range(40) if not mode.is_fresh(plan, i)})


def test_a_problem_whose_shapes_change_between_draws_is_refused():
    sizes = iter(range(2, 100))

    def shifty():
        return [torch.randn(next(sizes))]

    ref = Refresher(shifty, TimingPlan.new(), DrawMode("fresh"), "cpu", shifty())
    with pytest.raises(DrawError, match="fixed shapes"):
        ref.fill(0)


def test_fingerprints_are_linear_and_tell_stale_answers_apart():
    printer = Fingerprinter(seed=3, k=3, device="cpu")
    a, b = torch.randn(1000), torch.randn(1000)
    pa, pb = printer([a]), printer([b])
    scale = l2_norms([a])[0]
    # a + b is rounded to float32 before it is projected: equal up to that rounding (about 1e-7 of the norm)
    assert torch.allclose(printer([a + b]), pa + pb, rtol=0, atol=1e-5 * scale)
    assert (pa - pb).abs().max() > 0.1 * scale          # another input's answer is far off
    assert (printer([a * (1 + 1e-6)]) - pa).abs().max() < 1e-4 * scale   # rounding is not
