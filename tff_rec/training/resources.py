"""Resident memory of this process and of the runtime processes it started, and
whether what a run will hold fits this machine."""

import os

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


def machine_memory() -> int:
  """This machine's physical memory, in bytes."""
  return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')


def too_large(needed: int, what: str) -> str | None:
  """None when `needed` bytes fit in half this machine's memory, else what they
  are (`what`: the arithmetic's terms) and how far past it."""
  memory = machine_memory()
  if needed <= memory / 2:
    return None
  return (f'{what} take {needed / 2**30:.1f} GiB, more than half of this machine\'s '
          f'{memory / 2**30:.0f} GiB')
