"""Cost models: the roofline's arithmetic by hand, its parameters overridable, a measured profile read as measured."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from sim.measured_cost import MeasuredCost, load_profile_file
from sim.model_shapes import LLAMA_3_1_8B, PAIRS, ModelShape, pair_shape
from sim.policies import CostProfile
from sim.roofline import GB, PRESETS, Accelerator, RooflineCost, accelerator, forward_s


def test_model_shapes_give_the_published_parameter_counts():
    assert LLAMA_3_1_8B.params / 1e9 == pytest.approx(8.03, abs=0.01)
    assert PAIRS["llama-70b-8b"].verifier.params / 1e9 == pytest.approx(70.55, abs=0.01)
    assert PAIRS["qwen-7b-0.5b"].draft.params / 1e9 == pytest.approx(0.494, abs=0.001)
    with pytest.raises(ValueError, match="choose one of"):
        pair_shape("gpt-5")


def test_a_one_row_decode_forward_of_a_large_model_is_its_weights_over_the_bandwidth():
    device = Accelerator("test", hbm_gb_s=1000.0, matmul_tflops=1000.0, memory_gb=80, launch_us=0.0,
                         bandwidth_efficiency=1.0, flops_efficiency=1.0)  # fmt: skip
    expected = (LLAMA_3_1_8B.weight_bytes + 1 * (0 + 1) * LLAMA_3_1_8B.kv_bytes_per_token) / (1000 * GB)
    assert forward_s(device, LLAMA_3_1_8B, rows=1, tokens=1, context=0) == pytest.approx(expected)


def test_a_large_batch_is_bound_by_the_matmul_rate():
    device = Accelerator("test", hbm_gb_s=1e9, matmul_tflops=100.0, memory_gb=80, launch_us=0.0,
                         flops_efficiency=1.0)  # fmt: skip
    tokens = 256 * 4
    assert forward_s(device, LLAMA_3_1_8B, 256, 4, 0) == pytest.approx(2 * LLAMA_3_1_8B.matmul_params * tokens / 1e14)


def test_a_tiny_model_is_bound_by_kernel_launches():
    tiny = ModelShape("tiny", 2, 64, 128, 2, 1, 100, True, 1024)
    device = accelerator("h200", launch_us=5.0, kernels_per_layer=10)
    assert forward_s(device, tiny, 1, 1, 10) == pytest.approx((2 * 10 + 4) * 5e-6)


def test_every_roofline_parameter_can_be_overridden_and_bad_ones_are_refused():
    slow = RooflineCost(accelerator("h200", hbm_gb_s=2400.0), PAIRS["llama-8b-1b"])
    fast = RooflineCost(accelerator("h200"), PAIRS["llama-8b-1b"])
    assert slow.verify_s(1, 1, 512) > 1.8 * fast.verify_s(1, 1, 512)
    assert slow.assumptions()["hbm_gb_s"] == 2400.0
    with pytest.raises(ValueError, match="unknown device parameter"):
        accelerator("h100", warp_speed=9)
    with pytest.raises(ValueError, match="overlap must be in 0..1"):
        accelerator("h100", overlap=1.5)
    with pytest.raises(ValueError, match="unknown device"):
        accelerator("tpu")


def test_a_pair_that_does_not_fit_the_device_is_refused_with_the_way_out():
    with pytest.raises(ValueError, match="split them over more devices"):
        RooflineCost(PRESETS["h100"], PAIRS["llama-70b-8b"])
    split = RooflineCost(accelerator("h100", tp=4), PAIRS["llama-70b-8b"])
    assert split.kv_capacity_tokens() > 0 and "x4" in split.name


def test_two_streams_slow_each_other_by_what_they_do_not_overlap():
    cost = RooflineCost(accelerator("h200", overlap=0.25), PAIRS["llama-8b-1b"])
    assert cost.concurrent_slowdown(8, 5) == pytest.approx(1.75)
    assert cost.profile(16, 5).concurrent_slowdown(8, 5) == pytest.approx(1.75)


def test_the_policies_grid_is_the_cost_model_at_the_nominal_context():
    cost = RooflineCost(accelerator("h200"), PAIRS["qwen-7b-0.5b"])
    profile = cost.profile(32, 9)
    assert profile.batch_sizes == (1, 2, 4, 8, 16, 32) and profile.tokens == tuple(range(1, 10))
    assert profile.verify_s(8, 3) == pytest.approx(cost.verify_s(8, 3, 512))
    assert profile.draft_s(4) == pytest.approx(cost.draft_s(4, 512))


def _profile(device: str = "cpu") -> CostProfile:
    return CostProfile((1, 4), (1, 2), ((10.0, 12.0), (20.0, 30.0)), (2.0, 4.0), {"device": device, "threads": "2"})


def test_a_measured_profile_prices_forwards_as_measured_and_prefill_from_its_slope():
    cost = MeasuredCost(_profile(), "test")
    assert cost.verify_s(4, 2, context=9999) == pytest.approx(0.030)
    assert cost.draft_s(1, 0) == pytest.approx(0.002)
    # 8 tokens at most in the grid (4 rows x 2): (30 - 10) / 7 ms per further token; draft (4 - 2) / 3
    expected = 0.010 + 99 * 0.020 / 7 + 0.002 + 99 * 0.002 / 3
    assert cost.prefill_s(100, 1, 0, with_draft=True) == pytest.approx(expected)
    assert not cost.cuda and MeasuredCost(_profile("cuda:0"), "gpu").cuda


def test_a_profile_file_reads_back_and_a_bad_one_fails_with_one_message(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(asdict(_profile("cuda:0"))))
    cost = load_profile_file(path)
    assert cost.cuda and cost.verify_s(1, 1, 0) == pytest.approx(0.010)
    (tmp_path / "bad.json").write_text('{"tokens": []}')
    with pytest.raises(ValueError, match="not a step-cost profile"):
        load_profile_file(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="does not exist"):
        load_profile_file(tmp_path / "missing.json")
