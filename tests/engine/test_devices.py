"""CUDA that cannot be used fails with one line; the KV pool fences blocks a lane's stream released."""

import subprocess
import sys

import pytest
import torch

from engine.devices import cuda_problem
from engine.kv import KVPool, KVStore
from engine.models.pair import ModelLoadError, resolve_device
from tests.support import ROOT


class NoCuda:
    @staticmethod
    def is_available():
        return False


class TwoGpus:
    @staticmethod
    def is_available():
        return True

    @staticmethod
    def device_count():
        return 2


def test_cuda_problem_names_what_is_missing():
    assert "no CUDA device" in cuda_problem("cuda", NoCuda)
    assert cuda_problem("cuda:1", TwoGpus) is None
    assert "cuda:2 asked for, 2 CUDA device(s) visible" in cuda_problem("cuda:2", TwoGpus)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where CUDA is not usable")
def test_device_cuda_without_cuda_is_an_error_not_a_cpu_run():
    with pytest.raises(ModelLoadError, match="CUDA is not usable"):
        resolve_device("cuda")
    assert resolve_device("auto") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where CUDA is not usable")
def test_the_cli_with_device_cuda_and_no_cuda_exits_2_with_one_line():
    cmd = [sys.executable, "-m", "engine", "generate", "--preset", "tiny", "--device", "cuda", "--prompt", "hi"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --device cuda: CUDA is not usable"), done.stderr


class FakeEvent:
    def __init__(self, log):
        self.log, self.stream = log, None

    def record(self, stream):
        self.stream = stream


class FakeCuda:
    """Per-thread current streams, as real CUDA keeps them."""

    def __init__(self):
        import threading

        self.log, self._local = [], threading.local()

    def current_stream(self, device=None):
        return getattr(self._local, "stream", "default")

    def set_stream(self, name):
        self._local.stream = name

    def Event(self):  # noqa: N802 - mirrors torch.cuda.Event
        return FakeEvent(self.log)

    def synchronize(self, device=None):
        self.log.append("synchronize")


def _cuda_pool(cuda) -> KVPool:
    return KVPool(1, 1, 4, torch.float32, torch.device("cpu"), backend=cuda)  # tensors on the CPU, fenced


def test_a_block_released_on_one_stream_is_fenced_for_its_next_user():
    import threading

    cuda = FakeCuda()
    pool = _cuda_pool(cuda)

    def verify_lane_releases(store):
        cuda.set_stream("verify")
        store.free()

    first = KVStore(pool, 16)
    assert first.fences == []  # fresh blocks: nothing to wait for
    worker = threading.Thread(target=verify_lane_releases, args=(first,))
    worker.start()
    worker.join()
    second = KVStore(pool, 16)  # the lowest free block again: the one just released
    assert second.blocks == first.blocks
    fences = second.take_fences()
    assert [f.stream for f in fences] == ["verify"]  # recorded on the releasing thread's stream, not this one's
    assert second.take_fences() == []  # waited on once


def test_growing_the_pool_on_cuda_synchronizes_first():
    cuda = FakeCuda()
    pool = _cuda_pool(cuda)
    KVStore(pool, 16 * (pool.num_blocks + 1))
    assert cuda.log == ["synchronize"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where CUDA is not usable")
def test_gpu_check_without_cuda_exits_2_with_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "engine", "gpu-check"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: gpu-check: CUDA is not usable"), done.stderr
