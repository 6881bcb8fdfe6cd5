"""Builds the hashed embedding op libraries next to this file.

  python -m tff_rec.ops.build [--force]

The CPU library (g++ with tf.sysconfig's flags) and, when TensorFlow is a
CUDA build and an nvcc of its CUDA version is found (tff_rec.ops.cuda: TF
2.14 needs 11.8), the CUDA one, with that toolkit's own ptxas. Another CUDA's
nvcc is not used: one line says which was found. A failed build is reported and
skipped: the wrapper then uses the other library or the pure-TF composite.
A library newer than its sources is kept (a second setup reuses it).
"""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import tensorflow as tf

from tff_rec.ops import cuda

HERE = pathlib.Path(__file__).parent
SOURCES = HERE / 'cc'
CPU_LIBRARY = HERE / '_hashed_embedding_ops.so'
GPU_LIBRARY = HERE / '_hashed_embedding_ops_gpu.so'


def _fresh(target: pathlib.Path) -> bool:
  newest = max(p.stat().st_mtime for p in SOURCES.iterdir())
  return target.exists() and target.stat().st_mtime >= newest


def _run(command: list[str], env: dict | None = None) -> None:
  done = subprocess.run(command, capture_output=True, text=True, env=env)
  if done.returncode:
    raise RuntimeError(f'{" ".join(command[:3])} ... failed:\n{done.stderr[-4000:]}')


def build_cpu(force: bool = False) -> pathlib.Path:
  if force or not _fresh(CPU_LIBRARY):
    _run(['g++', '-shared', '-fPIC', '-O3', *tf.sysconfig.get_compile_flags(),
          str(SOURCES / 'hashed_embedding_ops.cc'), '-o', str(CPU_LIBRARY),
          *tf.sysconfig.get_link_flags()])
  return CPU_LIBRARY


def _cuda_home(nvcc: str) -> pathlib.Path:
  """CUDA's root as nvcc itself reports it (nvcc may be a wrapper script)."""
  done = subprocess.run([nvcc, '--dryrun', '-x', 'cu', '-c', os.devnull, '-o', os.devnull],
                        capture_output=True, text=True)
  for line in (done.stdout + done.stderr).splitlines():
    if line.startswith('#$ TOP='):
      return pathlib.Path(line.split('=', 1)[1]).resolve()
  return pathlib.Path(nvcc).resolve().parents[1]


# The GPUs the kernels are compiled for: TensorFlow 2.14's oldest supported
# (Volta) and the H100 (Hopper); others JIT-compile the Volta PTX.
GENCODE = ('-gencode=arch=compute_70,code=sm_70', '-gencode=arch=compute_90,code=sm_90',
           '-gencode=arch=compute_70,code=compute_70')


def build_gpu(force: bool = False) -> pathlib.Path:
  wanted = cuda.tensorflow_cuda()
  if wanted is None:
    raise RuntimeError('this TensorFlow is not a CUDA build')
  nvcc, found = cuda.find_nvcc(wanted)
  if nvcc is None:
    seen = ', '.join(f'CUDA {v or "?"} at {path}' for path, v in found) or 'no nvcc'
    raise RuntimeError(
        f'found {seen}; TensorFlow needs CUDA {wanted}\'s nvcc (put its bin/ first on PATH '
        f'or set CUDA_HOME; Debian 12: apt-get install nvidia-cuda-toolkit, from the '
        f'contrib and non-free components, is {wanted} on bookworm)')
  if force or not _fresh(GPU_LIBRARY):
    cuda_home = _cuda_home(nvcc)
    # The toolkit's own ptxas first: another CUDA's rejects its PTX or targets.
    env = {**os.environ, 'PATH': os.pathsep.join(
        (str(pathlib.Path(nvcc).parent), str(cuda.ptxas_dir(nvcc, wanted)),
         os.environ.get('PATH', '')))}
    flags = [*tf.sysconfig.get_compile_flags(), '-DGOOGLE_CUDA=1']
    with tempfile.TemporaryDirectory() as tmp:
      kernels = pathlib.Path(tmp) / 'kernels.o'
      _run([nvcc, '-c', '-O3', '-x', 'cu', '-Xcompiler', '-fPIC', *GENCODE,
            '--expt-relaxed-constexpr', *flags,
            str(SOURCES / 'hashed_embedding_kernels.cu.cc'), '-o', str(kernels)], env)
      _run(['g++', '-shared', '-fPIC', '-O3', *flags, f'-I{cuda_home / "include"}',
            str(SOURCES / 'hashed_embedding_ops.cc'), str(kernels), '-o',
            str(GPU_LIBRARY), f'-L{cuda_home / "lib64"}', '-lcudart',
            *tf.sysconfig.get_link_flags()], env)
  return GPU_LIBRARY


def main(argv: list[str]) -> int:
  """Builds what it can; a failure leaves the pure-TF composite in charge."""
  force = '--force' in argv
  for build, library, fallback in (
      (build_cpu, CPU_LIBRARY, 'The pure-TF composite will be used'),
      (build_gpu, GPU_LIBRARY, 'The ops will run on CPU')):
    try:
      print(f'built {build(force)}')
    except (RuntimeError, OSError) as e:
      library.unlink(missing_ok=True)
      print(f'{library.name} not built: {e}. {fallback}.')
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
