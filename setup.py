"""tff_rec: federated recommendation research on TensorFlow Federated.

Install with `make setup`, which installs the pinned lock file
(requirements.txt) with --no-deps and then this package. Why not plain
`pip install .`: tensorflow-federated 0.87.0 declares jax/jaxlib 0.4.14, which
the registry does not serve, so its dependencies cannot be resolved; the lock
file lists every package instead. `install_requires` names the direct
dependencies other than TFF so that tools that read it see them.
"""
import pathlib
import re

import setuptools

_DIRECT = ('tensorflow', 'tensorflow-recommenders', 'numpy', 'pandas', 'absl-py',
           'matplotlib', 'psutil')


def _pinned(names):
  lock = pathlib.Path(__file__).with_name('requirements.txt').read_text()
  pins = dict(re.findall(r'^([A-Za-z0-9_.-]+)==(\S+)$', lock, re.M))
  return [f'{n}=={pins[n]}' for n in names]


setuptools.setup(
    name='tff_rec',
    version='0.1.0',
    description='Federated recommendation research on TensorFlow Federated',
    python_requires='>=3.11,<3.12',
    packages=setuptools.find_packages(include=['tff_rec*', 'tasks*', 'launch*']),
    install_requires=_pinned(_DIRECT),
)
