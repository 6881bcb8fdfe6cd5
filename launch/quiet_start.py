"""TensorFlow loads for the launchers without the error lines that are not errors.

TF 2.14's CUDA build registers its cuDNN, cuFFT and cuBLAS factories twice at
import and logs an error for each (tensorflow/tensorflow#62075): three "E" lines
at every start, GPU or not, that would teach users to ignore error lines. Where
CUDA's driver library is installed but no GPU is, TF's start of CUDA logs a
fourth ("failed call to cuInit: CUDA_ERROR_NO_DEVICE"); the import lists the
devices so that it happens, and is filtered, there.
`install()` (the launch package does it) turns TF's INFO and WARNING logs off
and, when TensorFlow is first imported, by whichever module, captures stderr
for that import alone and passes on every line but those. Launchers that
never import TensorFlow (launch.worker) do not load it.

With TFF workers (--runtime=remote), TFF's mergeable compiler splits a round
into pieces, some of which compute nothing, and Grappler logs "E ... Failed to
detect the fetch node(s), skipping this input" for each such piece (8-18 lines
a run); TFF then leaves that piece unoptimized, as it should. `quiet_compiler`
wraps the runtime's compiler so that those lines alone are dropped while it
compiles.

TFF's secure sum (aggregators/primitives.py, its quantization's bounds check)
builds a graph-mode `assert_less_equal` it never runs; TF logs each such
assert's garbage collection as an "ERROR ... Object was never used" block,
about 170 lines a secure run. Those records alone are dropped from TF's Python
logger.
"""

import contextlib
import importlib.abc
import importlib.machinery
import logging
import os
import re
import sys
import tempfile

_NOT_ERRORS = re.compile(
    r'Unable to register cu(DNN|FFT|BLAS) factory: Attempting to register factory for '
    r'plugin cu\w+ when one has already been registered'
    # CUDA's driver library installed (e.g. with the toolkit the op's CUDA build
    # needs) on a machine without a GPU: TF runs on CPU, as it should.
    r'|failed call to cuInit: CUDA_ERROR_NO_DEVICE'
    r'|grappler_item_builder.cc:\d+\] Failed to detect the fetch node\(s\), skipping this input')


@contextlib.contextmanager
def _not_errors_dropped():
  """Captures the process's stderr (file descriptor 2: TF's C++ logs too) while it
  runs, then passes on every line but those of _NOT_ERRORS."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      yield
    finally:
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      for line in captured.read().decode(errors='replace').splitlines(keepends=True):
        if not _NOT_ERRORS.search(line):
          sys.stderr.write(line)
      sys.stderr.flush()


def quiet_compiler(compiler_fn):
  """`compiler_fn` (a TFF computation -> its compiled form) with _NOT_ERRORS's
  lines dropped from what it logs."""
  def compile_quietly(computation):
    with _not_errors_dropped():
      return compiler_fn(computation)

  return compile_quietly


class _Loader(importlib.abc.Loader):
  """TensorFlow's own loader, its stderr filtered while it runs."""

  def __init__(self, loader):
    self._loader = loader

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module) -> None:
    with _not_errors_dropped():
      self._loader.exec_module(module)
      module.config.list_physical_devices()  # CUDA's start, whose log is filtered too
      logging.getLogger('tensorflow').addFilter(_UnusedAssertFilter())


class _UnusedAssertFilter(logging.Filter):
  """Drops TF's "Object was never used" report of a graph-mode assert_less_equal."""

  def filter(self, record: logging.LogRecord) -> bool:
    message = record.getMessage()
    return not ('Object was never used' in message and "'assert_less_equal" in message)


class _Finder(importlib.abc.MetaPathFinder):
  """Finds `tensorflow` once, as the other finders do, and wraps its loader."""

  def find_spec(self, name, path, target=None):
    if name != 'tensorflow':
      return None
    sys.meta_path.remove(self)
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is not None and spec.loader is not None:
      spec.loader = _Loader(spec.loader)
    return spec


def install() -> None:
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # TF's INFO and WARNING lines
  if 'tensorflow' not in sys.modules and not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
