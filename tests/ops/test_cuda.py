"""Which CUDA the op's GPU library is built with and loaded from."""

import pathlib
import subprocess
import sys

from tests import conftest
from tff_rec.ops import cuda
from tff_rec.ops import hashed_embedding


def _nvcc(path: pathlib.Path, release: str) -> str:
  """An executable that answers `--version` as CUDA `release`'s nvcc does."""
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text('#!/bin/sh\necho "nvcc: NVIDIA (R) Cuda compiler driver"\n'
                  f'echo "Cuda compilation tools, release {release}, V{release}.89"\n')
  path.chmod(0o755)
  return str(path)


def test_tensorflow_2_14_wants_cuda_11_8():
  assert cuda.tensorflow_cuda() == '11.8'


def test_only_an_nvcc_of_tensorflows_cuda_is_chosen(tmp_path):
  newer = _nvcc(tmp_path / 'cuda-13.0' / 'nvcc', '13.0')
  wanted = _nvcc(tmp_path / 'cuda-11.8' / 'nvcc', '11.8')
  assert cuda.nvcc_version(newer) == '13.0'
  nvcc, found = cuda.find_nvcc('11.8', places=(newer,))
  assert nvcc is None and (newer, '13.0') in found
  nvcc, found = cuda.find_nvcc('11.8', places=(newer, wanted))
  assert nvcc == wanted and found[:2] == [(newer, '13.0'), (wanted, '11.8')]


def test_a_library_of_another_cuda_is_refused_by_name(tmp_path):
  library = tmp_path / '_hashed_embedding_ops_gpu.so'
  library.write_bytes(b'\x7fELF...\x00libcudart.so.13\x00libtensorflow_framework.so.2\x00')
  assert cuda.linked_major(library) == 13
  assert cuda.refusal(library) == (
      '_hashed_embedding_ops_gpu.so links CUDA 13 (libcudart.so.13); TensorFlow was built '
      'with CUDA 11.8: rebuild it with `python -m tff_rec.ops.build`')
  library.write_bytes(b'\x7fELF...\x00libcudart.so.11.0\x00')
  assert cuda.refusal(library) is None
  library.write_bytes(b'\x7fELF...\x00libtensorflow_framework.so.2\x00')  # a CPU library
  assert cuda.refusal(library) is None


def test_the_loader_passes_over_a_library_of_another_cuda(tmp_path, caplog):
  other = tmp_path / '_hashed_embedding_ops_gpu.so'
  other.write_bytes(b'\x7fELF...\x00libcudart.so.13\x00')
  assert hashed_embedding.load_first((other,)) is None
  assert 'not loading _hashed_embedding_ops_gpu.so links CUDA 13' in caplog.text


_REGISTERED = """
import pathlib
import sys
from tensorflow.python.framework import kernels
from tff_rec.ops import hashed_embedding
assert hashed_embedding.load_first((pathlib.Path(sys.argv[1]),)) is not None
for op in ('HashedEmbeddingLookup', 'HashedEmbeddingLookupGrad'):
  print(op, sorted({k.device_type for k in kernels.get_registered_kernels_for_op(op).kernel}))
"""


def test_the_cuda_library_registers_gpu_kernels_for_the_lookup_and_its_gradient():
  """On a CPU machine too: the library is built by CUDA 11.8 (.ci/cuda_toolkit).
  In a process of its own: this one may hold the CPU library's ops already."""
  library = pathlib.Path(hashed_embedding.__file__).with_name('_hashed_embedding_ops_gpu.so')
  if not library.exists():
    conftest.skip_outside_ci(f'{library.name} not built: no CUDA 11.8 nvcc here '
                             '(.ci/cuda_toolkit installs one; then make setup)')
  assert cuda.linked_major(library) == 11
  done = subprocess.run([sys.executable, '-c', _REGISTERED, str(library)], cwd=conftest.REPO,
                        capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  assert done.stdout.splitlines() == ["HashedEmbeddingLookup ['CPU', 'GPU']",
                                      "HashedEmbeddingLookupGrad ['CPU', 'GPU']"]
