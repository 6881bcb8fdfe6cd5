"""The builders' vocabulary, shared by every algorithm module and the registry
(which re-exports it): what a user sets (Settings), what a builder takes
(Training, those settings resolved), what it returns
(Built), how it refuses a task (NotApplicable), and the kinds of model a task
offers.
"""

import dataclasses
from typing import Any, Callable, Mapping

from tff_rec import capabilities
from tff_rec import settings
from tff_rec.aggregators import fedsubavg
from tff_rec.aggregators import inner
from tff_rec.data import sliced
from tff_rec.models import spec
from tff_rec.models import tables
from tff_rec.training import optimizers

STACKABLE = ('fedsubavg',)  # methods whose aggregation stacks on another's
# What a round reports where each STACKABLE correction is applied.
STACK_EVIDENCE = {'fedsubavg': fedsubavg.MEASURED}


class NotApplicable(ValueError):
  """The algorithm does not apply to this task or these settings; the message says why."""


class NotHonoured(ValueError):
  """A builder ignored an aggregation or stack its algorithm declares (a bug in it)."""


@dataclasses.dataclass(frozen=True)
class Settings:
  """The training settings a user may give any algorithm, as given: None takes
  the algorithm's default, else the task's (registry.training resolves them into
  a Training). The trainer's flags are these fields."""
  clients_per_round: int | None = settings.described(None, 'Clients sampled per round.')
  client_optimizer: str | None = settings.described(None, 'Client optimizer.',
                                            choices=optimizers.OPTIMIZERS)
  client_learning_rate: float | None = settings.described(None, 'Client learning rate.')
  server_optimizer: str | None = settings.described(
      None, 'Server optimizer (sgd at rate 1 replaces the model by the aggregate).',
      choices=optimizers.OPTIMIZERS)
  server_learning_rate: float | None = settings.described(None, 'Server learning rate.')
  server_adaptivity: float | None = settings.described(
      None, "adagrad / adam server: Reddi et al.'s tau, the epsilon and (adagrad) sqrt of the "
      "starting accumulator; TFF's unless set.")

  def __post_init__(self):
    if self.clients_per_round is not None and self.clients_per_round < 1:
      raise ValueError(f'clients_per_round must be >= 1, got {self.clients_per_round}')
    for name in ('client_learning_rate', 'server_learning_rate', 'server_adaptivity'):
      if getattr(self, name) is not None and not getattr(self, name) > 0:  # NaN too
        raise ValueError(f'{name} must be > 0, got {getattr(self, name)}')
    for name in ('client_optimizer', 'server_optimizer'):
      if getattr(self, name) not in (None, *optimizers.OPTIMIZERS):
        raise ValueError(f'unknown {name} {getattr(self, name)!r}; choose one of '
                         f'{", ".join(optimizers.OPTIMIZERS)}')

  def given(self) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclasses.dataclass(frozen=True)
class Training:
  """What every algorithm takes besides its own options."""
  client_optimizer: optimizers.OptimizerConfig = optimizers.OptimizerConfig('sgd', 0.1)
  server_optimizer: optimizers.OptimizerConfig = optimizers.OptimizerConfig('sgd', 1.0)
  aggregator: inner.InnerAggregator = inner.InnerAggregator()
  runtime: str = 'native'
  clients_per_round: int = 10
  # Other methods' aggregation stacked on the algorithm's own: 'fedsubavg' scales
  # each table row's aggregate by N / its heat (FAIR, CoLR, the FedAvg family).
  stack: tuple[str, ...] = ()
  # The bound on FedSubAvg's correction (the fedsubavg algorithm's max_correction,
  # which its builder sets with the stack); None: the paper's N / n_m.
  max_correction: float | None = None
  # What registry.build composes for the builder, from the task, the algorithm's
  # declared weighting and the stack: how its round weighs clients ('examples' or
  # 'clients': its own, or --heat), and with FedSubAvg stacked each table's N / n_m
  # per row, the heat counted as the round weighs clients. The composer applies the
  # scales (registry.check_honoured sees that it does).
  weighting: str = 'examples'
  row_scales: Mapping[str, Any] | None = dataclasses.field(default=None, compare=False)

  def table_scales(self, tables=None) -> dict[str, Any] | None:
    """row_scales of `tables` (default: every table), None where nothing is stacked."""
    if self.row_scales is None:
      return None
    return {t: s for t, s in self.row_scales.items() if tables is None or t in tables}

  def evidence(self) -> dict[str, Mapping[str, float | None]]:
    """What a round of this training reports where its aggregation takes effect, by
    the setting that asks for it: the inner aggregation's measurements (with the
    values its settings give) and each stacked correction's."""
    return {f'--aggregator={self.aggregator.name}': self.aggregator.evidence,
            **{f'--stack={m}': {STACK_EVIDENCE[m]: None} for m in self.stack}}

  def __post_init__(self):
    unknown = sorted(set(self.stack) - set(STACKABLE))
    if unknown:
      raise ValueError(f'cannot stack {unknown}; stackable: {", ".join(STACKABLE)}')
    if self.max_correction is not None and 'fedsubavg' not in self.stack:
      raise ValueError('max_correction bounds FedSubAvg\'s correction; it needs the '
                       'fedsubavg stack')


@dataclasses.dataclass(frozen=True)
class Built:
  """A learning process and how to feed and score it.

  process: as a builder returns it, the round's parts (rounds.Parts, or
    tff.learning's process as a function of its model_aggregator); as
    registry.build returns it, those parts composed (tff_rec.composer):
    initialize / next / get_model_weights / set_model_weights (a tff
    LearningProcess: TFF's composed one, or the project's round without client
    state; a composer.RoundProcess for rounds whose clients keep state or whose
    server weighs clients one by one).
  client_input: (client id, seed) -> that client's input to `next`.
  evaluate: (model weights, part) -> metrics; default the task's evaluate.
  training, kind: what registry.build composed and the kind of model it trained
    (set by it, not by a builder).
  """
  process: Any
  client_ids: list[str]
  client_input: Callable[[str, int], Any]
  evaluate: Callable[[Any, str], Mapping[str, float]] | None = None
  training: Training | None = None
  kind: str | None = None


def not_applicable(name: str, task, why: str) -> NotApplicable:
  return NotApplicable(f'--algorithm={name} does not apply to --task={task.NAME}: {why}')


def require(task, name: str, capability: type, why: str) -> None:
  """Raises NotApplicable (`why`) unless the task offers `capability` (a Protocol
  of tff_rec.capabilities)."""
  if not capabilities.offers(task, capability):
    raise not_applicable(name, task, why)


# The kinds of model a task offers, most specific first (a task may offer
# several: loo_ranking's MF with private users is also a Keras MF whose user
# table is shared).
MODEL_KINDS = {
    'mf': (capabilities.PrivateUsers,
           'a matrix factorization whose user vectors stay on their clients'),
    'weight_tables': (capabilities.WeightTables, 'a model of named weight tables (NeuMF)'),
    # The project's rounds slice these batches; tff.learning's read the datasets.
    'keras_batches': (capabilities.KerasBatches,
                      "a Keras model whose clients' batches are numpy arrays"),
    'keras': (capabilities.KerasModel, 'a Keras model'),
}


def model_kinds(task) -> list[str]:
  """The kinds of model `task` offers, most specific first."""
  return [kind for kind, (capability, _) in MODEL_KINDS.items()
          if capabilities.offers(task, capability)]


def table_of_variable(task) -> list[str | None] | None:
  """Per trainable variable of the task's Keras model: the declared table it is, or
  None (dense); None when no variable is a declared table (e.g. NeuMF's one layer)."""
  if not (hasattr(task, 'tables') and hasattr(task, 'keras_model')):
    return None
  per_variable = tables.variable_tables(spec.built_to_read(task), task.tables)
  return per_variable if any(per_variable) else None


def batches_type(task):
  """The TFF type of the task's `client_batches`."""
  return sliced.tff_type(task.client_batches(task.train_client_ids[0], 0))
