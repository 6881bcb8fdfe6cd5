"""Resident memory of this process and of the runtime processes it started."""

import psutil

_MB = 1 << 20


def memory_metrics() -> dict[str, float]:
  """{'memory/rss_mb': this process, 'memory/children_rss_mb': its children}.

  The children are the TFF worker(s): on the native runtime the round's
  tensors live there, so growth can hide in them rather than in Python.
  """
  me = psutil.Process()
  children = 0
  for child in me.children(recursive=True):
    try:
      children += child.memory_info().rss
    except psutil.NoSuchProcess:
      pass
  return {'memory/rss_mb': me.memory_info().rss / _MB,
          'memory/children_rss_mb': children / _MB}
