"""PyTorch's own memory in the run files on CUDA (here the fake backend), and its absence said in words on the CPU."""

from engine.config import EngineConfig, SamplingParams
from tests.support.fake_cuda import FAKE_MEMORY, fake_cuda  # noqa: F401 - fake_cuda is a fixture
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.replay import replay
from workloads.drivers.run_result import NO_ALLOCATOR
from workloads.drivers.run_spec import RunSettings, RunSpec
from workloads.drivers.trace import Trace, TraceItem


def _replay(pair):
    prompts = ["hello there", "one two three"]
    items = tuple(TraceItem(f"m{i}", p, tuple(pair.encode_prompt(p)), 4) for i, p in enumerate(prompts))
    trace = Trace(items, "test prompts", 0)
    settings = RunSettings(EngineConfig(), SamplingParams(max_new_tokens=4), warmup=0)
    return replay(pair, trace, RunSpec("ar", ClosedLoop(2), settings))


def test_on_the_cpu_the_run_file_says_pytorchs_allocator_figures_are_absent(tiny_pair):
    result = _replay(tiny_pair)
    assert result.allocator is None
    assert result.record().round_meta["torch_memory_mb"] == NO_ALLOCATOR


def test_on_cuda_each_run_starts_from_an_emptied_cache_and_records_the_allocators_figures(tiny_pair, fake_cuda):  # noqa: F811
    first, second = _replay(tiny_pair), _replay(tiny_pair)
    assert fake_cuda.fresh_memories == 2  # before each engine: its peaks are its own
    for result in (first, second):
        assert result.allocator == FAKE_MEMORY
        assert result.record().round_meta["torch_memory_mb"] == FAKE_MEMORY._asdict()
