"""Calibration observers: registry, qparams, and the range each observer picks, against hand-computed values."""
from __future__ import annotations

import json

import pytest
import torch

from ipexconvert.errors import UserInputError
from ipexconvert.quant.observers import (OBSERVERS, QDTYPES, Observer, make_observer, qparams_from_range,
                                         register_observer)
from ipexconvert.quant.observers.base import MIN_SCALE, StreamingHistogram


def _f32(v: float) -> float:
    return float(torch.tensor(v, dtype=torch.float32))


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _uint8_mse(x: torch.Tensor, lo: float, hi: float) -> float:
    """Real quantize-dequantize error of x with the uint8 qparams of [lo, hi], in plain torch."""
    scale, zp = qparams_from_range(lo, hi, "uint8")
    q = torch.clamp(torch.round(x / scale) + zp, 0, 255)
    return float(((q - zp) * scale - x).pow(2).mean())


def _observe(name: str, *batches: torch.Tensor, **params) -> Observer:
    obs = make_observer(name, **params)
    for b in batches:
        obs.update(b)
    return obs


# --- registry -------------------------------------------------------------------------------------

def test_registry_holds_exactly_the_three_observers():
    assert set(OBSERVERS) == {"minmax", "percentile", "histogram"}
    assert QDTYPES == ("uint8", "int8")
    for name, cls in OBSERVERS.items():
        assert cls.name == name and isinstance(make_observer(name), cls)


def test_unknown_observer_names_the_known_ones():
    with pytest.raises(UserInputError) as err:
        make_observer("kl")
    assert "kl" in err.value.problem
    for name in ("minmax", "percentile", "histogram"):
        assert name in err.value.fix


def test_bad_params_are_user_errors():
    with pytest.raises(UserInputError, match="bins"):
        make_observer("minmax", bins=10)
    for name, params in [("percentile", {"percentile": 101}), ("percentile", {"percentile": 40.0}),
                         ("percentile", {"percentile": "99"}), ("histogram", {"bins": 1}),
                         ("histogram", {"levels": 2.5}), ("percentile", {"bins": True})]:
        with pytest.raises(UserInputError):
            make_observer(name, **params)


def test_duplicate_registration_fails():
    class Again(Observer):
        name = "minmax"

        def _range(self):
            return 0.0, 0.0

    with pytest.raises(RuntimeError, match="twice"):
        register_observer(Again)
    assert OBSERVERS["minmax"] is not Again


# --- qparams_from_range ---------------------------------------------------------------------------

def test_qparams_uint8_asymmetric():
    scale, zp = qparams_from_range(-1.0, 3.0, "uint8")
    assert scale == _f32(4 / 255)
    assert zp == 64 and isinstance(zp, int)  # round(1 / (4/255)) = round(63.75)


def test_qparams_int8_symmetric():
    assert qparams_from_range(-2.0, 1.0, "int8") == (_f32(2 / 127), 0)
    assert qparams_from_range(-0.5, 3.0, "int8") == (_f32(3 / 127), 0)


def test_qparams_include_zero():
    # All-positive: lo becomes 0, zero point 0; all-negative: hi becomes 0, zero point 255.
    assert qparams_from_range(0.5, 2.0, "uint8") == (_f32(2 / 255), 0)
    assert qparams_from_range(-2.0, -0.5, "uint8") == (_f32(2 / 255), 255)


def test_qparams_zero_range_still_quantizes():
    for dtype in QDTYPES:
        scale, zp = qparams_from_range(0.0, 0.0, dtype)
        assert scale == MIN_SCALE > torch.finfo(torch.float32).tiny  # positive and not subnormal
        assert zp == 0
        x = torch.zeros(8)
        assert torch.equal((torch.round(x / scale) + zp - zp) * scale, x)


def test_qparams_rejects_bad_input():
    with pytest.raises(UserInputError, match="fp8"):
        qparams_from_range(-1.0, 1.0, "fp8")
    with pytest.raises(ValueError):
        qparams_from_range(1.0, -1.0, "uint8")
    with pytest.raises(ValueError):
        qparams_from_range(float("nan"), 1.0, "uint8")


# --- shared behaviour (every observer) ------------------------------------------------------------

@pytest.mark.parametrize("name", ["minmax", "percentile", "histogram"])
def test_no_data_is_an_error(name):
    obs = make_observer(name)
    obs.update(torch.empty(0, 3))  # empty batches carry no data
    with pytest.raises(RuntimeError, match=f"observer {name} saw no data"):
        obs.range()


@pytest.mark.parametrize("name", ["minmax", "percentile", "histogram"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_input_raises(name, bad):
    obs = make_observer(name)
    with pytest.raises(ValueError, match="non-finite"):
        obs.update(torch.tensor([1.0, bad, 2.0]))


@pytest.mark.parametrize("name", ["minmax", "percentile", "histogram"])
def test_integer_input_is_rejected(name):
    with pytest.raises(TypeError):
        make_observer(name).update(torch.tensor([1, 2, 3]))


@pytest.mark.parametrize("name", ["minmax", "percentile", "histogram"])
def test_all_zero_input(name):
    obs = _observe(name, torch.zeros(4, 4), torch.zeros(3))
    assert obs.range() == (0.0, 0.0)
    scale, zp = qparams_from_range(*obs.range(), "uint8")
    assert scale > 0 and zp == 0


@pytest.mark.parametrize("name", ["minmax", "percentile", "histogram"])
def test_summary_is_json(name):
    obs = _observe(name, torch.tensor([[-1.0, 2.0], [0.5, 4.0]]))
    s = json.loads(json.dumps(obs.summary()))
    assert s["observer"] == name and s["min"] == -1.0 and s["max"] == 4.0
    assert s["lo"] <= 0 <= s["hi"]
    assert (s["lo"], s["hi"]) == pytest.approx(obs.range())
    if name == "percentile":
        assert s["percentile"] == 99.99 and s["bins"] == 2048
    if name == "histogram":
        assert s["bins"] == 2048 and s["levels"] == 256


# --- minmax ---------------------------------------------------------------------------------------

def test_minmax_over_batches():
    obs = _observe("minmax", torch.tensor([1.0, 2.0, 3.0]), torch.tensor([-1.0, 0.5]),
                   torch.tensor([[5.0, 2.0], [0.0, 1.0]]))
    assert (obs.min, obs.max) == (-1.0, 5.0)
    assert obs.range() == (-1.0, 5.0)


def test_minmax_range_includes_zero():
    assert _observe("minmax", torch.tensor([2.0, 3.0]), torch.tensor([[2.5]])).range() == (0.0, 3.0)
    assert _observe("minmax", torch.tensor([-4.0, -1.0])).range() == (-4.0, 0.0)


def test_minmax_accepts_bf16_and_non_contiguous():
    obs = _observe("minmax", torch.tensor([1.5, -2.25], dtype=torch.bfloat16),
                   torch.tensor([[0.0, 7.0], [9.0, 0.0]]).t()[:, :1])  # column [0, 7]
    assert obs.range() == (-2.25, 7.0)


# --- streaming histogram --------------------------------------------------------------------------

def test_histogram_growth_rebins_exactly():
    batches = [torch.randn(5000, generator=_gen(1)) * 0.1, torch.randn(5000, generator=_gen(2)),
               torch.randn(5000, generator=_gen(3)) * 8 + 3, torch.tensor([-50.0, 0.0])]
    hist = StreamingHistogram(256)
    for b in batches:
        hist.add(b)
    data = torch.cat(batches).double()
    assert hist.counts.numel() == 256 and hist.total == data.numel()
    edges = hist.edges()
    assert edges[0] <= data.min() and data.max() <= edges[-1]
    # The same counts as binning all the data at once into the final edges.
    direct = torch.bincount(((data - hist.lo) / hist.width).floor().long().clamp(0, 255), minlength=256)
    assert torch.equal(hist.counts, direct.double())
    # Bins stay within about 2x of what the observed range needs.
    assert hist.width <= 2 * float(data.max() - data.min()) / 256 * 1.01


def test_histogram_constant_first_batch_then_wider():
    hist = StreamingHistogram(64)
    hist.add(torch.full((10,), 2.0))
    hist.add(torch.tensor([-3.0, 5.0]))
    assert hist.total == 12 and hist.lo <= -3.0 and hist.edges()[-1] >= 5.0


# --- percentile -----------------------------------------------------------------------------------

def _outlier_data() -> torch.Tensor:
    x = torch.randn(100_000, generator=_gen(0))
    x[:5] = 100.0   # a few huge outliers on each side, well under 0.1% of the data
    x[5:10] = -80.0
    return x


def test_percentile_ignores_outliers():
    x = _outlier_data()
    obs = _observe("percentile", x, percentile=99.9)
    lo, hi = obs.range()
    tol = obs.hist.width
    assert tol < 0.1  # 180 / 2048, so the comparison below is meaningful
    assert hi < 5 and lo > -5  # far inside [-80, 100]
    assert hi == pytest.approx(float(torch.quantile(x, 0.999)), abs=tol)
    assert lo == pytest.approx(float(torch.quantile(x, 0.001)), abs=tol)


def test_percentile_streaming_matches_one_batch():
    x = _outlier_data()
    narrow = torch.randn(30_000, generator=_gen(4)) * 0.3
    batches = [narrow, x[20_000:], x[:20_000]]  # the outliers arrive last and widen the histogram
    streamed = _observe("percentile", *batches, percentile=99.9)
    single = _observe("percentile", torch.cat(batches), percentile=99.9)
    tol = 2 * max(streamed.hist.width, single.hist.width)
    assert streamed.range() == pytest.approx(single.range(), abs=tol)
    everything = torch.cat(batches)
    assert streamed.range()[1] == pytest.approx(float(torch.quantile(everything, 0.999)), abs=tol)


def test_percentile_100_is_minmax():
    x = torch.randn(1000, generator=_gen(5))
    assert _observe("percentile", x, percentile=100).range() == (float(x.min()), float(x.max()))


# --- histogram (MSE) ------------------------------------------------------------------------------

def test_mse_clips_outliers_and_lowers_real_error():
    x = torch.randn(200_000, generator=_gen(6))
    x[0], x[1] = 40.0, -30.0
    lo, hi = _observe("histogram", x).range()
    assert -30.0 < lo < -1.0 and 1.0 < hi < 40.0  # narrower than minmax, not absurdly so
    err, err_minmax = _uint8_mse(x, lo, hi), _uint8_mse(x, -30.0, 40.0)
    assert err < 0.75 * err_minmax
    # And a local optimum of the real error: moving either end in or out only makes it worse.
    for fa, fb in [(0.8, 1), (1.25, 1), (1, 0.8), (1, 1.25), (0.8, 0.8), (1.25, 1.25)]:
        assert err < _uint8_mse(x, lo * fa, hi * fb), (fa, fb)


def test_mse_keeps_uniform_range():
    x = torch.rand(50_000, generator=_gen(7)) * 4 - 1  # uniform on [-1, 3]
    obs = _observe("histogram", x[:20_000], x[20_000:])
    lo, hi = obs.range()
    span = float(x.max() - x.min())
    assert lo == pytest.approx(float(x.min()), abs=0.02 * span)
    assert hi == pytest.approx(float(x.max()), abs=0.02 * span)


def test_mse_one_sided_data_keeps_zero_end():
    x = torch.relu(torch.randn(20_000, generator=_gen(8)))
    lo, hi = _observe("histogram", x).range()
    assert lo == 0.0 and 0.5 * float(x.max()) < hi <= float(x.max())
