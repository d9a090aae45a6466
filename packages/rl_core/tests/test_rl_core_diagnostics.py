"""Laws of the logged diagnostics: approximate KL and explained variance."""

import math

import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cuda_agent.rl_core import approx_kl, explained_variance

TORCH_SETTINGS = settings(deadline=None, max_examples=40)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    b, t = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    floats = st.lists(st.floats(-3, 3), min_size=b * t, max_size=b * t)
    x = torch.tensor(draw(floats), dtype=torch.float64).reshape(b, t)
    y = torch.tensor(draw(floats), dtype=torch.float64).reshape(b, t)
    mask = torch.tensor(draw(st.lists(st.booleans(), min_size=b * t, max_size=b * t)))
    return x, y, mask.reshape(b, t)


@TORCH_SETTINGS
@given(data=pairs())
def test_approx_kl_is_the_masked_mean_of_k3(
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> None:
    logp, old, mask = data
    kl = approx_kl(logp, old, mask)
    log_ratio = (logp - old)[mask]
    expected = (log_ratio.exp() - 1 - log_ratio).mean() if mask.any() else torch.tensor(0.0)
    torch.testing.assert_close(kl, expected.to(kl.dtype))
    assert float(kl) >= 0 and float(approx_kl(logp, logp.clone(), mask)) == 0.0


@TORCH_SETTINGS
@given(data=pairs(), pad=st.integers(0, 3))
def test_explained_variance(
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor], pad: int
) -> None:
    values, returns, mask = data
    kept = returns[mask]
    if kept.numel() == 0 or (kept == kept[0]).all():  # nothing to explain
        assert math.isnan(float(explained_variance(values, returns, mask)))
        return
    assume(float(kept.std(correction=0)) > 1e-3)  # well-conditioned ratios below
    assert float(explained_variance(returns.clone(), returns, mask)) == 1.0
    mean_prediction = torch.full_like(returns, float(kept.mean()))
    assert abs(float(explained_variance(mean_prediction, returns, mask))) < 1e-9
    ev = explained_variance(values, returns, mask)
    expected = 1 - (kept - values[mask]).var(correction=0) / kept.var(correction=0)
    torch.testing.assert_close(ev, expected)
    padded = [torch.nn.functional.pad(x, (0, pad), value=math.inf) for x in (values, returns)]
    padded_mask = torch.nn.functional.pad(mask, (0, pad), value=False)
    torch.testing.assert_close(explained_variance(*padded, padded_mask), ev)
