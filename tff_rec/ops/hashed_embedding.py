"""The hashed embedding lookup: custom op (C++/CUDA) or pure-TF composite.

Both give identical forward values and sparse gradients (IndexedSlices of the
memory, a slot per element read; the op's values are each element's signed
gradient, unsummed). Graphs that run on TFF's native runtime must use the
composite: its worker cannot load op libraries.
"""

import contextlib
import functools
import logging
import pathlib

import tensorflow as tf

from tff_rec.ops import cuda
from tff_rec.ops import hashing

MODES = ('element', 'chunk')
IMPLS = ('auto', 'op', 'composite')
# Tried in order: the CUDA build (with a GPU), then the CPU-only build (tff_rec.ops.build).
LIBRARIES = ('_hashed_embedding_ops_gpu.so', '_hashed_embedding_ops.so')

_log = logging.getLogger(__name__)
_COMPOSITE_ONLY = []  # non-empty inside composite_only()


@contextlib.contextmanager
def composite_only():
  """Lookups traced inside with impl 'auto' use the composite: the runner builds a
  process for TFF's native worker (which cannot load the op) inside this."""
  _COMPOSITE_ONLY.append(True)
  try:
    yield
  finally:
    _COMPOSITE_ONLY.pop()


@functools.cache
def load_library():
  """The loaded op module, or None (logged once) if no library loads. The CUDA
  build only where TensorFlow sees a GPU: loaded without one, it made every
  graph TF builds slower (a test of TFF builds: 25 s -> 39 s)."""
  names = LIBRARIES if tf.config.list_physical_devices('GPU') else LIBRARIES[1:]
  return load_first(tuple(pathlib.Path(__file__).with_name(name) for name in names))


def load_first(paths: tuple[pathlib.Path, ...]):
  """The op module of the first of `paths` that may load (cuda.refusal) and
  does, or None, logged."""
  errors = []
  for path in paths:
    name = path.name
    if not path.exists():
      errors.append(f'{name}: not built')
      continue
    refused = cuda.refusal(path)
    if refused:
      _log.warning('not loading %s', refused)
      errors.append(refused)
      continue
    try:
      module = tf.load_op_library(str(path))
    except (tf.errors.NotFoundError, OSError) as e:
      errors.append(f'{name}: {e}')
      continue
    try:
      tf.RegisterGradient('HashedEmbeddingLookup')(_lookup_gradient(module))
    except KeyError:  # registered by an earlier load in this process
      pass
    return module
  _log.warning('hashed embedding op library unavailable (%s); using the pure-TF '
               'composite (same results, slower). Build it with '
               '`python -m tff_rec.ops.build`.', '; '.join(errors))
  return None


def _lookup_gradient(module):
  def gradient(op, grad):
    """IndexedSlices of the memory: each element's slot and signed gradient, so
    an optimizer that takes them touches only the slots the step read."""
    memory_size = tf.size(op.inputs[0], out_type=tf.int64)
    slots, values = module.hashed_embedding_lookup_grad(
        grad, op.inputs[1], memory_size, dim=op.get_attr('dim'),
        seed=op.get_attr('seed'), chunk=op.get_attr('chunk'))
    return [tf.IndexedSlices(values, slots, tf.reshape(memory_size, [1])), None]
  return gradient


def chunk_attr(dim: int, mode: str, chunk_size: int | None) -> int:
  """0 for element mode, else Z; raises ValueError naming the bad argument."""
  if not isinstance(dim, int) or dim < 1:
    raise ValueError(f'dim must be a positive integer, got {dim!r}')
  if mode not in MODES:
    raise ValueError(f'unknown mode {mode!r}; choose one of {MODES}')
  if mode == 'element':
    return 0
  if not isinstance(chunk_size, int) or chunk_size < 1 or dim % chunk_size:
    raise ValueError(f'chunk mode needs a chunk_size Z dividing dim={dim}, got '
                     f'{chunk_size!r}')
  return chunk_size


def _flat_ids(ids) -> tf.Tensor:
  ids = tf.convert_to_tensor(ids)
  if not ids.dtype.is_integer:
    raise TypeError(f'ids must be integers, got {ids.dtype.name}')
  if ids.dtype not in (tf.int32, tf.int64):
    ids = tf.cast(ids, tf.int64)
  return tf.reshape(ids, [-1])


def _checked_memory(memory) -> tf.Tensor:
  memory = tf.convert_to_tensor(memory, tf.float32)
  if memory.shape.rank is not None and memory.shape.rank != 1:
    raise ValueError(f'memory must be a vector (rank 1), got shape {memory.shape}')
  return memory


def hashed_embedding_lookup(memory, ids, *, dim: int, seed: int,
                            mode: str = 'element', chunk_size: int | None = None,
                            impl: str = 'auto') -> tf.Tensor:
  """Rows `ids` (flattened) of a virtual n x dim table stored in `memory` [m].

  Returns [number of ids, dim] float32. See tff_rec.ops.hashing for where
  each element lives. impl: 'op' (the custom op; error if not built),
  'composite' (pure TF), 'auto' (the op if its library loads, outside
  composite_only()).
  """
  chunk = chunk_attr(dim, mode, chunk_size)
  if impl not in IMPLS:
    raise ValueError(f'unknown impl {impl!r}; choose one of {IMPLS}')
  memory, ids = _checked_memory(memory), _flat_ids(ids)
  composite = impl == 'composite' or (impl == 'auto' and _COMPOSITE_ONLY)
  module = None if composite else load_library()
  if impl == 'op' and module is None:
    raise RuntimeError('impl="op" but the hashed embedding op library is not '
                       'available; build it with `python -m tff_rec.ops.build`')
  if module is not None:
    return module.hashed_embedding_lookup(memory, ids, dim=dim, seed=seed, chunk=chunk)
  return composite_lookup(memory, ids, dim=dim, seed=seed, chunk=chunk)


def composite_lookup(memory: tf.Tensor, ids: tf.Tensor, *, dim: int, seed: int,
                     chunk: int) -> tf.Tensor:
  """The pure-TF lookup (builds [N, dim] slot indices, which the op avoids)."""
  m = tf.size(memory, out_type=tf.int64)
  checks = [
      tf.debugging.assert_non_negative(ids, message='ids must be non-negative'),
      tf.debugging.assert_positive(m, message='memory size must be >= 1'),
      tf.debugging.assert_less_equal(m, tf.constant(hashing.MAX_MEMORY, tf.int64),
                                     message='memory size must be <= 2^32'),
  ]
  with tf.control_dependencies(checks):
    slots, signs = hashing.locate(ids, dim=dim, chunk=chunk, m=m, seed=seed)
  return tf.gather(memory, slots) * signs
