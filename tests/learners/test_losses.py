from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo_env.learners.algo.losses import (
    AGGREGATIONS,
    IS_CORRECTIONS,
    POLICY_LOSSES,
    cispo_loss,
    entropy_from_logits,
    get_aggregation,
    get_is_correction,
    get_policy_loss,
    register_is_correction,
    register_policy_loss,
    rollout_correction,
    group_advantages,
    loss_denominators,
    masked_mean,
    policy_loss,
    register_aggregation,
)

torch.set_num_threads(1)
AGGS = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]

# The hand-worked example: ratios r, mask, A = [+1, -1], clip range [0.8, 1.28].
R = [[1.5, 1.0, 0.5], [0.7, 1.1, 2.0]]
MASK = [[1, 1, 1], [1, 1, 0]]
# per-token loss -min(rA, clip(r)A): seq 0 (A=+1): -1.28 (clipped), -1.0, -0.5 (min keeps r=0.5);
# seq 1 (A=-1): max(0.7, 0.8)=0.8 (clipped), 1.1, masked. Sum = -2.78 + 1.9 = -0.88 over 5 tokens.
EXPECTED = {
    "token-mean": -0.88 / 5,
    "seq-mean-token-mean": (-2.78 / 3 + 1.9 / 2) / 2,
    "seq-mean-token-sum": -0.88 / 2,
    "seq-mean-token-sum-norm": -0.88 / (3 * 2),  # max_response_tokens defaults to T = 3
}


def hand_inputs(dtype=torch.float64):
    logp = torch.log(torch.tensor(R, dtype=dtype)).requires_grad_(True)
    return logp, torch.zeros(2, 3, dtype=dtype), torch.tensor([1.0, -1.0], dtype=dtype), torch.tensor(MASK)


@pytest.mark.parametrize("agg", AGGS)
def test_hand_worked_aggregations(agg: str) -> None:
    logp, old, adv, mask = hand_inputs()
    loss, _ = policy_loss(logp, old, adv, mask, agg=agg)
    assert loss.item() == pytest.approx(EXPECTED[agg], abs=1e-12)


def test_dr_grpo_constant_max_len() -> None:
    logp, old, adv, mask = hand_inputs()
    loss, _ = policy_loss(logp, old, adv, mask, agg="seq-mean-token-sum-norm", max_response_tokens=4)
    assert loss.item() == pytest.approx(-0.88 / 8, abs=1e-12)


def test_hand_worked_gradient_and_metrics() -> None:
    logp, old, adv, mask = hand_inputs()
    loss, metrics = policy_loss(logp, old, adv, mask)
    loss.backward()
    # d(-A r)/dlogp = -A r on unclipped tokens, 0 on clipped and masked ones; / 5 tokens.
    expected = torch.tensor([[0.0, -1.0 / 5, -0.5 / 5], [0.0, 1.1 / 5, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(logp.grad, expected, atol=1e-12, rtol=0)
    assert metrics["clip_frac_high"].item() == pytest.approx(1 / 5)  # r=1.5, A>0
    assert metrics["clip_frac_low"].item() == pytest.approx(1 / 5)  # r=0.7, A<0 (r=0.5 has A>0)
    assert metrics["clip_frac"].item() == pytest.approx(2 / 5)
    assert metrics["ratio_mean"].item() == pytest.approx(4.8 / 5)
    assert metrics["ratio_max"].item() == pytest.approx(1.5)  # 2.0 is masked out
    k3 = sum(r - 1 - math.log(r) for r in (1.5, 1.0, 0.5, 0.7, 1.1)) / 5
    assert metrics["approx_kl"].item() == pytest.approx(k3)
    assert all(not v.requires_grad for v in metrics.values())


def test_both_clip_sides_are_decoupled() -> None:
    old = torch.zeros(1, 1)
    one = torch.ones(1, 1)
    # A > 0: the upper bound is 1 + clip_high = 1.28 (not 1.2).
    loss, _ = policy_loss(torch.log(torch.tensor([[1.25]])), old, torch.tensor([1.0]), one)
    assert loss.item() == pytest.approx(-1.25)
    loss, _ = policy_loss(torch.log(torch.tensor([[1.4]])), old, torch.tensor([1.0]), one)
    assert loss.item() == pytest.approx(-1.28)
    # A < 0: the lower bound is 1 - clip_low = 0.8.
    loss, _ = policy_loss(torch.log(torch.tensor([[0.5]])), old, torch.tensor([-2.0]), one)
    assert loss.item() == pytest.approx(2 * 0.8)
    loss, _ = policy_loss(torch.log(torch.tensor([[0.5]])), old, torch.tensor([-2.0]), one, clip_low=0.6)
    assert loss.item() == pytest.approx(2 * 0.5)


def test_dual_clip() -> None:
    logp = torch.log(torch.tensor([[4.0], [4.0]])).requires_grad_(True)
    adv, old, one = torch.tensor([-1.0, 1.0]), torch.zeros(2, 1), torch.ones(2, 1)
    plain, _ = policy_loss(logp, old, adv, one, agg="seq-mean-token-sum")
    assert plain.item() == pytest.approx((4.0 - 1.28) / 2)
    dual, metrics = policy_loss(logp, old, adv, one, clip_c=3.0, agg="seq-mean-token-sum")
    assert dual.item() == pytest.approx((3.0 - 1.28) / 2)  # A<0 capped at clip_c*|A|; A>0 untouched
    assert metrics["dual_clip_frac"].item() == pytest.approx(0.5)
    dual.backward()
    assert logp.grad.abs().sum().item() == 0.0
    with pytest.raises(ValueError, match="clip_c"):
        policy_loss(logp, old, adv, one, clip_c=0.5)


def test_gspo_sequence_ratio() -> None:
    log_r = torch.tensor([[0.2, 0.4, 9.0]], dtype=torch.float64)  # third token masked
    mask = torch.tensor([[1, 1, 0]])
    logp = log_r.clone().requires_grad_(True)
    old = torch.zeros(1, 3, dtype=torch.float64)
    s = math.exp(0.3)  # exp(mean log ratio over the 2 tokens)
    loss, m = policy_loss(logp, old, torch.tensor([1.0]), mask, clip_high=0.5, ratio_level="sequence",
                          agg="seq-mean-token-mean")
    assert loss.item() == pytest.approx(-s)
    assert m["ratio_mean"].item() == pytest.approx(s)
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-s / 2, -s / 2, 0.0]], dtype=torch.float64))
    clipped, _ = policy_loss(log_r, old, torch.tensor([1.0]), mask, ratio_level="sequence")
    assert clipped.item() == pytest.approx(-1.28)


def test_gspo_matches_sequence_objective_reference() -> None:
    g = torch.Generator().manual_seed(0)
    logp = (torch.randn(4, 6, generator=g, dtype=torch.float64) * 0.3).requires_grad_(True)
    old = torch.randn(4, 6, generator=g, dtype=torch.float64) * 0.3
    mask = torch.tensor([[1] * 6, [1] * 3 + [0] * 3, [1] * 5 + [0], [1] + [0] * 5])
    adv = torch.tensor([1.0, -0.5, 2.0, -1.0], dtype=torch.float64)
    loss, _ = policy_loss(logp, old, adv, mask, ratio_level="sequence", agg="seq-mean-token-mean",
                          clip_low=0.1, clip_high=0.1)
    (grad,) = torch.autograd.grad(loss, logp)
    lp = logp.detach().clone().requires_grad_(True)
    s = torch.exp(((lp - old) * mask).sum(-1) / mask.sum(-1))  # (B,)
    ref = torch.maximum(-adv * s, -adv * s.clamp(0.9, 1.1)).mean()
    (ref_grad,) = torch.autograd.grad(ref, lp)
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(grad, ref_grad)


def test_is_weights_scale_per_token() -> None:
    logp, old, adv, mask = hand_inputs()
    w = torch.full((2, 3), 0.5, dtype=torch.float64)
    loss, _ = policy_loss(logp, old, adv, mask, is_weights=w)
    assert loss.item() == pytest.approx(0.5 * EXPECTED["token-mean"])
    tis, keep, _ = rollout_correction(torch.log(torch.tensor([[0.3, 0.9]])), torch.log(torch.tensor([[0.6, 0.3]])),
                                      torch.ones(1, 2), mode="token-truncate", cap=2.0)
    torch.testing.assert_close(tis, torch.tensor([[0.5, 2.0]]))  # 0.9/0.3 = 3 capped at 2
    assert keep.all()


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("ratio_level", ["token", "sequence"])
def test_gradcheck(agg: str, ratio_level: str) -> None:
    # log ratios well away from the clip boundaries log(0.8), log(1.28) (kinks are not differentiable).
    offsets = torch.tensor([[-0.5, -0.1, 0.05, 0.4], [0.6, 0.0, -0.05, 0.1]], dtype=torch.float64)
    old = torch.tensor([[-1.0, -2.0, -0.5, -3.0], [-0.2, -1.5, -2.5, -0.7]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    adv = torch.tensor([0.7, -1.3], dtype=torch.float64)
    logp = (old + offsets).requires_grad_(True)
    fn = lambda x: policy_loss(x, old, adv, mask, agg=agg, ratio_level=ratio_level, clip_c=3.0)[0]  # noqa: E731
    assert torch.autograd.gradcheck(fn, (logp,))


def reference_loop(ratio, adv, mask, agg, clip_low, clip_high, max_response_tokens):
    """A plain-Python reference of the token-level loss and aggregation."""
    B, T = len(ratio), len(ratio[0])
    per_seq_sum, per_seq_len = [], []
    for i in range(B):
        total, count = 0.0, 0
        for t in range(T):
            if mask[i][t]:
                r, a = ratio[i][t], adv[i]
                total += -min(r * a, min(max(r, 1 - clip_low), 1 + clip_high) * a)
                count += 1
        per_seq_sum.append(total)
        per_seq_len.append(count)
    seqs = sum(1 for c in per_seq_len if c > 0)
    if agg == "token-mean":
        return sum(per_seq_sum) / sum(per_seq_len)
    if agg == "seq-mean-token-mean":
        return sum(s / c for s, c in zip(per_seq_sum, per_seq_len) if c) / seqs
    if agg == "seq-mean-token-sum":
        return sum(per_seq_sum) / seqs
    return sum(per_seq_sum) / (max_response_tokens * seqs)


def random_batch(seed: int, B: int, T: int, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(B, T, generator=g, dtype=dtype) * 3
    logp = old + torch.randn(B, T, generator=g, dtype=dtype) * 0.4
    lengths = torch.randint(0, T + 1, (B,), generator=g)
    lengths[0] = max(int(lengths[0]), 1)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()  # (B, T) right-padded
    adv = torch.randn(B, generator=g, dtype=dtype)
    return logp, old, adv, mask


@pytest.mark.parametrize("agg", AGGS)
def test_vectorised_matches_plain_loop(agg: str) -> None:
    for seed in range(5):
        logp, old, adv, mask = random_batch(seed, 6, 7)
        loss, _ = policy_loss(logp, old, adv, mask, agg=agg, max_response_tokens=9, clip_low=0.2, clip_high=0.28)
        ratio = torch.exp(logp - old).tolist()
        ref = reference_loop(ratio, adv.tolist(), mask.tolist(), agg, 0.2, 0.28, 9)
        assert loss.item() == pytest.approx(ref, rel=1e-10, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    batch=st.integers(2, 9),
    cuts=st.lists(st.integers(1, 8), max_size=4),
    agg=st.sampled_from(AGGS),
    ratio_level=st.sampled_from(["token", "sequence"]),
)
def test_micro_batch_split_invariance(seed, batch, cuts, agg, ratio_level) -> None:
    T = 6
    logp, old, adv, mask = random_batch(seed, batch, T)
    kwargs = dict(agg=agg, ratio_level=ratio_level, max_response_tokens=T, clip_c=3.0)
    full_lp = logp.clone().requires_grad_(True)
    full, _ = policy_loss(full_lp, old, adv, mask, **kwargs)
    full.backward()

    num_tokens, num_seqs = loss_denominators(mask)
    bounds = sorted({0, batch, *[c for c in cuts if c < batch]})
    acc_lp = logp.clone().requires_grad_(True)
    total = torch.zeros((), dtype=torch.float64)
    for lo, hi in zip(bounds, bounds[1:]):
        width = max(int(mask[lo:hi].sum(-1).max()), 1)  # each micro-batch trimmed to its own padding
        part, _ = policy_loss(
            acc_lp[lo:hi, :width], old[lo:hi, :width], adv[lo:hi], mask[lo:hi, :width],
            num_tokens=num_tokens, num_seqs=num_seqs, **kwargs,
        )
        part.backward()  # gradient accumulation
        total = total + part.detach()
    torch.testing.assert_close(total, full.detach(), atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(acc_lp.grad, full_lp.grad, atol=1e-12, rtol=1e-10)


def test_token_advantages_and_shape_errors() -> None:
    logp, old, adv, mask = hand_inputs()
    per_token = adv[:, None].expand(2, 3)
    a, _ = policy_loss(logp, old, adv, mask)
    b, _ = policy_loss(logp, old, per_token, mask)
    assert a.item() == b.item()
    with pytest.raises(ValueError, match="advantages"):
        policy_loss(logp, old, torch.ones(2, 2), mask)
    with pytest.raises(ValueError, match="shape"):
        policy_loss(logp, old[:, :2], adv, mask)
    with pytest.raises(ValueError, match="known"):
        policy_loss(logp, old, adv, mask, agg="nope")
    with pytest.raises(ValueError, match="ratio_level"):
        policy_loss(logp, old, adv, mask, ratio_level="nope")


def test_aggregation_registry() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_aggregation("token-mean", AGGREGATIONS["token-mean"])
    register_aggregation("test-sum", lambda m, k, **_: (m * k).sum())
    try:
        logp, old, adv, mask = hand_inputs()
        assert policy_loss(logp, old, adv, mask, agg="test-sum")[0].item() == pytest.approx(-0.88)
    finally:
        del AGGREGATIONS["test-sum"]
    with pytest.raises(ValueError, match="token-mean"):
        get_aggregation("missing")


def test_group_advantages_by_hand() -> None:
    r = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 3.0], dtype=torch.float64)
    with pytest.raises(ValueError, match="divisible"):
        group_advantages(r, 2)
    a = group_advantages(r[:4], 2, eps=0.0)
    torch.testing.assert_close(a, torch.tensor([0.5, -0.5, 0, 0], dtype=torch.float64) / math.sqrt(0.5))
    # unbiased std of [0, 0, 3] is sqrt((1 + 1 + 4) / 2) = sqrt(3) (the biased one would be sqrt(2)).
    b = group_advantages(r[4:], 3, eps=0.0)
    torch.testing.assert_close(b, torch.tensor([-1.0, -1.0, 2.0], dtype=torch.float64) / math.sqrt(3))
    c = group_advantages(r[4:], 3, scale_by_std=False)
    torch.testing.assert_close(c, torch.tensor([-1.0, -1.0, 2.0], dtype=torch.float64))
    assert group_advantages(torch.tensor([0.1, 0.1, 0.1]), 3).abs().sum() == 0  # constant group
    assert group_advantages(torch.tensor([5.0, -2.0]), 1).abs().sum() == 0  # groups of one


@settings(max_examples=50, deadline=None)
@given(
    groups=st.lists(
        st.lists(st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.5]), min_size=4, max_size=4), min_size=1, max_size=6
    ),
    scale=st.booleans(),
)
def test_group_advantages_properties(groups, scale) -> None:
    r = torch.tensor([x for g in groups for x in g], dtype=torch.float64)
    a = group_advantages(r, 4, scale_by_std=scale).reshape(-1, 4)
    torch.testing.assert_close(a.sum(-1), torch.zeros(len(groups), dtype=torch.float64), atol=1e-9, rtol=0)
    for g, row in zip(groups, a):
        if len(set(g)) == 1:
            assert row.abs().sum() == 0
        elif scale:
            assert row.std().item() == pytest.approx(1.0, rel=1e-4)


def test_entropy_and_masked_mean() -> None:
    V = 7
    uniform = torch.zeros(2, 3, V)
    torch.testing.assert_close(entropy_from_logits(uniform), torch.full((2, 3), math.log(V)))
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 4, 11, generator=g)
    naive = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1)
    torch.testing.assert_close(entropy_from_logits(logits, chunk_size=3), naive)
    peaked = torch.tensor([[0.0, -1e4, -1e4]])
    assert entropy_from_logits(peaked).item() == pytest.approx(0.0, abs=1e-6)
    assert masked_mean(torch.tensor([1.0, 2.0, 9.0]), torch.tensor([1, 1, 0])).item() == 1.5
    assert masked_mean(torch.ones(2), torch.zeros(2)).item() == 0.0
    torch.testing.assert_close(
        masked_mean(torch.tensor([[1.0, 3.0], [2.0, 4.0]]), torch.tensor([[1, 1], [1, 0]]), dim=-1),
        torch.tensor([2.0, 2.0]),
    )


# --- CISPO -----------------------------------------------------------------------------------------------
# The hand-worked example again: r = [[1.5, 1.0, 0.5], [0.7, 1.1, (2.0 masked)]], A = [+1, -1], weights
# clipped to [0.8, 1.28] whatever the sign of A: [[1.28, 1.0, 0.8], [0.8, 1.1]]. Per token -A w:
# [-1.28, -1.0, -0.8] and [+0.8, +1.1]; sum -1.18 over 5 tokens. Gradient -A w / 5 on EVERY loss token.
CISPO_EXPECTED = {
    "token-mean": -1.18 / 5,
    "seq-mean-token-mean": (-3.08 / 3 + 1.9 / 2) / 2,
    "seq-mean-token-sum": -1.18 / 2,
    "seq-mean-token-sum-norm": -1.18 / (3 * 2),
}


@pytest.mark.parametrize("agg", AGGS)
def test_cispo_hand_worked_value(agg: str) -> None:
    logp, old, adv, mask = hand_inputs()
    loss, _ = cispo_loss(logp, old, adv, mask, agg=agg)
    assert loss.item() == pytest.approx(CISPO_EXPECTED[agg], abs=1e-12)


def test_cispo_hand_worked_gradient_keeps_clipped_tokens() -> None:
    logp, old, adv, mask = hand_inputs()
    loss, metrics = cispo_loss(logp, old, adv, mask)
    loss.backward()
    expected = torch.tensor([[-1.28, -1.0, -0.8], [0.8, 1.1, 0.0]], dtype=torch.float64) / 5
    torch.testing.assert_close(logp.grad, expected, atol=1e-12, rtol=0)
    # the clipped surrogate drops exactly the two tokens CISPO keeps (r=1.5 with A>0, r=0.7 with A<0)
    ppo_lp = hand_inputs()[0]
    policy_loss(ppo_lp, old, adv, mask)[0].backward()
    assert ppo_lp.grad[0, 0].item() == 0.0 and ppo_lp.grad[1, 0].item() == 0.0
    assert logp.grad[0, 0].item() != 0.0 and logp.grad[1, 0].item() != 0.0
    # clip fractions count the clipped weights whatever A's sign: 1.5 high; 0.5 and 0.7 low
    assert metrics["clip_frac_high"].item() == pytest.approx(1 / 5)
    assert metrics["clip_frac_low"].item() == pytest.approx(2 / 5)
    assert metrics["clip_frac"].item() == pytest.approx(3 / 5)
    assert metrics["dual_clip_frac"].item() == 0.0
    assert metrics["ratio_max"].item() == pytest.approx(1.5)
    assert set(metrics) == set(policy_loss(*hand_inputs())[1])  # the registry's one metric set


def test_cispo_without_lower_bound_is_minimax_m1s_setting() -> None:
    logp = torch.log(torch.tensor([[0.5, 0.1]], dtype=torch.float64)).requires_grad_(True)
    loss, m = cispo_loss(logp, torch.zeros(1, 2, dtype=torch.float64), torch.tensor([2.0]), torch.ones(1, 2),
                         clip_low=1.0, clip_high=4.0)
    assert loss.item() == pytest.approx(-2.0 * (0.5 + 0.1) / 2)  # weights unclipped below
    assert m["clip_frac_low"].item() == 0.0
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-0.5, -0.1]], dtype=torch.float64))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), agg=st.sampled_from(AGGS), ratio_level=st.sampled_from(["token", "sequence"]))
def test_cispo_on_policy_gradient_is_the_policy_gradient(seed: int, agg: str, ratio_level: str) -> None:
    """At r = 1 (the first update on fresh samples) CISPO's gradient is the plain policy gradient, which is
    also the clipped surrogate's."""
    _, old, adv, mask = random_batch(seed, 5, 6)
    grads = []
    for fn in (cispo_loss, policy_loss):
        lp = old.clone().requires_grad_(True)
        fn(lp, old, adv, mask, agg=agg, ratio_level=ratio_level, max_response_tokens=6)[0].backward()
        grads.append(lp.grad)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-12, rtol=1e-10)


def test_cispo_sequence_ratio_and_is_weights() -> None:
    log_r = torch.tensor([[0.2, 0.4, 9.0]], dtype=torch.float64)  # third token masked
    mask = torch.tensor([[1, 1, 0]])
    logp = log_r.clone().requires_grad_(True)
    s = math.exp(0.3)  # GSPO's sequence ratio, 1.35 > 1.28: clipped
    loss, _ = cispo_loss(logp, torch.zeros(1, 3, dtype=torch.float64), torch.tensor([1.0]), mask,
                         ratio_level="sequence", agg="seq-mean-token-mean",
                         is_weights=torch.tensor([[0.5, 1.0, 7.0]], dtype=torch.float64))
    assert s > 1.28
    assert loss.item() == pytest.approx(-1.28 * (0.5 + 1.0) / 2)
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-1.28 * 0.5 / 2, -1.28 / 2, 0.0]], dtype=torch.float64))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), batch=st.integers(2, 8), cut=st.integers(1, 7), agg=st.sampled_from(AGGS))
def test_cispo_micro_batch_split_invariance(seed: int, batch: int, cut: int, agg: str) -> None:
    logp, old, adv, mask = random_batch(seed, batch, 6)
    full_lp = logp.clone().requires_grad_(True)
    full, _ = cispo_loss(full_lp, old, adv, mask, agg=agg, max_response_tokens=6)
    full.backward()
    num_tokens, num_seqs = loss_denominators(mask)
    acc_lp = logp.clone().requires_grad_(True)
    total = 0.0
    for lo, hi in ((0, min(cut, batch)), (min(cut, batch), batch)):
        if hi > lo:
            part, _ = cispo_loss(acc_lp[lo:hi], old[lo:hi], adv[lo:hi], mask[lo:hi], agg=agg, max_response_tokens=6,
                                 num_tokens=num_tokens, num_seqs=num_seqs)
            part.backward()
            total += part.item()
    assert total == pytest.approx(full.item(), rel=1e-10, abs=1e-12)
    torch.testing.assert_close(acc_lp.grad, full_lp.grad, atol=1e-12, rtol=1e-10)


def test_policy_loss_registry() -> None:
    assert get_policy_loss("ppo-clip") is policy_loss and get_policy_loss("cispo") is cispo_loss
    logp, old, adv, mask = hand_inputs()
    kwargs = dict(clip_low=0.2, clip_high=0.28, clip_c=None, agg="token-mean", ratio_level="token", num_tokens=None,
                  num_seqs=None, is_weights=None, max_response_tokens=None)
    for name, fn in POLICY_LOSSES.items():  # one signature: every entry takes the same keywords
        loss, metrics = fn(logp, old, adv, mask, **kwargs)
        assert loss.dim() == 0 and "clip_frac" in metrics, name
    with pytest.raises(ValueError, match="already registered"):
        register_policy_loss("cispo", cispo_loss)
    register_policy_loss("test-loss", cispo_loss)
    try:
        assert get_policy_loss("test-loss") is cispo_loss
    finally:
        del POLICY_LOSSES["test-loss"]
    with pytest.raises(ValueError, match=r"known: \['cispo', 'ppo-clip'\]"):
        get_policy_loss("grpo")
    with pytest.raises(ValueError, match="clip_c=None"):
        cispo_loss(logp, old, adv, mask, clip_c=3.0)
    with pytest.raises(ValueError, match="clip_low <= 1"):
        cispo_loss(logp, old, adv, mask, clip_low=1.5)


# --- rollout correction (TIS / MIS, token and sequence level) -------------------------------------------
# Learner / engine probability ratios w: row 0 [1, 1.5, 3], row 1 [0.8, 1, (4 masked)]; cap C = 2.
# Sequence products: row 0 4.5 (outside [0.5, 2]), row 1 0.8 (inside).
W = [[1.0, 1.5, 3.0], [0.8, 1.0, 4.0]]
W_MASK = [[1, 1, 1], [1, 1, 0]]
IS_EXPECTED = {  # mode -> (weights, keep, truncated share, masked share, max unbounded weight)
    "token-truncate": ([[1, 1.5, 2], [0.8, 1, 0]], [[1, 1, 1], [1, 1, 0]], 1 / 5, 0.0, 3.0),
    "token-mask": ([[1, 1.5, 0], [0.8, 1, 0]], [[1, 1, 0], [1, 1, 0]], 0.0, 1 / 5, 3.0),
    "sequence-truncate": ([[2, 2, 2], [0.8, 0.8, 0]], [[1, 1, 1], [1, 1, 0]], 3 / 5, 0.0, 4.5),
    "sequence-mask": ([[0, 0, 0], [0.8, 0.8, 0]], [[0, 0, 0], [1, 1, 0]], 0.0, 3 / 5, 4.5),
}


def is_inputs():
    old = torch.log(torch.tensor(W, dtype=torch.float64)) - 0.7  # any common offset: only the ratio matters
    return old, torch.full((2, 3), -0.7, dtype=torch.float64), torch.tensor(W_MASK)


@pytest.mark.parametrize("mode", sorted(IS_EXPECTED))
def test_rollout_correction_hand_worked(mode: str) -> None:
    weights, keep, truncated, masked, raw_max = IS_EXPECTED[mode]
    w, k, m = rollout_correction(*is_inputs(), mode=mode, cap=2.0)
    torch.testing.assert_close(w, torch.tensor(weights, dtype=torch.float64))
    assert k.tolist() == [[bool(x) for x in row] for row in keep]
    assert m["is_truncated_share"].item() == pytest.approx(truncated)
    assert m["is_masked_share"].item() == pytest.approx(masked)
    assert m["is_weight_max"].item() == pytest.approx(raw_max)
    kept = [x for row_w, row_k in zip(weights, keep) for x, on in zip(row_w, row_k) if on]
    assert m["is_weight_mean"].item() == pytest.approx(sum(kept) / len(kept))
    tokens = [1.0, 1.5, 3.0, 0.8, 1.0]  # the masked-in tokens' weights, whatever the mode
    assert m["mismatch_abs"].item() == pytest.approx(sum(abs(math.log(x)) for x in tokens) / 5)
    assert m["mismatch_k3"].item() == pytest.approx(sum(x - 1 - math.log(x) for x in tokens) / 5)
    assert not w.requires_grad and all(not v.requires_grad for v in m.values())


def test_rollout_correction_feeds_the_loss() -> None:
    """Masked tokens leave the loss and its denominators; kept ones are weighted."""
    old, engine, mask = is_inputs()
    w, keep, _ = rollout_correction(old, engine, mask, mode="token-mask", cap=2.0)
    logp = old.clone().requires_grad_(True)  # r = 1: the per-token loss is -A
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    loss, _ = policy_loss(logp, old, adv, mask * keep, is_weights=w)
    # kept: row 0 weights 1, 1.5 (A=+1), row 1 weights 0.8, 1 (A=-1); 4 tokens
    assert loss.item() == pytest.approx((-(1 + 1.5) + (0.8 + 1)) / 4)


def test_rollout_correction_identity_when_policies_agree() -> None:
    _, old, adv, mask = random_batch(3, 4, 5)
    for mode in IS_CORRECTIONS:
        w, keep, m = rollout_correction(old, old.clone(), mask, mode=mode, cap=1.5)
        torch.testing.assert_close(w, mask.to(w.dtype))
        assert torch.equal(keep, mask.bool())
        assert m["is_masked_share"].item() == 0.0 and m["mismatch_abs"].item() == 0.0


def test_rollout_correction_weights_point_from_engine_to_learner() -> None:
    """Reweighting samples of the engine's distribution q by w = p / q gives expectations under the learner's
    p (exactly, by enumeration over a 3-token vocabulary, with a cap that never binds)."""
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    q = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    f = torch.tensor([1.0, -2.0, 5.0], dtype=torch.float64)
    w, _, _ = rollout_correction(p.log()[None], q.log()[None], torch.ones(1, 3), mode="token-truncate", cap=1e6)
    assert float((q * w[0] * f).sum()) == pytest.approx(float((p * f).sum()))


def test_rollout_correction_long_sequences_stay_finite() -> None:
    old = torch.full((2, 400), 0.5)  # log prod w = 200 per sequence: e^200 overflows fp32
    w, keep, m = rollout_correction(old, torch.zeros(2, 400), torch.ones(2, 400), mode="sequence-truncate", cap=3.0)
    assert torch.isfinite(w).all() and float(w.max()) == pytest.approx(3.0)
    assert all(torch.isfinite(v) for v in m.values())
    _, keep, m = rollout_correction(-old, torch.zeros(2, 400), torch.ones(2, 400), mode="sequence-mask", cap=3.0)
    assert not keep.any() and m["is_masked_share"].item() == 1.0


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), cap=st.floats(1.05, 10.0), mode=st.sampled_from(sorted(IS_EXPECTED)))
def test_rollout_correction_properties(seed: int, cap: float, mode: str) -> None:
    _, old, _, mask = random_batch(seed, 5, 6)
    engine = old + torch.randn(old.shape, generator=torch.Generator().manual_seed(seed), dtype=old.dtype) * 0.5
    w, keep, _ = rollout_correction(old, engine, mask, mode=mode, cap=cap)
    on = mask.bool()
    assert not (keep & ~on).any() and (w[~keep] == 0).all()
    kept = w[keep]
    assert (kept <= cap * (1 + 1e-9)).all()
    if mode.endswith("mask"):
        assert (kept >= 1 / cap * (1 - 1e-9)).all()
    if mode.startswith("token") and mode.endswith("truncate"):
        torch.testing.assert_close(w, torch.where(on, torch.exp(old - engine).clamp(max=cap), torch.zeros_like(w)))
    if mode.startswith("sequence"):  # one weight per sequence
        for row in range(w.shape[0]):
            values = w[row][keep[row]]
            assert values.numel() == 0 or torch.allclose(values, values[0].expand_as(values))


def test_is_correction_registry_and_errors() -> None:
    old, engine, mask = is_inputs()
    with pytest.raises(ValueError, match="cap must be > 1"):
        rollout_correction(old, engine, mask, cap=1.0)
    with pytest.raises(ValueError, match="known"):
        rollout_correction(old, engine, mask, mode="tis")
    with pytest.raises(ValueError, match="shape"):
        rollout_correction(old, engine[:, :2], mask)
    with pytest.raises(ValueError, match="already registered"):
        register_is_correction("token-mask", IS_CORRECTIONS["token-mask"])
    register_is_correction("test-none", lambda log_w, mask, *, cap: (log_w.exp(), torch.ones_like(log_w), mask))
    try:
        w, _, _ = rollout_correction(old, engine, mask, mode="test-none")
        assert float(w.max()) == 1.0
    finally:
        del IS_CORRECTIONS["test-none"]
    assert get_is_correction("sequence-mask") is IS_CORRECTIONS["sequence-mask"]


def test_advantage_registry_group_entry_matches_hand_worked_values() -> None:
    from dapo_env.learners.algo.losses import get_advantage

    group = get_advantage("group")
    rewards = torch.tensor([1.0, -1.0, -1.0, -1.0, 0.5, 0.5])  # G = 3: groups (1, -1, -1), (-1, .5, .5)
    mask = torch.ones(6, 4)
    # group 1: mean -1/3, unbiased std sqrt(((4/3)^2 + 2 (2/3)^2) / 2) = 2/sqrt(3); group 2 mirrors it scaled by 3/4
    s = 2 / math.sqrt(3)
    expected = torch.tensor([(4 / 3) / s, -(2 / 3) / s, -(2 / 3) / s, -1.0 / (0.75 * s), 0.5 / (0.75 * s),
                             0.5 / (0.75 * s)])
    torch.testing.assert_close(group(rewards, mask, group_size=3, scale_by_std=True), expected, rtol=1e-5, atol=1e-5)
    centred = torch.tensor([4 / 3, -2 / 3, -2 / 3, -1.0, 0.5, 0.5])
    torch.testing.assert_close(group(rewards, mask, group_size=3, scale_by_std=False), centred)


def test_advantage_registry_refuses_duplicates_and_lists_known_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from dapo_env.learners.config import TrainConfig
    from dapo_env.learners.algo.losses import ADVANTAGES, get_advantage, register_advantage

    def per_token(rewards, mask, *, group_size, scale_by_std, turns=None):  # the same reward on every loss token
        return rewards[:, None] * mask

    with pytest.raises(TypeError, match=r"must accept the keyword turns="):  # the older signature, refused at once
        register_advantage("no-turns", lambda rewards, mask, *, group_size, scale_by_std: rewards)

    monkeypatch.setitem(ADVANTAGES, "per-token-test", per_token)  # removed again when the test ends
    with pytest.raises(ValueError, match="already registered.*overwrite=True"):
        register_advantage("group", per_token)
    with pytest.raises(ValueError, match=r"unknown advantage estimator 'gae'; known: \[.*'group'.*'per-token-test'"):
        get_advantage("gae")
    register_advantage("per-token-test", per_token, overwrite=True)
    assert TrainConfig(advantage="per-token-test").advantage == "per-token-test"  # the config reads the registry
    with pytest.raises(ValueError, match="TrainConfig.advantage.*register_advantage"):
        TrainConfig(advantage="gae")
    out = get_advantage("per-token-test")(torch.tensor([1.0, -1.0]), torch.tensor([[1, 1, 0], [1, 0, 0]]),
                                          group_size=2, scale_by_std=True)
    assert out.tolist() == [[1, 1, 0], [-1, 0, 0]]
