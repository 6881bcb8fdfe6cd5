"""The one CUDA an op library may be built with and loaded from: the one this
TensorFlow was built with (TF 2.14: CUDA 11.8). A library built by another
CUDA links another libcudart and another runtime ABI than TensorFlow's GPU
kernels; it may load and then fail, or give wrong results, on a GPU.
"""

import os
import pathlib
import re
import shutil
import subprocess

import tensorflow as tf

# Where a CUDA toolkit's nvcc usually is, besides PATH ({version}: TF's, e.g. 11.8).
NVCC_PLACES = ('{cuda_home}/bin/nvcc', '/usr/lib/nvidia-cuda-toolkit/bin/nvcc',
               '/usr/local/cuda-{version}/bin/nvcc', '/usr/local/cuda/bin/nvcc')


def tensorflow_cuda() -> str | None:
  """The CUDA version TensorFlow was built with ('11.8'), or None (a CPU build)."""
  info = tf.sysconfig.get_build_info()
  return info.get('cuda_version') if info.get('is_cuda_build') else None


def nvcc_version(nvcc: str) -> str | None:
  """'11.8' from `nvcc --version` ("Cuda compilation tools, release 11.8, ...");
  ptxas answers the same way."""
  try:
    done = subprocess.run([nvcc, '--version'], capture_output=True, text=True, timeout=60)
  except OSError:
    return None
  found = re.search(r'release (\d+\.\d+)', done.stdout)
  return found[1] if found else None


def find_nvcc(version: str, places: tuple[str, ...] | None = None
              ) -> tuple[str | None, list[tuple[str, str | None]]]:
  """(an nvcc of CUDA `version`, or None; every nvcc found, with its version).

  Looks in `places` (default: CUDA_HOME's, Debian's toolkit, /usr/local/cuda-V,
  /usr/local/cuda), then on PATH.
  """
  if places is None:
    home = os.environ.get('CUDA_HOME', '')
    places = tuple(p.format(cuda_home=home, version=version) for p in NVCC_PLACES
                   if home or '{cuda_home}' not in p)
  on_path = shutil.which('nvcc')
  candidates = [*places, *([on_path] if on_path else [])]
  found = []
  for nvcc in dict.fromkeys(str(pathlib.Path(c).resolve()) for c in candidates
                            if pathlib.Path(c).is_file()):
    found.append((nvcc, nvcc_version(nvcc)))
    if found[-1][1] == version:
      return nvcc, found
  return None, found


def ptxas_dir(nvcc: str, version: str) -> pathlib.Path:
  """The folder of the ptxas of CUDA `version` that nvcc must call: beside it
  (NVIDIA's layout), else the first on PATH of that version (Debian's is in
  /usr/bin, which PATH may list after another CUDA's /usr/local/bin)."""
  beside = pathlib.Path(nvcc).with_name('ptxas')
  path = os.environ.get('PATH', '').split(os.pathsep)
  for candidate in (beside, *(pathlib.Path(d) / 'ptxas' for d in path)):
    if candidate.is_file() and nvcc_version(str(candidate)) == version:
      return candidate.parent
  raise RuntimeError(f'no ptxas of CUDA {version} beside {nvcc} or on PATH')


def linked_major(library: pathlib.Path) -> int | None:
  """The CUDA major version whose runtime (libcudart.so.N) a library links, or None."""
  found = re.search(rb'libcudart\.so\.(\d+)', library.read_bytes())
  return int(found[1]) if found else None


def refusal(library: pathlib.Path) -> str | None:
  """Why a CUDA op library must not be loaded here, or None if it may."""
  wanted = tensorflow_cuda()
  linked = linked_major(library)
  if wanted is None or linked is None:
    return None  # no CUDA in TensorFlow (the CPU kernels load) or none in the library
  if linked != int(wanted.split('.')[0]):
    return (f'{library.name} links CUDA {linked} (libcudart.so.{linked}); TensorFlow was '
            f'built with CUDA {wanted}: rebuild it with `python -m tff_rec.ops.build`')
  return None
