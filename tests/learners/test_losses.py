from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dapo_env.learners.losses import (
    AGGREGATIONS,
    entropy_from_logits,
    get_aggregation,
    group_advantages,
    loss_denominators,
    masked_mean,
    policy_loss,
    register_aggregation,
    truncated_is_weights,
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
    tis = truncated_is_weights(torch.log(torch.tensor([0.3, 0.9])), torch.log(torch.tensor([0.6, 0.3])))
    torch.testing.assert_close(tis, torch.tensor([0.5, 2.0]))  # 0.9/0.3 = 3 capped at 2


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
