"""Every algorithm by name: its builder for each kind of model, its options, and
what it composes with.

An algorithm is one module that registers itself:

  registry.register('name', registry.Algorithm(
      'summary', builders={'keras': build}, options=Options,
      aggregators=('mean', 'secure', 'dp'), stacks=('fedsubavg',)))

`builders` is the visible table from the kind of model a task offers
(api.MODEL_KINDS: 'mf', 'weight_tables', 'keras') to the function that builds
the algorithm for it, `build(task, options, training, *, name) -> Built`
(`name`: the registered name, for messages). Another module may add the
algorithm's builder for a kind of model it owns (`implement`: FedAvg on a
matrix factorization is FedMF's round), so no algorithm module imports
another's. A variant (`base`: FedSubAvg, FedAdam) runs its base's builders
with its own settings. The registry picks the first kind the task offers,
most specific first, that the algorithm has a builder for; nothing else
decides which implementation a name runs. A builder returns its round's parts,
and the composer (tff_rec.composer) adds the aggregation: the inner one the user chose and the
stacked correction, which no builder makes or places. `aggregators` and
`stacks` are what the algorithm's round takes: the registry refuses any other
--aggregator or --stack before building, and after building refuses a round
that reports none of the declared ones it was given (check_honoured), so no
setting is ever silently ignored. The package's own
algorithms register the same way as a user's module (BUILTIN_MODULES,
imported on first use).
"""

import contextlib
import dataclasses
import importlib
from typing import Any, Callable, Mapping

from tff_rec import composer
from tff_rec.aggregators import inner
from tff_rec.algorithms import api
from tff_rec.algorithms import heat
from tff_rec.ops import hashed_embedding
from tff_rec.training import optimizers

# The builders' vocabulary (algorithms.api), for callers of the registry.
Built = api.Built
NotApplicable = api.NotApplicable
NotHonoured = api.NotHonoured
Training = api.Training
Settings = api.Settings
require = api.require

# The package's algorithm modules, each registering its algorithms when imported
# (a module that implements another's algorithm after it).
BUILTIN_MODULES = ('baselines', 'fedsubavg', 'scaffold', 'metaua', 'table_updates', 'fair',
                   'fedmf')


@dataclasses.dataclass(frozen=True)
class NoOptions:
  pass


@dataclasses.dataclass(frozen=True)
class Algorithm:
  summary: str
  # model kind (api.MODEL_KINDS) -> build(task, options, training, *, name) -> Built
  builders: Mapping[str, Callable[..., Built]] = dataclasses.field(default_factory=dict)
  options: type = NoOptions
  # Training settings it implies (e.g. FedAdam's server learning rate); flags override them.
  defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  # The server optimizer that defines it (FedAdam's adam), which flags may not change.
  server_optimizer: str | None = None
  # What its builders honour: inner.NAMES and STACKABLE entries.
  aggregators: tuple[str, ...] = ('mean',)
  stacks: tuple[str, ...] = ()
  composition_note: str = ''  # why it honours no more, for the refusal
  # Training settings (Settings fields) it has no use for: given, they are refused.
  unused_settings: Mapping[str, str] = dataclasses.field(default_factory=dict)  # name: why
  # A variant of the algorithm `base` runs its builders (less those for
  # `without_kinds`) with the variant's options and settings.
  base: str | None = None
  without_kinds: tuple[str, ...] = ()
  # The training its builders take from the given one and its options (FedSubAvg's
  # stacked correction, --secure_sum_bound's secure sum).
  applies: Callable[[Any, Training], Training] | None = None
  # How its rounds weigh clients: 'examples' or 'clients', or None: as --heat
  # chooses (options a heat.WeightingOptions), else the task's CLIENT_WEIGHTING.
  # The composer counts FedSubAvg's heat the same way (Training.weighting).
  weighs: str | None = None

  def __post_init__(self):
    unknown = set(self.unused_settings) - {f.name for f in dataclasses.fields(Settings)}
    if unknown:
      raise ValueError(f'unused_settings must name training settings; got {sorted(unknown)}')
    if set(self.builders) - set(api.MODEL_KINDS) or not (self.builders or self.base):
      raise ValueError(f'builders must map model kinds {sorted(api.MODEL_KINDS)} to '
                       f'builders; got {sorted(self.builders)}')
    if self.base and self.builders:
      raise ValueError(f'a variant of {self.base} runs its builders; it has none of its own')
    if set(self.aggregators) - set(inner.NAMES) or 'mean' not in self.aggregators:
      raise ValueError(f'aggregators must include mean and be among {inner.NAMES}; got '
                       f'{self.aggregators}')
    if set(self.stacks) - set(api.STACKABLE):
      raise ValueError(f'stacks must be among {api.STACKABLE}; got {self.stacks}')
    if self.server_optimizer and self.server_optimizer not in optimizers.OPTIMIZERS:
      raise ValueError(f'unknown server optimizer {self.server_optimizer!r}')
    _check_weighs(self.weighs)

  def own_settings(self) -> dict[str, Any]:
    """The training settings it sets over the task's: its server optimizer and its
    defaults."""
    pinned = {'server_optimizer': self.server_optimizer} if self.server_optimizer else {}
    return {**pinned, **self.defaults}


def _check_weighs(weighs: str | None) -> None:
  if weighs not in (None, *heat.HEAT):
    raise ValueError(f'weighs must be one of {heat.HEAT} or None, got {weighs!r}')


_REGISTERED: dict[str, Algorithm] = {}
_IMPLEMENTED: dict[str, dict[str, Callable[..., Built]]] = {}  # name -> kind -> builder
_WEIGHS: dict[tuple[str, str], str] = {}  # (name, kind) -> how an implementation weighs
_LOADING = []  # non-empty once the built-in modules are (being) imported


def algorithms() -> dict[str, Algorithm]:
  """Name -> Algorithm, for every registered algorithm, by name (an order that does
  not depend on which module was imported first)."""
  if not _LOADING:
    _LOADING.append(True)
    for module in BUILTIN_MODULES:
      importlib.import_module(f'tff_rec.algorithms.{module}')
  return dict(sorted(_REGISTERED.items()))


def register(name: str, algorithm: Algorithm) -> None:
  """Adds an algorithm (the package's own and a user's modules alike). Its options
  become trainer flags when it is registered before the trainer's flags are
  defined (`launch.train --import=MODULE` does that). It imports nothing, so a
  module may register while the package's modules are still being imported."""
  if not isinstance(algorithm, Algorithm):
    raise TypeError(f'register {name!r} with a registry.Algorithm, got {algorithm!r}')
  if name in _REGISTERED:
    raise ValueError(f'an algorithm named {name!r} is registered already')
  _REGISTERED[name] = algorithm


def implement(name: str, kind: str, build: Callable[..., Built], *,
              weighs: str | None = None) -> None:
  """Adds `build` as algorithm `name`'s builder for `kind` of model, from the module
  that owns that kind's round (FedMF's module builds FedAvg on a matrix
  factorization), which weighs clients as `weighs` says (Algorithm.weighs; None:
  as the algorithm's). `name` may be registered before or after."""
  if kind not in api.MODEL_KINDS or kind in _IMPLEMENTED.get(name, {}):
    raise ValueError(f'{name} has a builder for {kind!r} already, or {kind!r} is not among '
                     f'{sorted(api.MODEL_KINDS)}')
  _check_weighs(weighs)
  _IMPLEMENTED.setdefault(name, {})[kind] = build
  if weighs:
    _WEIGHS[name, kind] = weighs


def builders_of(name: str) -> dict[str, Callable[..., Built]]:
  """Model kind -> builder of the registered algorithm `name` (a variant's: its base's)."""
  algorithm = get(name)
  if algorithm.base:
    return {kind: build for kind, build in builders_of(algorithm.base).items()
            if kind not in algorithm.without_kinds}
  implemented = _IMPLEMENTED.get(name, {})
  twice = sorted(algorithm.builders.keys() & implemented.keys())
  if twice:
    raise ValueError(f'{name} has two builders for {twice}')
  return {**algorithm.builders, **implemented}


def with_arguments(build: Callable[..., Built], **arguments) -> Callable[..., Built]:
  """`build` with keyword `arguments` bound: one module's builder for each
  algorithm it runs (FAIR's baselines, CoLR's forms), named with its arguments in
  the implementations table. `options` replaces the algorithm's (FedAvg as FAIR's
  round with one full tier)."""
  if not arguments:
    return build
  fixed = arguments.pop('options', None)

  def build_with(task, options, training, *, name: str) -> Built:
    return build(task, options if fixed is None else fixed, training, name=name, **arguments)

  build_with.__module__ = build.__module__
  shown = ', '.join([f'{k}={v}' for k, v in arguments.items()]
                    + ([] if fixed is None else [_shown_options(fixed)]))
  build_with.__name__ = f'{build.__name__}({shown})'
  return build_with


def _shown_options(options) -> str:
  """Options' fields that differ from their defaults, as 'field=value'."""
  given = [f'{f.name}={getattr(options, f.name)}' for f in dataclasses.fields(options)
           if getattr(options, f.name) != f.default]
  return ', '.join(given) or 'default options'


def unregister(name: str) -> None:
  """Removes a registered algorithm (a user's, e.g. in its tests)."""
  get(name)
  del _REGISTERED[name]
  _IMPLEMENTED.pop(name, None)
  for kind in api.MODEL_KINDS:
    _WEIGHS.pop((name, kind), None)


def get(name: str) -> Algorithm:
  if name not in algorithms():
    raise ValueError(f'unknown algorithm {name!r}; choose one of {sorted(algorithms())}')
  return algorithms()[name]


def option_fields() -> dict[str, dataclasses.Field]:
  """Every option of every algorithm, by name (one flag each). A name two algorithms
  share must have one type: a user's option must not retype another's flag."""
  fields, owners = {}, {}
  for name, algorithm in algorithms().items():
    for field in dataclasses.fields(algorithm.options):
      first = fields.setdefault(field.name, field)
      owners.setdefault(field.name, name)
      if field.type != first.type:
        raise ValueError(f'option {field.name!r} is {_type_name(field.type)} in --algorithm='
                         f'{name} but {_type_name(first.type)} in --algorithm='
                         f'{owners[field.name]}: rename one')
  return fields


def _type_name(annotation) -> str:
  return getattr(annotation, '__name__', str(annotation))


def check_options(name: str, options) -> None:
  """Raises NotApplicable naming an option the algorithm `name` does not take."""
  known = {f.name for f in dataclasses.fields(get(name).options)}
  unknown = sorted(set(options) - known)
  if unknown:
    raise NotApplicable(f'--{unknown[0]} does not apply to --algorithm={name} (its options: '
                        f'{", ".join(sorted(known)) or "none"})')


def check_composition(name: str, training: Training) -> None:
  """Raises NotApplicable naming the --aggregator, --stack or --server_optimizer
  that algorithm `name` does not declare it honours (before any task is read)."""
  algorithm = get(name)
  note = f'; {algorithm.composition_note}' if algorithm.composition_note else ''
  if training.aggregator.name not in algorithm.aggregators:
    raise NotApplicable(
        f'--aggregator={training.aggregator.name} does not apply to --algorithm={name}: it '
        f'honours --aggregator={"|".join(algorithm.aggregators)}{note}')
  for method in training.stack:
    if training.stack.count(method) > 1 or method == name:
      raise NotApplicable(f'--stack={",".join(training.stack)} applies {method} twice'
                          + (f' (--algorithm={name} is it)' if method == name else ''))
    if method not in algorithm.stacks:
      declared = (f'--stack={"|".join(algorithm.stacks)}' if algorithm.stacks
                  else 'no --stack')
      raise NotApplicable(f'--stack={method} does not apply to --algorithm={name}: it '
                          f'honours {declared}{note}')
  wanted = algorithm.server_optimizer
  if wanted and training.server_optimizer.name != wanted:
    raise NotApplicable(f'--server_optimizer={training.server_optimizer.name} does not '
                        f'apply to --algorithm={name}: its server optimizer is {wanted}')


def kind_for(name: str, task) -> str:
  """The kind of the task's model that algorithm `name` trains: the first the task
  offers (most specific first) that it has a builder for."""
  builders = builders_of(name)
  for kind in api.model_kinds(task):
    if kind in builders:
      return kind
  needs = ' or '.join(api.MODEL_KINDS[k][1] for k in builders)
  raise api.not_applicable(name, task, f'it trains {needs}, and this task\'s model is none '
                           'of these')


def applied(name: str, training: Training, **options) -> tuple[Any, Training]:
  """(the algorithm's options, the training its builder takes): refuses what it does
  not take or honour, then applies what its options set (a variant's stack,
  --secure_sum_bound's secure sum)."""
  algorithm = get(name)
  check_options(name, options)
  check_composition(name, training)
  try:
    chosen = algorithm.options(**options)
  except ValueError as e:
    raise NotApplicable(f'--algorithm={name}: {e}') from None
  return chosen, algorithm.applies(chosen, training) if algorithm.applies else training


def build(name: str, task, training: Training = Training(), **options) -> Built:
  """The algorithm `name` on `task`, for `training.runtime` (which the runner
  chooses): a NotApplicable error says why it cannot run. Its builder takes the
  training composed here (composed_training: the weighting, FedSubAvg's scales
  when stacked) and returns its parts, which the composer makes the process;
  the round must show what was composed (check_honoured). For TFF's native
  worker, which has no secure sum and loads no op library, a secure sum is
  refused and the hashed-embedding lookups are traced as TF's own."""
  chosen, training = applied(name, training, **options)
  native = training.runtime != 'inprocess'
  if training.aggregator.needs_inprocess and native:
    raise NotApplicable(f'--aggregator={training.aggregator.name}: TFF\'s native worker '
                        'has no secure sum; use --runtime=inprocess')
  kind = kind_for(name, task)
  _refuse_other_kinds_settings(name, task, kind)
  training = composed_training(name, kind, task, chosen, training)
  with hashed_embedding.composite_only() if native else contextlib.nullcontext():
    built = builders_of(name)[kind](task, chosen, training, name=name)
    if not isinstance(built, Built):
      raise TypeError(f'the {kind} builder of --algorithm={name} returned {built!r}, not a '
                      'registry.Built')
    built = dataclasses.replace(
        built, process=composer.build_process(built.process, task, training, name))
  check_honoured(name, training, built)
  return dataclasses.replace(built, training=training, kind=kind)


def _refuse_other_kinds_settings(name: str, task, kind: str) -> None:
  """Refuses a task setting given (not at its default) that only algorithms training
  another kind of the task's model read (its field's metadata 'model_kind', e.g.
  loo_ranking's l2: the loss of FedMF's MF, which the Keras MF has not)."""
  config = getattr(task, 'config', None)
  for field in dataclasses.fields(config) if dataclasses.is_dataclass(config) else ():
    owner = field.metadata.get('model_kind')
    if owner not in (None, kind) and getattr(config, field.name) != field.default:
      readers = [n for n in algorithms() if owner in builders_of(n)]
      raise api.not_applicable(
          name, task, f'--{field.name} applies to the algorithms that train '
          f'{api.MODEL_KINDS[owner][1]} ({", ".join(readers)}), and --algorithm={name} trains '
          f'{api.MODEL_KINDS[kind][1]} here: leave it out')


def composed_training(name: str, kind: str, task, options, training: Training) -> Training:
  """`training` with what the builder of `kind` takes from the composer: how its
  round weighs clients, and FedSubAvg's N / n_m per table row when stacked, the
  heat counted the same way."""
  weighting = _weighting(name, kind, task, options)
  scales = (heat.row_scales(task, name, weighting, training.max_correction)
            if 'fedsubavg' in training.stack else None)
  return dataclasses.replace(training, weighting=weighting, row_scales=scales)


def _weighting(name: str, kind: str, task, options) -> str:
  """How the builder of `kind` weighs clients: its declared weighting, else --heat,
  else the task's; --heat is refused where the round fixes it."""
  owner = name
  while get(owner).base:
    owner = get(owner).base
  fixed = _WEIGHS.get((owner, kind), get(owner).weighs)
  chosen = getattr(options, 'heat', None)
  if fixed and chosen:
    module = builders_of(name)[kind].__module__.rsplit('.', 1)[-1]
    how = 'equally' if fixed == 'clients' else 'by their training examples'
    raise NotApplicable(f'--heat applies where --algorithm={name} trains a Keras model; on '
                        f'--task={task.NAME} it is {module}\'s round, which weighs clients '
                        f'{how}')
  return fixed or chosen or getattr(task, 'CLIENT_WEIGHTING', 'examples')


def check_honoured(name: str, training: Training, built: Built) -> None:
  """Raises NotHonoured unless what a round reports shows the inner aggregation and
  each stacked correction (Training.evidence): the composer places them, and a
  method's own factory around the inner one (rounds.Parts.around) must keep
  them. The runner checks the values again after round 1."""
  shown = {setting: set(names) for setting, names in training.evidence().items()}
  reported = composer.metric_names(built.process) if any(shown.values()) else set()
  for setting, names in shown.items():
    if names - reported:
      raise NotHonoured(f'--algorithm={name} declares {setting} but its built process '
                        f'reports no {", ".join(sorted(names - reported))}: its builder must '
                        'compose it (training.aggregator, training.stack)')


def implementations() -> dict[str, dict[str, str]]:
  """Name -> {model kind: the builder that kind runs (module.function)}."""
  def shown(name, builder):
    extra = f' + {name}' if get(name).base and get(name).applies else ''
    return f'{builder.__module__.rsplit(".", 1)[-1]}.{builder.__name__}{extra}'

  return {name: {kind: shown(name, builder) for kind, builder in builders_of(name).items()}
          for name in algorithms()}


def training(task, name: str, *, aggregator: inner.InnerAggregator = inner.InnerAggregator(),
             runtime: str = 'native', stack: tuple[str, ...] = (), **settings) -> Training:
  """The settings of algorithm `name` on `task`: the task's TRAIN_DEFAULTS, then the
  algorithm's defaults, then `settings` (fields of Settings; None takes the default)."""
  given = Settings(**settings).given()
  for unused, why in get(name).unused_settings.items():
    if unused in given:
      raise NotApplicable(f'--{unused} does not apply to --algorithm={name}: {why}')
  setting = {**task.TRAIN_DEFAULTS, **get(name).own_settings(), **given}
  adaptivity = setting.get('server_adaptivity')
  if 'server_adaptivity' not in given and setting['server_optimizer'] == 'sgd':
    adaptivity = None  # a default tau of an adaptive server the settings replaced by SGD
  return Training(
      client_optimizer=_optimizer('client', setting['client_optimizer'],
                                  setting['client_learning_rate']),
      server_optimizer=_optimizer('server', setting['server_optimizer'],
                                  setting['server_learning_rate'], adaptivity),
      aggregator=aggregator, runtime=runtime, clients_per_round=setting['clients_per_round'],
      stack=tuple(stack))


def _optimizer(side: str, name: str, rate: float, adaptivity: float | None = None
               ) -> optimizers.OptimizerConfig:
  """The client's or server's optimizer; an error naming the flag that chose it."""
  try:
    return optimizers.OptimizerConfig(name, rate, adaptivity)
  except ValueError as e:
    raise ValueError(f'--{side}_optimizer={name}: {e}') from None
