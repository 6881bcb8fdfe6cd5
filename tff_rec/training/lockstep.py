"""A round's client work for a whole cohort at once: what an algorithm's round
offers the in-process runtime (rounds.Parts.lockstep, run by
runtime.inprocess.LockstepClients)."""

import dataclasses
from typing import Any, Callable, Sequence

import tensorflow_federated as tff


@dataclasses.dataclass(frozen=True)
class Lockstep:
  """A cohort's clients trained as one computation: `stack`(their client
  data, their states (or []) as client_work takes them) -> numpy arrays side by side;
  `work`() -> the computation (broadcast, those) -> client_work's output for each
  client, every leaf with the clients on a leading axis (built only where the
  runtime runs it: tracing it costs seconds). The runtime hands it the clients
  longest first, by `size`(client data) (e.g. its examples), in groups whose
  `client_bytes` (the memory one more client adds) fit its bound. `auto`: whether
  --lockstep=auto runs it (where the runtimes benchmark measured it faster than
  client by client).
  """
  stack: Callable[[Sequence[Any], Sequence[Any]], Any]
  work: Callable[[], tff.Computation]
  size: Callable[[Any], int]
  client_bytes: int
  auto: bool = True
